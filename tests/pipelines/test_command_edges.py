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
    # a basic ISO date read as epoch seconds: status "at 1970-08-23", detect --as-of a replay of 1970
    (["--now", "20260115"], "is ambiguous: as epoch seconds it is 1970-08-23 11:48:35; write the date as 2026-01-15"),
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


@pytest.mark.parametrize("flag", ["--webhook", "--alertmanager"])
def test_an_empty_sink_url_is_refused_not_read_as_no_sink(tmp_path, monkeypatch, capsys, flag) -> None:
    # `--webhook "$UNSET"` silently turned off the sink HEADROOM_ALERT_WEBHOOK set, exit 0
    monkeypatch.setenv("HEADROOM_ALERT_WEBHOOK", "http://127.0.0.1:9/hook")
    with pytest.raises(SystemExit) as stop:
        cli.main(["detect", "--db", str(tmp_path / "w.duckdb"), flag, ""])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert stop.value.code == 2 and last.endswith(f"argument {flag}: an empty URL (an unset variable?)")


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


def _as_user_without_dac() -> list[str]:
    """A prefix under which file modes bind this process: nothing for a normal user; for root,
    setpriv dropping the capabilities that override them (skip where there is none)."""
    import os
    import shutil

    if os.geteuid() != 0:
        return []
    if not shutil.which("setpriv"):
        pytest.skip("root, and no setpriv to drop CAP_DAC_OVERRIDE")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner"]


def test_a_report_folder_this_user_cannot_write_is_the_machine_exit_1(tmp_path: Path) -> None:
    """As documented in errors.md (no permission, result file: exit 1), for report and run alike."""
    import subprocess
    import sys

    from pipelines.store import warehouse

    db = tmp_path / "wh.duckdb"
    warehouse.connect(db).close()
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    hr = [*_as_user_without_dac(), sys.executable, "-m", "pipelines.cli"]
    env = {**__import__("os").environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
           "HEADROOM_REPORT_DIR": str(locked / "rep")}
    try:
        rep = subprocess.run([*hr, "report", "--db", str(db), "--out", str(locked / "rep")], capture_output=True,
                             text=True, env=env, timeout=120)
        run = subprocess.run([*hr, "run", "--db", str(db), "--stages", "report"], capture_output=True, text=True,
                             env=env, timeout=120)
    finally:
        locked.chmod(0o755)
    if rep.returncode == 0:
        pytest.skip("file modes do not deny this user")
    assert rep.returncode == 1 and rep.stderr.strip() == (
        f"headroom report: error: {locked}/rep/report.html: permission denied; nothing was written (what was there "
        "is unchanged): let this user write the file and its folder (chmod, chown), or write elsewhere"), rep.stderr
    assert run.returncode == 1 and "HEADROOM_REPORT_DIR" in run.stderr and "permission denied" in run.stderr
    assert not (locked / "rep").exists()


def test_a_bad_path_setting_is_named_in_its_error(tmp_path: Path, capsys, monkeypatch) -> None:
    """'a bad value stops the command ... naming the variable' (operations.md), for the paths too."""
    from pipelines.store import warehouse

    db = tmp_path / "wh.duckdb"
    warehouse.connect(db).close()
    monkeypatch.setenv("HEADROOM_PLAN_CONFIG", str(tmp_path / "none.toml"))
    assert cli.main(["plan", "--db", str(db)]) == 2
    assert _error(capsys).startswith(f"headroom plan: error: HEADROOM_PLAN_CONFIG: {tmp_path}/none.toml: no such")
    assert cli.main(["plan", "--db", str(db), "--config", str(tmp_path / "other.toml")]) == 2
    assert _error(capsys).startswith(f"headroom plan: error: {tmp_path}/other.toml: ")
    monkeypatch.delenv("HEADROOM_PLAN_CONFIG")
    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv("HEADROOM_DATA_DIR", str(tmp_path / "afile" / "demo"))
    assert cli.main(["run", "--db", str(db), "--stages", "none"]) == 2
    assert _error(capsys).startswith("headroom run: error: HEADROOM_DATA_DIR ")
    if Path("/proc/self").is_dir():  # a folder no one can make: named on writing the first file
        monkeypatch.setenv("HEADROOM_DATA_DIR", "/proc/headroom-demo")
        assert cli.main(["run", "--db", str(db), "--stages", "none"]) in (1, 2)
        assert _error(capsys).startswith("headroom run: error: HEADROOM_DATA_DIR: /proc/headroom-demo/")


