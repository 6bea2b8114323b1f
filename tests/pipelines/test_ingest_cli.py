"""`headroom ingest` end to end, concurrent writers, and the ingest flow under Prefect."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pipelines import cli
from pipelines.store import warehouse

HEADER = "ts,cluster,pool,node_id,resource,used,capacity\n"


def util_file(path: Path, n: int = 3, node: str = "n1", bad: bool = False) -> Path:
    lines = [f"2026-01-01T{h:02d}:00:00,c,p,{node},gpu,1,8" for h in range(n)]
    if bad:
        lines.append("2026-01-01T23:00:00,c,p,n1,gpu,-5,8")
    path.write_text(HEADER + "\n".join(lines) + "\n")
    return path


def test_cli_ingest_reports_and_is_idempotent(tmp_path, db_path, capsys):
    f = util_file(tmp_path / "u.csv", bad=True)
    assert cli.main(["ingest", "--kind", "utilization", "--db", str(db_path), str(f)]) == 0
    out = capsys.readouterr().out
    assert "read 4, loaded 3, rejected 1" in out and "line 5: used: negative" in out
    assert cli.main(["ingest", "--kind", "utilization", "--db", str(db_path), str(tmp_path)]) == 0
    assert "skipped, already ingested" in capsys.readouterr().out
    with warehouse.open_warehouse(db_path) as con:
        assert con.execute("SELECT count(*) FROM utilization").fetchone()[0] == 3
    # a new day's header-only file is byte for byte an earlier day's: not "already ingested"
    for day in ("d1", "d2"):
        (tmp_path / day).mkdir()
        (tmp_path / day / "failures.csv").write_text("ts,device_id,node_id,failure_type\n")
        assert cli.main(["ingest", "--kind", "failures", "--db", str(db_path), str(tmp_path / day)]) == 0
    assert "d2/failures.csv: no rows (the same content as an earlier file" in capsys.readouterr().out


def test_labels_given_for_a_file_that_carries_its_own_are_said_to_be_unused(tmp_path, db_path, capsys):
    """--cluster on a CSV of the contract did nothing, without a word."""
    f = util_file(tmp_path / "u.csv")
    assert cli.main(["ingest", "--kind", "utilization", "--cluster", "x", "--db", str(db_path), str(f)]) == 0
    err = capsys.readouterr().err
    assert "--cluster/--pool apply only to prometheus-json and gwa-t12 files" in err
    with warehouse.open_warehouse(db_path) as con:
        assert con.execute("SELECT DISTINCT cluster FROM utilization").fetchall() == [("c",)]


def test_cli_strict_exit_1_and_unusable_exit_2(tmp_path, db_path, capsys):
    bad = util_file(tmp_path / "bad.csv", bad=True)
    assert cli.main(["ingest", "--kind", "utilization", "--strict", "--db", str(db_path), str(bad)]) == 1
    assert "strict: nothing written" in capsys.readouterr().out
    broken = tmp_path / "broken.csv"
    broken.write_text("ts,node_id\n2026-01-01,n1\n")
    assert cli.main(["ingest", "--kind", "utilization", "--db", str(db_path), str(broken)]) == 2
    assert "broken.csv: missing column(s) cluster, pool, resource, used, capacity" in capsys.readouterr().out
    with warehouse.open_warehouse(db_path) as con:
        assert con.execute("SELECT count(*) FROM utilization").fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM ingest_batches").fetchone()[0] == 0


HOLD = textwrap.dedent("""
    import sys, time, pathlib
    from pipelines.store import warehouse
    con = warehouse.connect(sys.argv[1])
    pathlib.Path(sys.argv[2]).write_text("locked")
    time.sleep(float(sys.argv[3]))
    con.close()
