"""``headroom prune`` and the retention rules: what goes, what every flow still reads stays,
a dry run and a second run change nothing, and compaction keeps every row and constraint."""
from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from pipelines import cli
from pipelines.store import retention, warehouse

NOW = datetime(2026, 3, 31, 12)
OLD = NOW - timedelta(days=60)
NEW = NOW - timedelta(days=2)
CUT = NOW - timedelta(days=30)  # the default keep
TUNED, CARRIED = '{"tuned_this_run": true}', '{"tuned_this_run": false}'  # a split tuned, or kept, by a plan run


def _model(mid: str, kind: str, cutoff: datetime, champion: bool = False, params: str = "{}",
           created: datetime | None = None) -> dict:
    # a forecaster is stamped with the wall clock; a detector's with the detect run's clock,
    # the day after its data here
    made = created or (cutoff + timedelta(days=1) if kind.endswith("_predictor") else NOW)
    return {"model_id": mid, "kind": kind, "target": "gpu", "series": "[]", "data_cutoff": cutoff,
            "params": params, "metrics": "{}", "artifact": b"x" * 1000, "is_champion": champion,
            "created_at": made}


def _rows(con: duckdb.DuckDBPyConnection, table: str, rows: list[dict]) -> None:
    frame = pd.DataFrame(rows)
    if warehouse.has_primary_key(con, table):
        warehouse.upsert(con, table, frame)
    else:  # the fact tables keep their key in ingest, not in DuckDB
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM frame")


def _forecast(run: str, mid: str) -> dict:
    return {"run_id": run, "unique_id": "gpu", "ds": NOW, "model": "lgbm", "model_id": mid, "mean": 1.0}


def _backtest(run: str, ds: datetime) -> dict:
    return {"run_id": run, "unique_id": "gpu", "ds": ds, "cutoff": ds, "model": "lgbm", "y": 1.0, "mean": 1.0}


def _rec(run: str, at: datetime, kind: str = "prescale", key: str = "gpu", payload: str = "{}") -> dict:
    return {"run_id": run, "kind": kind, "key": key, "payload": payload, "data_cutoff": at, "created_at": at}


def _alert(fp: str, status: str, at: datetime, window_end: datetime | None = None) -> dict:
    return {"fingerprint": fp, "kind": "burst", "entity": "gpu", "severity": "warning", "status": status,
            "window_start": at, "window_end": window_end or at,
            "starts_at": at, "ends_at": at if status == "resolved" else None, "updated_at": at}


def _delivery(fp: str, state: str, status: str = "resolved") -> dict:
    return {"fingerprint": fp, "sink": "jsonl", "status": status, "state": state, "attempts": 1, "updated_at": NOW}


def _replay(rid: str, uid: str, at: datetime) -> dict:
    return {"replay_id": rid, "unique_id": uid, "span_start": at, "span_end": at, "step_seconds": 300.0,
            "instance_units": 8.0, "strategy": "planned", "scores": "{}", "created_at": at}


