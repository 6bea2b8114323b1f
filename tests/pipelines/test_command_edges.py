"""Edges of convert, generate, serve and status that a review met: nothing made up, nothing
half written, one line for what cannot be used."""
from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest

from pipelines import cli

NAB = "timestamp,value\n2014-01-01 00:00:00,10\n2014-01-01 00:05:00,{}\n2014-01-01 00:10:00,30\n"


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_nab_values_infinite_or_over_100_are_not_made_a_full_cpu(tmp_path: Path, capsys, caplog) -> None:
    src = tmp_path / "ec2.csv"
    src.write_text(NAB.format("inf"))  # clipped to 1.0 and loaded as a full CPU
    assert cli.main(["convert", "--from", "nab", "--out", str(tmp_path / "o"), str(src)]) == 2
    assert "line 3, column 'value': 'inf' is not a finite number" in _error(capsys)
    src.write_text(NAB.format("140"))
    assert cli.main(["convert", "--from", "nab", "--out", str(tmp_path / "o"), str(src)]) == 0
    assert pd.read_csv(tmp_path / "o" / "utilization.csv")["used"].max() == 1.0
    assert "1 reading(s) above 100% CPU clipped to 100%" in caplog.text


def test_convert_never_writes_over_its_input_nor_reads_a_file_twice(tmp_path: Path, capsys) -> None:
    src = tmp_path / "utilization.csv"
    src.write_text(NAB.format("20"))
    assert cli.main(["convert", "--from", "nab", "--out", str(tmp_path), str(src)]) == 2
    assert "would replace the input" in _error(capsys) and src.read_text() == NAB.format("20")
    again = f"{tmp_path}/./utilization.csv"
    assert cli.main(["convert", "--from", "nab", "--out", str(tmp_path / "o"), str(src), again]) == 2
    assert "given twice" in _error(capsys) and not (tmp_path / "o").exists()


def test_generate_that_fails_midway_leaves_the_old_fleet_whole(tmp_path: Path, capsys) -> None:
    old = tmp_path / "fleet"
    assert cli.main(["generate", "--out", str(old), "--nodes", "3", "--days", "2", "--seed", "7"]) == 0
    before = {p.name: p.read_bytes() for p in old.iterdir() if p.name != "catalog.csv"}
    (old / "catalog.csv").unlink()
    (old / "catalog.csv").mkdir()  # new files were renamed in one by one before this one failed
    capsys.readouterr()
    assert cli.main(["generate", "--out", str(old), "--nodes", "4", "--days", "2", "--seed", "1"]) == 2
    assert "catalog.csv: cannot write, it is a folder" in _error(capsys)
    assert {p.name: p.read_bytes() for p in old.iterdir() if p.is_file()} == before
    assert not list(old.glob(".*.tmp"))


def test_time_options_read_a_zone_as_ingest_does(tmp_path: Path, db_path: Path, capsys) -> None:
    """pandas dropped a zone abbreviation with a warning the CLI hid: "01:00 CET" ran at 01:00
    UTC in detect and replay while ingest read the same text as 00:00 UTC."""
    from pipelines.commands.detect import as_of
    from pipelines.commands.plan import _time_option

    util = tmp_path / "u.csv"
    util.write_text("ts,cluster,pool,node_id,resource,used,capacity\n2026-11-08T00:00:00,c,p,n1,gpu,1,8\n")
    assert cli.main(["ingest", "--kind", "utilization", "--db", str(db_path), str(util)]) == 0
    assert as_of("2026-11-05 01:00 CET", str(db_path)) == datetime(2026, 11, 5, 0, 0)
    assert as_of("2026-11-05T01:00:00 +01:00", str(db_path)) == datetime(2026, 11, 5, 0, 0)
    assert _time_option("2026-11-07 19:00 EST") == "2026-11-08T00:00:00"
    assert _time_option("2026-07-05 14:00 Europe/Berlin") == "2026-07-05T12:00:00"
    capsys.readouterr()
    assert cli.main(["status", "--db", str(db_path), "--now", "2026-11-08 09:00 Europe/Berlin", "--json"]) in (0, 1)
    assert '"now": "2026-11-08T08:00:00+00:00"' in capsys.readouterr().out


@pytest.mark.parametrize(("args", "said"), [
    (["--now", "0001-01-01T00:00+01:00"], "is not between 1970 and 2200"),  # a traceback
    (["--max-age-hours", "inf"], "--max-age-hours must be a finite number > 0, got inf"),  # nothing ever stale
])
def test_status_refuses_times_and_ages_it_cannot_use(tmp_path: Path, capsys, args, said) -> None:
    db = tmp_path / "wh.duckdb"
    db.write_bytes(b"")
    assert cli.main(["status", "--db", str(db), *args]) == 2
    assert said in _error(capsys)


