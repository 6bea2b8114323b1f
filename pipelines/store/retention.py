"""What the warehouse keeps: ``headroom prune`` and ``serve``'s daily prune delete the history
no command reads any more, and ``compact`` gives the space back.

History older than ``keep_days`` goes, except what a flow or the report still reads:

* models: the champions and the newest of each kind and settings (a detector's next run
  reuses it) stay; the forecasts of a model that goes go with it, and a train run's backtests
  once none of its forecasts are left;
* plan runs: the newest stays (the report, ``status`` and the spike alerts read it), and so
  does the run that last tuned each pool's split in the newest plan's month (the split holds
  for the month: ``planning.kept_splits``);
* alerts: only resolved ones go, with their deliveries, and none with a delivery pending;
* replays: the newest of each series stays (the report draws it).

Readings (utilization, telemetry, spot prices) are kept unless ``data_days`` is given; a
spot series keeps its last price before the cut, the price in force at it. Failures, ingest
batches and their rejects are always kept: failures are rare labels, and the batches are how a
file loaded before is known (it is not loaded again after its readings are pruned).

Every age is in the data's time, as the flows stamp their rows: a model by the end of the
data it learnt from, a train run's backtests by their last point, a plan run, an alert or a
replay by the clock it decided at (the data's end when old data is replayed).
"""
from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import duckdb

from pipelines.runtime import faults
from pipelines.runtime.settings import MIN_DATA_DAYS, MIN_KEEP_DAYS
from pipelines.store.replays import LATEST_REPLAY_IDS_SQL

# (table, DELETE predicate), in order: later rules read what earlier ones left. $cut is the cut.
DERIVED = (
    # the newest of a kind and settings, as store.detection.latest_model orders them
    ("models", """NOT is_champion AND data_cutoff < $cut AND model_id NOT IN (
        SELECT model_id FROM (SELECT model_id, row_number() OVER (PARTITION BY kind, params
            ORDER BY created_at DESC, data_cutoff DESC, model_id) AS r FROM models) WHERE r = 1)"""),
    ("forecasts", "model_id IS NOT NULL AND model_id NOT IN (SELECT model_id FROM models)"),
    ("backtests", """run_id NOT IN (SELECT DISTINCT run_id FROM forecasts) AND run_id IN (
        SELECT run_id FROM backtests GROUP BY run_id HAVING max(ds) < $cut)"""),
    # the newest run, and each pool's last tuning this month, as planning.kept_splits reads them
    ("recommendations", """run_id IN (SELECT run_id FROM recommendations GROUP BY run_id
            HAVING max(created_at) < $cut)
        AND run_id <> (SELECT run_id FROM recommendations ORDER BY created_at DESC, run_id DESC LIMIT 1)
        AND run_id NOT IN (SELECT run_id FROM (SELECT run_id, row_number() OVER (
                PARTITION BY key ORDER BY data_cutoff DESC, created_at DESC, run_id DESC) AS r
            FROM recommendations WHERE kind = 'allocation' AND key LIKE '%/tuned'
              AND coalesce(TRY_CAST(payload->>'tuned_this_run' AS BOOLEAN), TRY_CAST(payload->>'retuned' AS BOOLEAN))
              AND strftime(data_cutoff, '%Y-%m') = (SELECT strftime(max(data_cutoff), '%Y-%m') FROM recommendations)
            ) WHERE r = 1)"""),
    # (its window too: the report marks a week of alerts on the heatmap, by their windows)
    ("alerts", """status = 'resolved' AND greatest(coalesce(ends_at, updated_at), coalesce(window_end, updated_at))
        < $cut AND fingerprint NOT IN (
        SELECT fingerprint FROM alert_deliveries WHERE state = 'pending')"""),
    ("alert_deliveries", "fingerprint NOT IN (SELECT fingerprint FROM alerts)"),
    ("replays", f"""replay_id IN (SELECT replay_id FROM replays GROUP BY replay_id HAVING max(created_at) < $cut)
        AND replay_id NOT IN ({LATEST_REPLAY_IDS_SQL})"""),
    ("replay_capacity", "replay_id NOT IN (SELECT replay_id FROM replays)"),
)
READINGS = (
    ("utilization", "ts < $cut"),
    ("device_telemetry", "ts < $cut"),
    # the last change before the cut is the price in force at it: kept
    ("spot_prices", """ts < $cut AND (provider, zone, instance_type, product, ts) NOT IN (
        SELECT (provider, zone, instance_type, product, max(ts)) FROM spot_prices WHERE ts < $cut
        GROUP BY provider, zone, instance_type, product)"""),
)
TABLES = tuple(t for t, _ in DERIVED) + tuple(t for t, _ in READINGS)


