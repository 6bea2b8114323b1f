"""`headroom status` on a warehouse written row by row: freshness, flows, champions, alerts, plan."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines import cli
from pipelines.store import warehouse

NOW = "2026-03-10T12:00:00"


def _fill(db_path: Path) -> None:
    with warehouse.open_warehouse(db_path) as con:
        con.execute("INSERT INTO utilization VALUES ('2026-03-10 11:00', 'c', 'h100', 'n1', 'gpu', 4, 8), "
                    "('2026-03-08 00:00', 'c', 'h100', 'n1', 'gpu', 2, 8)")
        con.execute("INSERT INTO spot_prices VALUES ('2026-03-01 00:00', 'aws', 'us-east-1', 'us-east-1a', "
                    "'p4d.24xlarge', 'Linux/UNIX', 9.5)")
        con.execute("INSERT INTO models VALUES ('m1', 'lgbm', 'gpu', '[\"c/h100/gpu\"]', '2026-03-10 11:00', '{}', "
                    "'{\"wape\": 0.0812}', NULL, TRUE, '2026-03-10 11:30'), ('f1', 'fault_predictor', 'fleet', NULL, "
                    "'2026-03-10 11:00', '{}', '{}', NULL, TRUE, '2026-03-10 11:31')")
        con.execute("INSERT INTO alerts (fingerprint, kind, entity, severity, probability, window_start, window_end, "
                    "summary, runbook, status, starts_at, ends_at, updated_at) VALUES ('fp1', 'price_spike', 'aws/us-east-1a/p4d.24xlarge', 'critical', 0.9, "
                    "NULL, NULL, 'spike ahead', NULL, 'firing', '2026-03-10 11:00', NULL, '2026-03-10 11:40')")
        payload = json.dumps({"unique_id": "c/h100/gpu", "recommended": True, "headline": "run 40% private"})
        con.execute("INSERT INTO recommendations VALUES ('plan-1', 'allocation', 'c/h100/gpu', ?, 'm1', "
                    "'2026-03-10 11:00', '2026-03-10 11:50')", [payload])


def test_status_says_what_is_held_and_fails_on_a_stale_source(db_path: Path, capsys: pytest.CaptureFixture[str]):
    _fill(db_path)
    code = cli.main(["status", "--db", str(db_path), "--now", NOW])
    out = capsys.readouterr().out
    assert code == 1  # spot prices are 9.5 days old, beyond the default 24 h
    assert "utilization" in out and "2 rows" in out and "age 1.0 h" in out
    assert "telemetry    empty" in out
    assert "STALE" in out and "stale: spot_prices" in out
    assert "gpu: lgbm (m1), backtest WAPE 0.081" in out and "fault_predictor" not in out
    assert f"file: {db_path.stat().st_size / 1e6:,.1f} MB (history past 30 days pruned daily by serve" in out
    assert "firing alerts: 1" in out and "critical" in out
    assert "latest plan: plan-1" in out and "c/h100/gpu: run 40% private" in out
    assert "2026-03-10T11:00:00+00:00" in out  # times in UTC with their offset
    assert "the clock they decided at" in out
    # a looser freshness: nothing is stale, exit 0; the same in JSON
    assert cli.main(["status", "--db", str(db_path), "--now", NOW, "--max-age-hours", "240", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    kinds = {s["kind"]: s for s in doc["sources"]}
    assert kinds["spot_prices"]["stale"] is False and kinds["telemetry"]["rows"] == 0
    assert [c["model_id"] for c in doc["champions"]] == ["m1"]
    assert {r["flow"]: r["count"] for r in doc["runs"]}["detect"] == 1
    # plan, detect and replay stamp the clock they decided at, ingest and train the wall clock
    assert {r["flow"]: r["clock"] for r in doc["runs"]} == {
        "ingest": "wall", "train": "wall", "plan": "decision", "detect": "decision", "replay": "decision"}
    assert doc["plan"]["headline"][0]["text"] == "run 40% private"


def test_an_old_failure_is_not_a_stale_feed(db_path: Path, capsys: pytest.CaptureFixture[str]):
    """Failures are events: the last one five weeks ago (beyond --max-age-hours) is a healthy fleet, not a feed that stopped."""
    _fill(db_path)
    with warehouse.open_warehouse(db_path) as con:
        con.execute("INSERT INTO failures VALUES ('2026-02-01 12:00', 'n1-gpu0', 'n1', 'xid')")
    assert cli.main(["status", "--db", str(db_path), "--now", NOW, "--max-age-hours", "240"]) == 0
    out = capsys.readouterr().out
    assert "failures" in out and "age 37.0 days" in out and "STALE" not in out


def test_a_clock_before_the_data_says_so(db_path: Path, capsys: pytest.CaptureFixture[str]):
    """Rows after the clock (a --now before the newest row, a clock behind the source's) are
    counted and said; the age runs from the newest row before it."""
    _fill(db_path)
    assert cli.main(["status", "--db", str(db_path), "--now", "2026-03-09T11:00:00", "--max-age-hours", "240"]) == 0
    out = capsys.readouterr().out
    assert "age 35.0 h  AHEAD (1 row(s) after the clock)" in out
    assert cli.main(["status", "--db", str(db_path), "--now", "2026-03-09T11:00:00", "--json"]) == 1
    kinds = {s["kind"]: s for s in json.loads(capsys.readouterr().out)["sources"]}
    assert kinds["utilization"]["ahead"] is True and kinds["spot_prices"]["ahead"] is False


def test_status_errors_are_one_line(tmp_path: Path, db_path: Path, capsys: pytest.CaptureFixture[str]):
    assert cli.main(["status", "--db", str(tmp_path / "none.duckdb")]) == 2
    assert "no warehouse" in capsys.readouterr().err
    _fill(db_path)
    assert cli.main(["status", "--db", str(db_path), "--max-age-hours", "0"]) == 2
    assert "must be a finite number > 0" in capsys.readouterr().err
    assert cli.main(["status", "--db", str(db_path), "--now", "yesterday"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--now 'yesterday' is not a time" in err


def test_the_last_ingest_counts_every_file_it_loaded(db_path: Path, capsys: pytest.CaptureFixture[str]):
    """An ingest of several files writes a batch each, seconds apart; an earlier ingest, an
    hour before, is another."""
    rows = [("b0", "2026-03-10 10:00:00", "2026-03-10 10:00:05"), ("b1", "2026-03-10 11:00:00", "2026-03-10 11:00:02"),
            ("b2", "2026-03-10 11:00:02", "2026-03-10 11:00:04"), ("b3", "2026-03-10 11:00:04", "2026-03-10 11:00:09")]
    with warehouse.open_warehouse(db_path) as con:
        for bid, started, finished in rows:
            con.execute("INSERT INTO ingest_batches (batch_id, kind, source_format, path, sha256, rows_read, "
                        "rows_loaded, rows_rejected, status, started_at, finished_at) VALUES (?, 'utilization', "
                        "'csv', ?, ?, 1, 1, 0, 'loaded', ?, ?)", [bid, f"/d/{bid}.csv", bid, started, finished])
    cli.main(["status", "--db", str(db_path), "--now", NOW, "--json"])
    runs = {r["flow"]: r for r in json.loads(capsys.readouterr().out)["runs"]}
    assert runs["ingest"]["count"] == 3


def test_two_ingests_seconds_apart_are_two(db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """Two `headroom ingest` commands six seconds apart were counted one ingest of both files;
    each command is its own run now."""
    for i in range(3):
        (tmp_path / f"u{i}.csv").write_text("ts,cluster,pool,node_id,resource,used,capacity\n"
                                            f"2026-03-10T0{i}:00:00Z,c,p,n1,cpu,1,8\n")
    assert cli.main(["ingest", "--db", str(db_path), "--kind", "utilization", str(tmp_path / "u0.csv")]) == 0
    assert cli.main(["ingest", "--db", str(db_path), "--kind", "utilization", str(tmp_path / "u1.csv"),
                     str(tmp_path / "u2.csv")]) == 0
    capsys.readouterr()
    cli.main(["status", "--db", str(db_path), "--now", NOW, "--json"])
    runs = {r["flow"]: r for r in json.loads(capsys.readouterr().out)["runs"]}
    assert runs["ingest"]["count"] == 2


def test_a_warehouse_behind_the_schema_is_one_line_for_a_reader(tmp_path: Path, capsys) -> None:
    """A warehouse made by an older headroom (only the first migrations): status and report,
    which never migrate, name what it lacks instead of a DuckDB traceback."""
    import duckdb

    old = tmp_path / "schema"
    old.mkdir()
    for sql in sorted(warehouse.SCHEMA_DIR.glob("00[01]_*.sql")):
        (old / sql.name).write_text(sql.read_text())
    db = tmp_path / "old.duckdb"
    con = duckdb.connect(str(db))
    warehouse.migrate(con, old)
    con.close()
    for argv in (["status"], ["report", "--out", str(tmp_path / "r")]):
        assert cli.main([*argv, "--db", str(db)]) == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert "is behind this headroom's schema and lacks what this command reads" in err, argv


def test_a_warehouse_from_before_replays_has_its_status(tmp_path: Path, capsys) -> None:
    """Status is the cron probe: on a warehouse made before the replays table it reports, exit 0,
    with the replay never run, instead of exit 2 until a writing command migrates it."""
    import duckdb

    old = tmp_path / "schema"
    old.mkdir()
    for version, _name, path in warehouse.migrations():
        if version < 50:
            (old / path.name).write_text(path.read_text())
    db = tmp_path / "old.duckdb"
    con = duckdb.connect(str(db))
    warehouse.migrate(con, old)
    con.close()
    assert cli.main(["status", "--db", str(db), "--now", NOW, "--json"]) == 0
    runs = {r["flow"]: r for r in json.loads(capsys.readouterr().out)["runs"]}
    assert runs["replay"]["last_written"] is None and runs["replay"]["count"] == 0


def test_a_warehouse_of_a_newer_headroom_is_refused_untouched(tmp_path: Path, capsys) -> None:
    """An older headroom would misread tables it cannot know: one line, exit 2, nothing written."""
    import duckdb

    db = tmp_path / "w.duckdb"
    with warehouse.open_warehouse(db) as con:
        newest = max(v for v, _, _ in warehouse.migrations())
        con.execute("INSERT INTO schema_version VALUES (?, 'from_the_future', now()::TIMESTAMP)", [newest + 10])
    before = db.read_bytes()
    src = tmp_path / "u.csv"
    src.write_text("ts,cluster,pool,node_id,resource,used,capacity\n2026-01-01T00:00:00Z,c,p,n,cpu,1,2\n")
    for argv in (["status"], ["ingest", "--kind", "utilization", str(src)], ["report", "--out", str(tmp_path / "r")]):
        assert cli.main([*argv, "--db", str(db)]) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"schema version {newest + 10:03d}; this one knows up to {newest:03d}" in err[0], argv
    assert db.read_bytes() == before
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM utilization").fetchone()[0] == 0


def test_a_row_dated_ahead_does_not_hide_a_feed_that_stopped(db_path: Path, capsys: pytest.CaptureFixture[str]):
    """One utilization row typed a year ahead: the feed's real newest row is 2 days old, so it
    is stale (exit 1) and the stray row is said."""
    _fill(db_path)
    with warehouse.open_warehouse(db_path) as con:
        con.execute("INSERT INTO utilization VALUES ('2027-03-10 11:00', 'c', 'h100', 'n1', 'gpu', 4, 8)")
    assert cli.main(["status", "--db", str(db_path), "--now", "2026-03-12T11:00:00", "--max-age-hours", "24"]) == 1
    out = capsys.readouterr().out
    assert "age 2.0 days  STALE  AHEAD (1 row(s) after the clock)" in out