def fill(con: duckdb.DuckDBPyConnection) -> None:
    """One row of each case each rule decides."""
    _rows(con, "models", [
        _model("champ-old", "lgbm", OLD - timedelta(days=9), champion=True),
        _model("lgbm-older", "lgbm", OLD - timedelta(days=1)),
        _model("lgbm-old", "lgbm", OLD),  # the newest lgbm of its settings: kept
        _model("fault-old", "fault_predictor", OLD, params='{"a": 1}'),
        _model("fault-mid", "fault_predictor", OLD + timedelta(days=5), params='{"a": 1}'),
        _model("fault-new", "fault_predictor", NEW, params='{"a": 1}'),
        _model("fault-other", "fault_predictor", OLD, params='{"a": 2}'),  # newest of other settings: kept
        # learnt before the cut, made after it: what a replay just after the cut sees next
        _model("fault-straddle", "fault_predictor", CUT - timedelta(hours=4), params='{"a": 1}',
               created=CUT + timedelta(hours=20)),
    ])
    _rows(con, "forecasts", [_forecast("train-old", "lgbm-older"), _forecast("train-champ", "champ-old")])
    _rows(con, "backtests", [_backtest("train-old", OLD), _backtest("train-champ", OLD),
                             _backtest("train-orphan-old", OLD), _backtest("train-orphan-new", NEW)])
    _rows(con, "recommendations", [
        _rec("plan-old", OLD), _rec("plan-new", NEW), _rec("plan-newest", NOW),
        # a split tuned this month: the month's plans keep it (planning.TUNED_SPLITS_SQL)
        _rec("plan-tuned", datetime(2026, 3, 1), kind="allocation", key="gpu/tuned", payload=TUNED),
        _rec("plan-kept-split", datetime(2026, 3, 1, 1), kind="allocation", key="gpu/tuned", payload=CARRIED),
        _rec("plan-tuned-before", OLD, kind="allocation", key="gpu/tuned", payload=TUNED),
        # a look at 2 days later that month: it hides no tuning of the month's window
        _rec("plan-tuned-2d", datetime(2026, 3, 1, 2), kind="allocation", key="gpu/tuned",
             payload='{"tuned_this_run": true, "window_days": 2}'),
    ])
    _rows(con, "alerts", [_alert("resolved-old", "resolved", OLD), _alert("firing-old", "firing", OLD),
                          _alert("pending-old", "resolved", OLD), _alert("resolved-new", "resolved", NEW),
                          # resolved long ago, its window ahead still in the report's week
                          _alert("window-new", "resolved", OLD, window_end=NEW)])
    _rows(con, "alert_deliveries", [_delivery("resolved-old", "delivered"), _delivery("pending-old", "pending"),
                                    _delivery("firing-old", "delivered", "firing")])
    _rows(con, "replays", [_replay("r-a-old", "a", OLD), _replay("r-a-new", "a", NEW), _replay("r-b-old", "b", OLD)])
    _rows(con, "replay_capacity", [{"replay_id": r, "ts": NOW} for r in ("r-a-old", "r-a-new", "r-b-old")])
    util = [{"ts": ts, "cluster": "c", "pool": "p", "node_id": "n1", "resource": "gpu", "used": 1.0, "capacity": 8.0}
            for ts in (NOW - timedelta(days=100), NOW - timedelta(days=10, hours=1), NOW - timedelta(days=10))]
    _rows(con, "utilization", util)
    spot = [{"ts": NOW - timedelta(days=d), "provider": "aws", "region": "r", "zone": "z", "instance_type": "i",
             "product": "Linux", "price": float(d)} for d in (200, 150, 100, 10)]
    _rows(con, "spot_prices", spot)


def _ids(con: duckdb.DuckDBPyConnection, table: str, column: str) -> set[str]:
    return {r[0] for r in con.execute(f"SELECT DISTINCT {column} FROM {table}").fetchall()}


def test_prune_keeps_what_flows_read_and_deletes_the_rest(con: duckdb.DuckDBPyConnection) -> None:
    fill(con)
    out = retention.prune(con, NOW, retention.Retention(keep_days=30))
    # of each kind and settings the newest before the cut stays: the one in force at it
    assert _ids(con, "models", "model_id") == {"champ-old", "lgbm-old", "fault-mid", "fault-new", "fault-other",
                                               "fault-straddle"}
    assert _ids(con, "forecasts", "model_id") == {"champ-old"}  # the deleted model's went with it
    assert _ids(con, "backtests", "run_id") == {"train-champ", "train-orphan-new"}
    assert _ids(con, "recommendations", "run_id") == {"plan-new", "plan-newest", "plan-tuned", "plan-tuned-2d"}
    assert _ids(con, "alerts", "fingerprint") == {"firing-old", "pending-old", "resolved-new", "window-new"}
    assert _ids(con, "alert_deliveries", "fingerprint") == {"pending-old", "firing-old"}
    assert _ids(con, "replays", "replay_id") == {"r-a-new", "r-b-old"}
    assert _ids(con, "replay_capacity", "replay_id") == {"r-a-new", "r-b-old"}
    assert con.execute("SELECT count(*) FROM utilization").fetchone()[0] == 3  # readings: all, unless asked
    assert out["models"] == {"deleted": 2, "kept": 6}
    assert out["alert_deliveries"] == {"deleted": 1, "kept": 2}
    assert "utilization" not in out