""")


def _hold_lock(db_path: Path, tmp_path: Path, seconds: float) -> subprocess.Popen:
    flag = tmp_path / "locked.flag"
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(db_path), str(flag), str(seconds)])
    deadline = time.monotonic() + 60
    while not flag.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "lock holder did not start"
        time.sleep(0.05)
    return proc


def test_second_writer_waits_for_the_lock(tmp_path, db_path, monkeypatch, capsys):
    f = util_file(tmp_path / "u.csv")
    holder = _hold_lock(db_path, tmp_path, 2.0)
    monkeypatch.setenv("HEADROOM_LOCK_TIMEOUT", "60")
    t0 = time.monotonic()
    assert cli.main(["ingest", "--kind", "utilization", "--db", str(db_path), str(f)]) == 0
    assert time.monotonic() - t0 > 0.5  # it did wait
    holder.wait(timeout=30)
    with warehouse.open_warehouse(db_path) as con:
        assert con.execute("SELECT count(*) FROM utilization").fetchone()[0] == 3


def test_second_writer_gives_up_with_a_clear_message(tmp_path, db_path, monkeypatch, capsys):
    f = util_file(tmp_path / "u.csv")
    holder = _hold_lock(db_path, tmp_path, 5.0)
    monkeypatch.setenv("HEADROOM_LOCK_TIMEOUT", "0.5")
    try:
        assert cli.main(["ingest", "--kind", "utilization", "--db", str(db_path), str(f)]) == 1
        assert "is locked by another process" in capsys.readouterr().err
    finally:
        holder.wait(timeout=30)
    with warehouse.open_warehouse(db_path) as con:  # the file is intact and usable
        assert con.execute("SELECT count(*) FROM utilization").fetchone()[0] == 0


def test_every_command_honours_the_lock_timeout_setting(prefect_harness, tmp_path, db_path, monkeypatch,
                                                        capsys):
    """detect (like train, run and the served flows) opens the warehouse without a timeout
    of its own: HEADROOM_LOCK_TIMEOUT applies there too, not a fixed 30 s."""
    with warehouse.open_warehouse(db_path):
        pass
    holder = _hold_lock(db_path, tmp_path, 12.0)
    monkeypatch.setenv("HEADROOM_LOCK_TIMEOUT", "0.5")
    try:
        t0 = time.monotonic()
        assert cli.main(["detect", "--db", str(db_path), "--detectors", "bursts"]) == 1
        assert time.monotonic() - t0 < 10 and "waited 0s" in capsys.readouterr().err
        # commands that do not word the lock themselves say it in one line too, no traceback
        for argv in (["status"], ["plan", "replay", "--pool", "p", "--models", "seasonal_naive"]):
            assert cli.main([*argv, "--db", str(db_path)]) == 1, argv
            err = capsys.readouterr().err.strip()
            assert len(err.splitlines()) == 1 and "is locked by another process" in err, err
    finally:
        holder.wait(timeout=30)


def test_two_ingests_at_once_both_land(tmp_path, db_path):
    files = [util_file(tmp_path / f"u{i}.csv", n=24, node=f"n{i}") for i in range(2)]
    env_cmd = [sys.executable, "-m", "pipelines.cli", "ingest", "--kind", "utilization", "--db", str(db_path)]
    procs = [subprocess.Popen(env_cmd + [str(f)], stdout=subprocess.PIPE, text=True) for f in files]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    with warehouse.open_warehouse(db_path) as con:
        assert con.execute("SELECT count(*) FROM utilization").fetchone()[0] == 48


@pytest.mark.slow
def test_ingest_flow_under_prefect(prefect_harness, tmp_path, db_path):
    from pipelines.flows.ingest import ingest_flow

    inputs = [{"kind": "utilization", "path": str(util_file(tmp_path / "u.csv", bad=True))}]
    out = ingest_flow(str(db_path), inputs)
    assert out["files"][0]["rows_loaded"] == 3 and out["files"][0]["rows_rejected"] == 1
    assert out["summary"]["rows"]["utilization"] == 3
    again = ingest_flow(str(db_path), inputs)
    assert again["files"][0]["status"] == "skipped"
    with pytest.raises(Exception, match="missing column"):
        broken = tmp_path / "broken.csv"
        broken.write_text("ts\n1\n")
        ingest_flow(str(db_path), [{"kind": "utilization", "path": str(broken)}])


def test_an_interrupted_query_is_reported_not_a_traceback(monkeypatch, capsys):
    import duckdb

    from pipelines import cli
    def interrupted(args):
        raise duckdb.InterruptException("INTERRUPT Error: Query interrupted")

    parser = cli.build_parser()
    args = parser.parse_args(["ingest", "--kind", "utilization", "x.csv"])
    monkeypatch.setattr(cli, "build_parser", lambda: _Fixed(args, interrupted))
    assert cli.main(["ingest", "--kind", "utilization", "x.csv"]) == 130
    assert "interrupted (the step in progress was rolled back)" in capsys.readouterr().err


class _Fixed:
    """A parser that returns the given args with their command swapped for ``func``."""

    def __init__(self, args, func):
        self.args, self.func = args, func

    def parse_args(self, argv):
        self.args.func = self.func
        return self.args


def test_a_closed_pipe_ends_quietly_with_141(tmp_path):
    """`headroom ... | head`: the reader went away; no traceback, exit 141 as Unix tools do.
    Run as a process: the handler points stdout at /dev/null, which pytest's capture would not like."""
    code = ("import sys; from pipelines import cli\n"
            "def closed(args): raise BrokenPipeError(32, 'Broken pipe')\n"
            "p = cli.build_parser(); a = p.parse_args(['ingest', '--kind', 'utilization', 'x.csv']); a.func = closed\n"
            "cli.build_parser = lambda: type('P', (), {'parse_args': lambda self, argv: a})()\n"
            "sys.exit(cli.main(['ingest', '--kind', 'utilization', 'x.csv']))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert proc.returncode == 141 and "Traceback" not in proc.stderr, proc.stderr


def test_the_ingest_flow_retries_passing_io_trouble_but_not_a_lock() -> None:
    """The connect waits HEADROOM_LOCK_TIMEOUT itself: two retries made `run` and the hourly
    ingest wait three times that, while the message quoted the setting."""
    from types import SimpleNamespace

    from pipelines.flows.ingest import _io_only
    from pipelines.ingest.adapters import IngestFileError

    def retried(exc: BaseException) -> bool:
        return _io_only(None, None, SimpleNamespace(data=exc))  # type: ignore[arg-type]

    assert not retried(warehouse.WarehouseLockedError("locked (waited 5s)"))
    assert retried(OSError("stale NFS handle")) and not retried(FileNotFoundError("gone"))
    assert not retried(IngestFileError("u.csv", "bad"))


def test_names_a_reader_cannot_see_or_print_and_numbers_past_any_unit_are_rejects(tmp_path, db_path, capsys):
    """A review loaded 'c1\\t' beside 'c1' as two look-alike clusters, an ESC sequence and a
    right-to-left override as node ids (sent raw to the terminal), a 700,000-character node id,
    and 1e308 GPUs (summed to inf: train dropped the pool, replay failed); '1_0' loaded as 10."""
    long = "x" * 257
    rows = ["c1,p,n1,gpu,1,8", "c1\t,p,n2,gpu,1,8", "c1,p,n\x1b[2J,gpu,1,8", "c1,p,n\u202egpj.exe,gpu,1,8",
            "c1,p,\u200bn1,gpu,1,8", f"c1,p,{long},gpu,1,8", "c1,p,n6,gpu,1e308,1e308",
            "c1,p,n\u00e9\u65e5,gpu,1,8", f"c1,p,{long[:256]},gpu,999999999999999,1e15"]
    f = tmp_path / "u.csv"
    f.write_text(HEADER + "".join(f"2026-01-01T00:00:00Z,{r}\n" for r in rows), encoding="utf-8")
    assert cli.main(["ingest", "--kind", "utilization", "--db", str(db_path), str(f)]) == 0
    out = capsys.readouterr().out
    assert "read 9, loaded 2, rejected 7" in out and "\x1b" not in out and "\u202e" not in out
    with warehouse.open_warehouse(db_path, read_only=True) as con:
        loaded = {r[0] for r in con.execute("SELECT node_id FROM utilization").fetchall()}
        why = dict(con.execute("SELECT line, reason FROM rejects").fetchall())
    assert loaded == {"n1", "n\u00e9\u65e5"}
    assert why[3] == "cluster: a control or invisible character in 'c1\t'"
    assert why[4].startswith("node_id: a control or invisible") and why[6].startswith("node_id: a control")
    assert why[7] == "node_id: longer than 256 characters"
    assert why[8].startswith("used: 1e15 or beyond, no plausible value '1e")
    assert why[8].count("1e15 or beyond") == 2 and why[10].startswith("capacity: 1e15 or beyond")


@pytest.mark.parametrize("option, value, why", [("--pool", "a/b", "cluster and pool names cannot contain '/'"),
                                                ("--cluster", " ", "empty"),
                                                ("--pool", "p\n1", "a control or invisible character in 'p\\n1'"),
                                                ("--pool", "p\t", "a control or invisible character in 'p\\t'")])
def test_a_label_option_no_row_could_carry_stops_before_the_file_is_recorded(tmp_path, db_path, capsys, option,
                                                                            value, why):
    """Every row of the file became a reject and the file was recorded as ingested: the same
    file with a good label was then 'skipped, already ingested'."""
    f = util_file(tmp_path / "u.csv")
    assert cli.main(["ingest", "--kind", "utilization", "--db", str(db_path), option, value, str(f)]) == 2
    assert capsys.readouterr().err.strip() == f"headroom ingest: error: {option} {value!r}: {why}"
    assert not db_path.exists()


def test_an_ingest_that_writes_nothing_leaves_no_new_warehouse(tmp_path, capsys):
    """A typo'd file made an empty warehouse; train then said "no utilization ... ingest some"
    rather than "no warehouse". One file going in keeps it."""
    db = tmp_path / "new.duckdb"
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert cli.main(["ingest", "--kind", "utilization", "--db", str(db), str(tmp_path / "nope.csv"), str(empty)]) == 2
    assert not list(tmp_path.glob("new.duckdb*"))
    assert cli.main(["train", "--db", str(db)]) == 2 and "no warehouse" in capsys.readouterr().err
    assert cli.main(["ingest", "--kind", "utilization", "--db", str(db), str(empty), str(util_file(tmp_path / "u.csv"))
                     ]) == 2
    with warehouse.open_warehouse(db) as con:
        assert con.execute("SELECT count(*) FROM utilization").fetchone()[0] == 3