def test_an_input_this_user_cannot_read_is_named_so_and_the_others_go_in(tmp_path: Path, caplog) -> None:
    """Worded for reading (not an output's advice), exit 1 (the machine), the next file ingested;
    in an --input folder an unreadable export and a link to nothing are named, not dropped."""
    import subprocess
    import sys

    from pipelines.ingest.loading import inputs_in

    good = tmp_path / "failures.csv"
    good.write_text("ts,device_id,node_id,failure_type\n2026-01-01T00:00:00Z,g1,n1,xid\n")
    folder = tmp_path / "in"
    folder.mkdir()
    locked = folder / "failures.csv"
    locked.write_text(good.read_text())
    (folder / "export.json").write_text("{}")
    (folder / "telemetry.csv").symlink_to(tmp_path / "gone.csv")
    for f in (locked, folder / "export.json"):
        f.chmod(0)
    hr = [*_as_user_without_dac(), sys.executable, "-m", "pipelines.cli"]
    env = {**__import__("os").environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    r = subprocess.run([*hr, "ingest", "--kind", "failures", "--db", str(tmp_path / "wh.duckdb"), str(locked),
                        str(good)], capture_output=True, text=True, env=env, timeout=120)
    if r.returncode == 0:
        pytest.skip("file modes do not deny this user")
    assert r.returncode == 1, r.stderr
    assert r.stdout.splitlines()[0] == (f"error: {locked}: cannot be read (permission denied): let this user read "
                                        "it (chmod, chown)")
    assert f"{good}: read 1, loaded 1" in r.stdout
    if hr[0] == "setpriv":  # this process reads what the child could not: the folder's look as that user
        code = ("import logging, sys; from pathlib import Path; from pipelines.ingest.loading import inputs_in; "
                "logging.basicConfig(); print([i['path'] for i in inputs_in(Path(sys.argv[1]))])")
        look = subprocess.run([*hr[:-3], sys.executable, "-c", code, str(folder)], capture_output=True, text=True,
                              env=env, timeout=120)
        err = look.stderr
        assert look.stdout.strip() == f"[{str(locked)!r}]", look.stdout
    else:
        inputs_in(folder)
        err = caplog.text
    assert "1 file(s) unreadable to this user (permission denied), not read: export.json" in err
    assert "1 file(s) link to nothing, not read: telemetry.csv" in err


def test_run_without_input_never_loads_a_made_up_fleet_into_a_real_warehouse(tmp_path: Path, capsys) -> None:
    """`run --db prod.duckdb --stages plan` generated the demo fleet and upserted it there: the
    cutoff moved to 2026, the real pools fell out of the plan, the made-up ones filled it."""
    util = tmp_path / "mine.csv"
    util.write_text("ts,cluster,pool,node_id,resource,used,capacity\n2013-07-01T00:00:00,bb,rnd,n1,cpu,1,8\n")
    db = tmp_path / "prod.duckdb"
    assert cli.main(["ingest", "--kind", "utilization", "--db", str(db), str(util)]) == 0
    capsys.readouterr()
    assert cli.main(["run", "--db", str(db), "--stages", "plan"]) == 2
    assert f"{db} holds data ingested from {util}; without --input, run generates a synthetic fleet" in _error(capsys)
    from pipelines.store import warehouse
    with warehouse.connect(db, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM ingest_batches").fetchone()[0] == 1


def test_run_never_mixes_two_fleets_in_one_warehouse(tmp_path: Path, monkeypatch, capsys) -> None:
    """A warehouse holding a generated fleet takes neither the user's files (`run --input`, the
    README's next step after the demo) nor a fleet generated with other settings: both were
    upserted beside it, the made-up catalog, failures and prices feeding the other's pools."""
    import json

    demo, mine = tmp_path / "demo", tmp_path / "mine"
    for folder in (demo, mine):
        folder.mkdir()
        (folder / "utilization.csv").write_text("ts,cluster,pool,node_id,resource,used,capacity\n"
                                                "2026-01-05T00:00:00,c,p,n1,gpu,1,8\n")
    (demo / "manifest.json").write_text(json.dumps({"generator": "headroom synthetic fleet", "nodes": 3, "days": 14,
                                                    "seed": 0, "start": "2026-01-05T00:00:00"}))
    db = tmp_path / "w.duckdb"
    assert cli.main(["ingest", "--kind", "utilization", "--db", str(db), str(demo / "utilization.csv")]) == 0
    capsys.readouterr()
    assert cli.main(["run", "--db", str(db), "--input", str(mine), "--stages", "none"]) == 2
    assert f"{db} holds the generated fleet ingested from {demo}; loading {mine} into it would mix" in _error(capsys)
    monkeypatch.setenv("HEADROOM_DATA_DIR", str(demo))
    assert cli.main(["run", "--db", str(db), "--nodes", "4", "--days", "14", "--stages", "none"]) == 2
    assert (f"{db} holds a generated fleet of nodes=3, days=14, seed=0, start=2026-01-05; one of nodes=4, days=14, "
            "seed=0, start=2026-01-05 would mix" in _error(capsys))
    # the folder regenerated since (its manifest no longer tells what was ingested): refused too
    (demo / "utilization.csv").write_text("ts,cluster,pool,node_id,resource,used,capacity\n")
    assert cli.main(["run", "--db", str(db), "--nodes", "3", "--days", "14", "--stages", "none"]) == 2
    err = _error(capsys)
    assert f"whose files in {demo} have changed since it was ingested (such as utilization.csv)" in err
    # and the other way: a generated fleet's folder given as --input to a warehouse of other data
    other = tmp_path / "real.duckdb"
    assert cli.main(["ingest", "--kind", "utilization", "--db", str(other), str(mine / "utilization.csv")]) == 0
    capsys.readouterr()
    assert cli.main(["run", "--db", str(other), "--input", str(demo), "--stages", "none"]) == 2
    assert f"{demo} is a generated fleet and {other} holds other data" in _error(capsys)
    from pipelines.store import warehouse
    with warehouse.connect(db, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM ingest_batches").fetchone()[0] == 1