def test_prune_readings_keeps_the_price_in_force_at_the_cut(con: duckdb.DuckDBPyConnection) -> None:
    fill(con)
    out = retention.prune(con, NOW, retention.Retention(keep_days=None, data_days=70))  # readings only
    assert con.execute("SELECT count(*) FROM utilization").fetchone()[0] == 2
    # each table from its own newest row (10 days old): the cut is 80 days back, and the
    # 100-day-old price held until the 10-day-old change: still the price at the cut
    assert sorted(r[0] for r in con.execute("SELECT price FROM spot_prices").fetchall()) == [10.0, 100.0]
    assert out["spot_prices"] == {"deleted": 2, "kept": 2} and "models" not in out
    assert con.execute("SELECT count(*) FROM ingest_batches").fetchone()[0] == 0  # never touched


def _snapshot(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in retention.TABLES}


def test_dry_run_and_second_run_change_nothing(con: duckdb.DuckDBPyConnection) -> None:
    fill(con)
    before = _snapshot(con)
    dry = retention.prune(con, NOW, retention.Retention(30, 70), dry_run=True)
    assert _snapshot(con) == before
    real = retention.prune(con, NOW, retention.Retention(30, 70))
    assert dry == real
    logged = con.execute("SELECT count(*) FROM prunes").fetchone()[0]
    again = retention.prune(con, NOW, retention.Retention(30, 70))
    assert con.execute("SELECT count(*) FROM prunes").fetchone()[0] == logged == 1  # a prune of nothing: no row
    assert all(c["deleted"] == 0 for c in again.values())


@pytest.mark.parametrize(("keep", "data"), [(6, None), (30, 60), (36501, None), (None, 10**9)])
def test_retention_refuses_windows_the_flows_need(keep: int | None, data: int | None) -> None:
    with pytest.raises(ValueError, match="must be kept"):
        retention.Retention(keep, data)


def _filled(path: Path) -> None:
    with warehouse.open_warehouse(path) as con:
        fill(con)
        big = [_model(f"lgbm-{i:03d}", "lgbm", OLD - timedelta(days=1 + i)) for i in range(200)]
        for m in big:
            m["artifact"] = os.urandom(100_000)  # 20 MB in all, as models do not compress
        _rows(con, "models", big)