def test_serve_without_a_warehouse_or_an_input_folder_says_so(tmp_path: Path, capsys) -> None:
    assert cli.main(["serve", "--db", str(tmp_path / "none.duckdb")]) == 2  # every scheduled run would fail
    assert "no warehouse, and no --input (HEADROOM_INPUT_DIR)" in _error(capsys)


@pytest.mark.parametrize("argv", [
    ["generate", "--out", ""],  # wrote its seven files into the current folder
    ["convert", "--from", "nab", "--out", " ", "x.csv"],
    ["serve", "--list", "--input", ""],
    ["status", "--db", ""],
    ["faults", "evaluate", "--telemetry", "t.csv", "--failures", ""],
])
def test_an_empty_path_is_refused_not_read_as_the_current_folder(tmp_path, monkeypatch, capsys, argv) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    last = capsys.readouterr().err.strip().splitlines()[-1]  # argparse's usage, then its error
    assert stop.value.code == 2 and last.endswith(": an empty path (an unset variable?)")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(("argv", "said"), [
    # the replay's CSV replaced the whole warehouse, exit 0
    (["plan", "replay", "--db", "wh.duckdb", "--out", "wh.duckdb"], "--out wh.duckdb is the warehouse --db"),
    (["plan", "replay", "--out", "./wh.duckdb"], "--out wh.duckdb is the warehouse (wh.duckdb)"),  # HEADROOM_DB
    (["plan", "replay", "--utilization", "u.csv", "--out", "link.csv"], "is the input --utilization (u.csv)"),
    (["backtest", "--input", "u.csv", "--horizon", "2", "--season-length", "24", "--windows", "3", "--out", "u.csv"],
     "--out u.csv is the input --input"),
    (["detect", "--db", "wh.duckdb", "--jsonl", "wh.duckdb"],
     "--jsonl wh.duckdb is the warehouse --db (wh.duckdb): alerts appended to it would spoil it"),
    (["detect", "--db", "wh.duckdb", "--detectors", "bursts"], "HEADROOM_ALERT_JSONL wh.duckdb is the warehouse"),  # set below
])
def test_an_output_over_an_input_is_refused_before_any_work(tmp_path, monkeypatch, capsys, argv, said) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HEADROOM_DB", "wh.duckdb")
    if "--jsonl" not in argv:  # the alert file's setting is checked as the option is
        monkeypatch.setenv("HEADROOM_ALERT_JSONL", "wh.duckdb")
    (tmp_path / "wh.duckdb").write_bytes(b"not read")
    (tmp_path / "u.csv").write_text("unique_id,ds,y\n")
    (tmp_path / "link.csv").symlink_to("u.csv")  # the file it leads to would be replaced
    assert cli.main(argv) == 2
    assert said in _error(capsys)
    assert (tmp_path / "wh.duckdb").read_bytes() == b"not read" and (tmp_path / "u.csv").read_text() == "unique_id,ds,y\n"


def test_times_before_1970_are_one_line_not_a_traceback(tmp_path: Path, db_path: Path, capsys) -> None:
    """pandas' nanosecond clock starts in 1677: year 1 crashed detect's reads and replay's search."""
    from pipelines.plan.replay import ReplayError, span_of

    util = tmp_path / "u.csv"
    util.write_text("ts,cluster,pool,node_id,resource,used,capacity\n2026-01-01T00:00:00,c,p,n1,gpu,1,8\n")
    assert cli.main(["ingest", "--kind", "utilization", "--db", str(db_path), str(util)]) == 0
    capsys.readouterr()
    assert cli.main(["detect", "--db", str(db_path), "--detectors", "bursts", "--as-of", "0001-01-01"]) == 2
    assert "--as-of '0001-01-01' is not now or data, and is not between 1970 and 2200" in _error(capsys)
    # a season no calibration window can hold calibrated nothing, silently
    assert cli.main(["detect", "--db", str(db_path), "--detectors", "bursts", "--season-length", "100000"]) == 2
    assert "--season-length must be 1 to 648 hours" in _error(capsys)
    series = pd.Series(1.0, index=pd.date_range("2026-01-01", periods=72, freq="h"), name="c/p/gpu")
    for start in ("1000-01-01", "0001-01-01"):
        with pytest.raises(ReplayError, match=f"--start/--end: '{start}' is not between 1970 and 2200"):
            span_of(series, start, None)