@dataclass(frozen=True)
class Retention:
    """How long history is kept: derived rows ``keep_days``, readings ``data_days`` (None: all)."""

    keep_days: int
    data_days: int | None = None

    def __post_init__(self) -> None:
        if self.keep_days < MIN_KEEP_DAYS:
            raise ValueError(f"history must be kept at least {MIN_KEEP_DAYS} days, got {self.keep_days}")
        if self.data_days is not None and self.data_days < MIN_DATA_DAYS:
            raise ValueError(f"readings must be kept at least {MIN_DATA_DAYS} days (a month for the split, two "
                             f"weekly seasons for the forecasts), got {self.data_days}")


def prune(con: duckdb.DuckDBPyConnection, now: datetime, retention: Retention, dry_run: bool = False) -> dict:
    """Delete what ``retention`` lets go as of ``now``, in one transaction (rolled back on a
    dry run). Returns ``{table: {"deleted": n, "kept": m}}`` for each table it looked at."""
    cuts = [(t, p, now - timedelta(days=retention.keep_days)) for t, p in DERIVED]
    if retention.data_days is not None:
        cuts += [(t, p, now - timedelta(days=retention.data_days)) for t, p in READINGS]
    out: dict = {}
    con.execute("BEGIN TRANSACTION")
    try:
        for table, predicate, cut in cuts:
            deleted = con.execute(f"DELETE FROM {table} WHERE {predicate}", {"cut": cut}
                                  if "$cut" in predicate else None).fetchone()[0]
            kept = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            out[table] = {"deleted": int(deleted), "kept": int(kept)}
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("ROLLBACK" if dry_run else "COMMIT")
    if not dry_run and any(v["deleted"] for v in out.values()):
        con.execute("CHECKPOINT")  # the freed blocks are reused by the next writes
    return out


def compact(con: duckdb.DuckDBPyConnection, path: str | Path) -> tuple[int, int]:
    """Copy the warehouse open on ``con`` (its writer) into a new file and put it in its place;
    return the file's size before and after. DuckDB reuses freed space but never gives it back;
    a copy holds only what is live. The new file is locked before it replaces the old, so a
    process that opens the path meanwhile waits for it as for any writer; on any failure the
    copy is removed and the warehouse is as it was."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.compact-{os.getpid()}")
    leftovers = (tmp, tmp.with_name(tmp.name + ".wal"))  # the copy, and its log when a write failed
    before = path.stat().st_size
    name = con.execute("SELECT current_database()").fetchone()[0]
    held = None
    try:
        # and what a compaction killed midway left (this one holds the lock: no other runs)
        for p in path.parent.glob(f".{glob.escape(path.name)}.compact-*"):
            p.unlink(missing_ok=True)
        con.execute("CHECKPOINT")
        con.execute("ATTACH ? AS headroom_compact", [str(tmp)])
        try:
            quoted = name.replace('"', '""')  # the file's stem: any character a file name may hold
            con.execute(f'COPY FROM DATABASE "{quoted}" TO headroom_compact')
        finally:
            con.execute("DETACH headroom_compact")
        held = duckdb.connect(str(tmp))  # the new file's lock, held across the swap
        _same_rows(con, held, tmp)
        os.replace(tmp, path)
        _sync_folder(path.parent)
    except BaseException as exc:
        if held is not None:
            held.close()
        for p in leftovers:
            p.unlink(missing_ok=True)
        fault = faults.environment_fault(exc, warehouse=path, of_warehouse=True) if isinstance(exc, Exception) else None
        if fault is not None:
            raise fault from exc
        raise
    con.close()  # the old file, now unlinked: nothing of it is read again
    held.close()
    return before, path.stat().st_size


def _same_rows(old: duckdb.DuckDBPyConnection, new: duckdb.DuckDBPyConnection, tmp: Path) -> None:
    """Refuse a copy that lost a row of any table."""
    sql = ("SELECT table_name, estimated_size FROM duckdb_tables() WHERE database_name = current_database() "
           "AND NOT temporary ORDER BY table_name")
    tables = [t for t, _ in old.execute(sql).fetchall()]
    for table in tables:
        a = old.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
        b = new.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
        if a != b:
            raise RuntimeError(f"{tmp}: the copy of {table} has {b} rows, not {a}; the warehouse was left as it was")


def _sync_folder(folder: Path) -> None:
    """Make the rename durable (the folder's entry), where the platform allows it."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