def test_cli_prune_compacts_and_keeps_every_row_and_key(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    db_path = tmp_path / 'ops "x".duckdb'  # the file's stem names the database the copy is made from
    _filled(db_path)
    big = db_path.stat().st_size
    killed = db_path.with_name(f".{db_path.name}.compact-99999")  # a compaction killed midway
    killed.write_bytes(b"x" * 1000)
    killed.with_name(killed.name + ".wal").write_bytes(b"x")
    assert cli.main(["prune", "--db", str(db_path), "--now", NOW.isoformat(), "--compact", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["tables"]["models"]["deleted"] == 202
    assert doc["size_before"] >= big > 20e6 and doc["size_after"] < big / 4
    assert not list(db_path.parent.glob(f".{db_path.name}.compact-*"))
    with warehouse.open_warehouse(db_path) as con:
        assert _ids(con, "models", "model_id") == {"champ-old", "lgbm-old", "fault-mid", "fault-new", "fault-other",
                                                   "fault-straddle"}
        assert con.execute("SELECT count(*) FROM schema_version").fetchone()[0] > 0
        with pytest.raises(duckdb.ConstraintException):  # the keys came with the copy
            con.execute("INSERT INTO models SELECT * FROM models LIMIT 1")
    assert cli.main(["status", "--db", str(db_path), "--now", NOW.isoformat(), "--max-age-hours", "10000"]) == 0


def test_a_failed_compaction_leaves_the_warehouse_as_it_was(db_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture) -> None:
    _filled(db_path)

    def lost(old: object, new: object, tmp: Path) -> None:
        raise RuntimeError(f"{tmp}: the copy of models has 0 rows, not 207; the warehouse was left as it was")

    monkeypatch.setattr(retention, "_same_rows", lost)
    with pytest.raises(RuntimeError), warehouse.open_warehouse(db_path) as con:
        retention.compact(con, db_path)
    assert not list(db_path.parent.glob(f".{db_path.name}.compact-*"))
    with warehouse.open_warehouse(db_path) as con:
        assert con.execute("SELECT count(*) FROM models").fetchone()[0] == 208


def test_cli_prune_dry_run_and_all(db_path: Path, capsys: pytest.CaptureFixture) -> None:
    _filled(db_path)
    assert cli.main(["prune", "--db", str(db_path), "--now", NOW.isoformat(), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would delete" in out and "compacted" not in out
    assert cli.main(["prune", "--db", str(db_path), "--keep-days", "all"]) == 0
    assert "kept in full" in capsys.readouterr().out
    with warehouse.open_warehouse(db_path, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM models").fetchone()[0] == 208


@pytest.mark.parametrize(("argv", "says"), [
    (["--keep-days", "3"], "history must be kept 7 to 36500 days"),
    (["--keep-data-days", "10"], "readings must be kept 70 to 36500 days"),
    (["--keep-days", "99999999999"], "history must be kept 7 to 36500 days"),
    (["--now", "yesterday"], "--now 'yesterday'"),
    (["--now", "2199-01-01"], "--now is 2199-01-01 00:00 UTC, more than a day after this machine's clock"),
    (["--now", "2199-01-01"], "give an earlier --now (or fix this machine's clock)"),  # not "prune with --now"
    (["--dry-run", "--compact"], "give one of them"),
])
def test_cli_prune_bad_options_are_one_line(db_path: Path, capsys: pytest.CaptureFixture, argv: list[str],
                                            says: str) -> None:
    _filled(db_path)
    assert cli.main(["prune", "--db", str(db_path), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and "\n" not in err and "Traceback" not in err


def test_cli_prune_without_a_warehouse(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["prune", "--db", str(tmp_path / "none.duckdb")]) == 2
    assert "no warehouse" in capsys.readouterr().err
    assert not (tmp_path / "none.duckdb").exists()


def test_prune_flow_prunes_as_of_the_data_and_honours_all(db_path: Path, prefect_harness: None,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from pipelines.flows.prune import prune_flow

    _filled(db_path)
    monkeypatch.setenv("HEADROOM_KEEP_DAYS", "all")
    assert prune_flow(db_path=str(db_path)) == {"skipped": "HEADROOM_KEEP_DAYS=all"}
    monkeypatch.setenv("HEADROOM_KEEP_DAYS", "30")
    out = prune_flow(db_path=str(db_path))
    assert out["clock"] == NOW - timedelta(days=10)  # the newest reading, not the wall clock
    assert out["tables"]["models"]["deleted"] == 202 and "utilization" not in out["tables"]
    assert prune_flow(db_path=str(db_path / "missing"))["skipped"].startswith("no warehouse")


def test_real_disk_full_while_compacting_is_one_line_and_changes_nothing(tmp_path: Path) -> None:
    from tests.pipelines.test_faults_env import fingerprint, in_namespace, one_line

    db = tmp_path / "wh.duckdb"
    with warehouse.open_warehouse(db) as con:  # 2.5 MB that all stays: its copy does not fit beside it
        _rows(con, "models", [{**_model("champ", "lgbm", NEW, champion=True), "artifact": os.urandom(2_500_000)}])
    before = fingerprint(db)
    r = in_namespace(tmp_path, f"""
        cp {db} $M/wh.duckdb
        $HR prune --db $M/wh.duckdb --now {NOW.isoformat()} --compact 2>prune.err; echo $? >prune.rc
        mkdir after; cp -a $M/. after/
    """)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "prune.rc").read_text().strip() == "1"
    line = one_line((tmp_path / "prune.err").read_text())
    assert line.startswith(f"headroom prune: error: warehouse {tmp_path}/mnt/wh.duckdb: disk full"), line
    assert sorted(p.name for p in (tmp_path / "after").iterdir()) == ["wh.duckdb"]  # no copy left
    assert fingerprint(tmp_path / "after" / "wh.duckdb")["files"] == before["files"]


def test_a_reading_dated_ahead_of_the_clock_stops_prune_and_deletes_nothing(db_path: Path, prefect_harness: None,
                                                                             capsys: pytest.CaptureFixture) -> None:
    from pipelines.flows.prune import prune_flow

    _filled(db_path)
    with warehouse.open_warehouse(db_path) as con:  # a month mistyped: November, months after the rest
        _rows(con, "utilization", [{"ts": datetime(2026, 11, 1), "cluster": "c", "pool": "p", "node_id": "n1",
                                    "resource": "gpu", "used": 1.0, "capacity": 8.0}])
    assert cli.main(["prune", "--db", str(db_path), "--keep-data-days", "70"]) == 2
    err = capsys.readouterr().err.strip()
    assert "the newest reading of utilization (2026-11-01 00:00 UTC) stands 224 days after the one before it" in err
    with warehouse.open_warehouse(db_path) as con:  # a year mistyped: 2126
        con.execute("DELETE FROM utilization WHERE ts = '2026-11-01'")
        _rows(con, "spot_prices", [{"ts": datetime(2126, 3, 1), "provider": "aws", "region": "r", "zone": "z",
                                    "instance_type": "i", "product": "Linux", "price": 1.0}])
    assert cli.main(["prune", "--db", str(db_path), "--keep-data-days", "70"]) == 2
    err = capsys.readouterr().err.strip()
    assert "the newest reading (utilization, telemetry or spot prices) is 2126-03-01 00:00 UTC" in err
    assert "\n" not in err
    with pytest.raises(ValueError, match="more than a day after this machine's clock"):
        prune_flow(db_path=str(db_path))
    with warehouse.open_warehouse(db_path, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM models").fetchone()[0] == 208


def test_a_dry_run_opens_the_warehouse_read_only(db_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture) -> None:
    _filled(db_path)
    opened = []
    real = warehouse.connect

    def spy(target: object, *args: object, read_only: bool = False, **kwargs: object) -> duckdb.DuckDBPyConnection:
        opened.append(read_only)
        return real(target, *args, read_only=read_only, **kwargs)

    monkeypatch.setattr(warehouse, "connect", spy)
    assert cli.main(["prune", "--db", str(db_path), "--now", NOW.isoformat(), "--keep-data-days", "70",
                     "--dry-run", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert opened == [True]
    assert doc["tables"]["models"] == {"deleted": 202, "kept": 6} and doc["tables"]["spot_prices"]["deleted"] == 2


def test_alerts_age_from_the_newest_utilization_when_it_is_behind(con: duckdb.DuckDBPyConnection) -> None:
    """Spot prices run five days past a stalled utilization feed: the report's heatmap week
    ends at the utilization, and the alerts it marks stay."""
    util_end = NOW - timedelta(days=5)
    _rows(con, "utilization", [{"ts": util_end, "cluster": "c", "pool": "p", "node_id": "n1", "resource": "gpu",
                                "used": 1.0, "capacity": 8.0}])
    _rows(con, "alerts", [_alert("in-week", "resolved", util_end - timedelta(days=6)),
                          _alert("before-week", "resolved", util_end - timedelta(days=8))])
    retention.prune(con, NOW, retention.Retention(7))
    assert _ids(con, "alerts", "fingerprint") == {"in-week"}


def test_detect_refuses_a_replay_before_a_cut_that_took_alerts(db_path: Path, capsys: pytest.CaptureFixture) -> None:
    _filled(db_path)
    assert cli.main(["prune", "--db", str(db_path), "--now", NOW.isoformat()]) == 0
    capsys.readouterr()
    cut = NOW - timedelta(days=40)  # the alerts' cut: 30 days before the newest utilization, 10 days old
    assert cli.main(["detect", "--db", str(db_path), "--as-of", (cut - timedelta(hours=1)).isoformat()]) == 2
    err = capsys.readouterr().err.strip()
    assert f"is before {cut:%Y-%m-%d %H:%M} UTC, where headroom prune deleted the resolved alerts" in err
    assert "\n" not in err


def test_compaction_keeps_a_symlink_and_the_files_mode_and_owner(tmp_path: Path, capsys: pytest.CaptureFixture
                                                                 ) -> None:
    real = tmp_path / "real" / "wh.duckdb"
    real.parent.mkdir()
    _filled(real)
    real.chmod(0o640)
    owner = (65534, 65534) if os.geteuid() == 0 else (os.getuid(), os.getgid())  # nobody, where we may give it
    os.chown(real, *owner)
    link = tmp_path / "wh.duckdb"
    link.symlink_to(real)
    assert cli.main(["prune", "--db", str(link), "--now", NOW.isoformat(), "--compact"]) == 0
    assert "compacted" in capsys.readouterr().out
    assert link.is_symlink() and link.resolve() == real
    assert (real.stat().st_mode & 0o777, real.stat().st_uid, real.stat().st_gid) == (0o640, *owner)
    assert real.stat().st_size < 20e6


def test_compaction_that_cannot_keep_the_owner_is_refused_before_anything(tmp_path: Path) -> None:
    """As root without CAP_CHOWN (setpriv), like a user compacting a file of another's: one
    line, exit 1, and neither the prune nor the compaction done."""
    import shutil
    import subprocess
    import sys

    from tests.pipelines.test_faults_env import headroom_env, one_line

    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to drop CAP_CHOWN")
    db = tmp_path / "wh.duckdb"
    _filled(db)
    os.chown(db, 65534, 65534)
    db.chmod(0o666)
    done = subprocess.run(["setpriv", "--bounding-set=-chown", sys.executable, "-m", "pipelines.cli", "prune",
                           "--db", str(db), "--now", NOW.isoformat(), "--compact"],
                          capture_output=True, text=True, env=headroom_env(tmp_path), timeout=120)
    assert done.returncode == 1, done.stderr
    assert one_line(done.stderr) == (
        f"headroom prune: error: warehouse {db}: belongs to uid 65534 gid 65534, and a compacted copy made by this "
        "user could not be given them; it was not compacted: run headroom prune --compact as the warehouse's "
        "owner (or root)")
    with warehouse.open_warehouse(db, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM models").fetchone()[0] == 208
    assert not list(tmp_path.glob(".wh.duckdb.compact-*"))


# a real compaction whose row check takes 4 s, so that it holds the warehouse's lock that long
SLOW_COMPACT = """
import sys, time
from pathlib import Path
from pipelines.store import retention, warehouse
checked = retention._same_rows
def slow(old, new, tmp):
    Path(sys.argv[2]).touch()
    time.sleep(4)
    checked(old, new, tmp)
retention._same_rows = slow
con = warehouse.connect(sys.argv[1])
retention.compact(con, sys.argv[1])
"""


def test_a_writer_waits_for_a_compaction_past_its_lock_timeout(tmp_path: Path, db_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A compaction holds the lock for its whole copy: a flow waits for it to finish rather than
    fail at HEADROOM_LOCK_TIMEOUT; a killed compaction's leftover makes no one wait."""
    import subprocess
    import sys
    import time

    _filled(db_path)
    flag = tmp_path / "copying.flag"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-c", SLOW_COMPACT, str(db_path), str(flag)], env=env)
    try:
        deadline = time.monotonic() + 60
        while not flag.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the compaction did not start"
            time.sleep(0.05)
        assert warehouse.compaction_running(str(db_path)) == proc.pid
        t0 = time.monotonic()
        with warehouse.open_warehouse(db_path, lock_timeout_s=0.5) as con:  # waits past 0.5 s
            assert time.monotonic() - t0 > 1.0
            assert con.execute("SELECT count(*) FROM models").fetchone()[0] > 0
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == 0 and not warehouse.compaction_copies(db_path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    warehouse.compaction_copy(db_path, int(dead.stdout)).write_bytes(b"x")  # a killed one's copy
    assert warehouse.compaction_running(str(db_path)) is None
