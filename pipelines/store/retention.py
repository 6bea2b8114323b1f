"""What the warehouse keeps: ``headroom prune`` and ``serve``'s daily prune delete the history
no command reads any more, and ``compact`` gives the space back.

History older than ``keep_days`` goes, except what a flow or the report still reads:

* models: the champions, and of each kind and settings the newest from before the cut (the
  one in force then: a detect run or a replay after the cut reuses it); the forecasts of a
  model that goes go with it, and a train run's backtests once none of its forecasts are left;
* plan runs: the newest stays (the report, ``status`` and the spike alerts read it), and so
  does the run that last tuned each pool's split in the newest plan's month, on each window
  (the split holds for the month: ``planning.kept_splits``);
* alerts: only resolved ones go, with their deliveries, and none with a delivery pending;
  their age is measured from the newest utilization where that is behind (the report's
  heatmap marks the alerts of the week up to it);
* replays: the newest of each series stays (the report draws it).

Readings (utilization, telemetry, spot prices) are kept unless ``data_days`` is given, each
table measured from its own newest row; a spot series keeps its last price before the cut,
the price in force at it. Failures, ingest batches and their rejects are always kept:
failures are rare labels, and the batches are how a file loaded before is known (it is not
loaded again after its readings are pruned).

Every age is in the data's time, as the flows stamp their rows: a model by the end of the
data it learnt from, a train run's backtests by their last point, a plan run, an alert or a
replay by the clock it decided at (the data's end when old data is replayed); a clock more
than a day past the wall clock is refused. Each prune that deletes something is logged in
``prunes``; ``detect --as-of`` refuses a clock before a cut that took alerts.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb

from pipelines.runtime import faults
from pipelines.runtime.settings import MAX_KEEP_DAYS, MIN_DATA_DAYS, MIN_KEEP_DAYS
from pipelines.store.demand import stray_newest
from pipelines.store.detection import FAULT_MODEL, SPIKE_MODEL, data_end
from pipelines.store.replays import LATEST_REPLAY_IDS_SQL
from pipelines.store.warehouse import compaction_copies, compaction_copy, has_table, transaction

DETECTOR_KINDS = f"('{FAULT_MODEL}', '{SPIKE_MODEL}')"  # the detect flow's models, not demand models

# (table, DELETE predicate), in order: later rules read what earlier ones left. $cut is the cut.
DERIVED = (
    # a detector's model (stamped with the detect clock) in force at the cut stays, as
    # store.detection.latest_model picks it for a replay there, and any made after the cut; of
    # the forecasters (stamped with the wall clock; their champions stay) the newest before it
    ("models", f"""NOT is_champion AND model_id NOT IN (
        SELECT model_id FROM (SELECT model_id, row_number() OVER (PARTITION BY kind, params
            ORDER BY created_at DESC, data_cutoff DESC, model_id) AS r FROM models
            WHERE CASE WHEN kind IN {DETECTOR_KINDS} THEN created_at <= $cut AND data_cutoff <= $cut
                       ELSE data_cutoff < $cut END)
        WHERE r = 1)
        AND CASE WHEN kind IN {DETECTOR_KINDS} THEN created_at <= $cut ELSE data_cutoff < $cut END"""),
    ("forecasts", "model_id IS NOT NULL AND model_id NOT IN (SELECT model_id FROM models)"),
    ("backtests", """run_id NOT IN (SELECT DISTINCT run_id FROM forecasts) AND run_id IN (
        SELECT run_id FROM backtests GROUP BY run_id HAVING max(ds) < $cut)"""),
    # the newest run, and each pool's last tuning this month on each window (--lookback-days), as
    # planning.kept_splits reads them
    ("recommendations", """run_id IN (SELECT run_id FROM recommendations GROUP BY run_id
            HAVING max(created_at) < $cut)
        AND run_id <> (SELECT run_id FROM recommendations ORDER BY created_at DESC, run_id DESC LIMIT 1)
        AND run_id NOT IN (SELECT run_id FROM (SELECT run_id, row_number() OVER (
                PARTITION BY key, coalesce(payload->>'window_days', payload->>'lookback_days')
                ORDER BY data_cutoff DESC, created_at DESC, run_id DESC) AS r
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
READING_TABLES = tuple(t for t, _ in READINGS)
TABLES = tuple(t for t, _ in DERIVED) + READING_TABLES


@dataclass(frozen=True)
class Retention:
    """How long history is kept: derived rows ``keep_days``, readings ``data_days`` (None: all)."""

    keep_days: int | None
    data_days: int | None = None

    def __post_init__(self) -> None:
        for what, days, least in (("history", self.keep_days, MIN_KEEP_DAYS),
                                  ("readings", self.data_days, MIN_DATA_DAYS)):
            if days is not None and not least <= days <= MAX_KEEP_DAYS:
                why = {"history": "the report's week of alerts, a resolved alert's window long past",
                       "readings": "a week's replay, each step reading 60 days before it"}[what]
                raise ValueError(f"{what} must be kept {least} to {MAX_KEEP_DAYS} days ({why}), got {days}")


AHEAD = timedelta(days=1)  # a clock further past the wall clock is a mistyped date, not the data's


def clock(con: duckdb.DuckDBPyConnection, now: datetime | None = None) -> datetime | None:
    """The data time ages are measured from: ``now``, or the newest reading (None: none). One
    more than a day past the wall clock is refused (ValueError), and so, without ``now``, is a
    utilization or telemetry feed whose newest reading is a stray (``demand.is_stray``): a
    reading dated months ahead (a mistyped month) would make every row old."""
    at = now if now is not None else data_end(con, leave_out_strays=False)
    wall = datetime.now(UTC).replace(tzinfo=None)
    if at is not None and at > wall + AHEAD:
        what = "--now" if now is not None else "the newest reading (utilization, telemetry or spot prices)"
        raise ValueError(f"{what} is {at:%Y-%m-%d %H:%M} UTC, more than a day after this machine's clock "
                         f"({wall:%Y-%m-%d %H:%M} UTC): ages measured from it would make every row old; "
                         + ("give an earlier --now (or fix this machine's clock)" if now is not None
                            else "fix the reading's date (or the clock), or prune with --now"))
    if now is None:  # the regular feeds (a spot series may well go days without a change)
        for table in ("utilization", "device_telemetry"):
            stray = stray_newest(con, table)
            if stray is not None:
                newest, before = stray
                raise ValueError(
                    f"the newest reading of {table} ({newest:%Y-%m-%d %H:%M} UTC) stands {(newest - before).days} "
                    f"days after the one before it ({before:%Y-%m-%d %H:%M}): a mistyped date? ages are measured "
                    "from the newest reading, and would make every row old; fix or delete that reading, or prune "
                    "with --now")
    return at


def _plan(con: duckdb.DuckDBPyConnection, at: datetime, retention: Retention) -> list[tuple[str, str, datetime]]:
    """(table, predicate, cut) of each rule, in order. Alerts are measured from the newest
    utilization when it is behind the clock (the report's heatmap week ends there), and each
    readings table from its own newest row (a feed that stopped keeps its last days)."""
    plan = []
    if retention.keep_days is not None:
        keep = timedelta(days=retention.keep_days)
        util = con.execute("SELECT max(ts) FROM utilization").fetchone()[0]
        for table, predicate in DERIVED:
            end = min(at, util) if table == "alerts" and util is not None else at
            plan.append((table, predicate, end - keep))
    if retention.data_days is not None:
        for table, predicate in READINGS:
            end = con.execute(f"SELECT max(ts) FROM {table}").fetchone()[0]
            plan.append((table, predicate, min(at, end or at) - timedelta(days=retention.data_days)))
    return plan


def prune(con: duckdb.DuckDBPyConnection, at: datetime, retention: Retention, dry_run: bool = False) -> dict:
    """Delete what ``retention`` lets go as of the data time ``at`` (see :func:`clock`), in one
    transaction, and log it in ``prunes`` when anything went. ``dry_run`` changes nothing and
    needs no write access: the rules run on temporary copies of the derived tables, readings
    are counted. Returns ``{table: {"deleted": n, "kept": m}}`` for each table it looked at."""
    plan = _plan(con, at, retention)
    if dry_run:
        return _dry_run(con, plan)
    out: dict = {}
    with transaction(con):
        for table, predicate, cut in plan:
            deleted = con.execute(f"DELETE FROM {table} WHERE {predicate}", {"cut": cut}
                                  if "$cut" in predicate else None).fetchone()[0]
            out[table] = {"deleted": int(deleted), "kept": int(con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])}
        if any(v["deleted"] for v in out.values()):
            # the alerts' cut: a replay before it would fire again alerts deleted here
            history = next((cut for t, _, cut in plan if t == "alerts"), at)
            con.execute("INSERT INTO prunes VALUES (?, ?, ?, ?, ?, now()::TIMESTAMP)",
                        [history, at, retention.keep_days, retention.data_days,
                         json.dumps({t: v["deleted"] for t, v in out.items()})])
    if any(v["deleted"] for v in out.values()):
        con.execute("CHECKPOINT")  # the freed blocks are reused by the next writes
    return out


def _dry_run(con: duckdb.DuckDBPyConnection, plan: list[tuple[str, str, datetime]]) -> dict:
    """:func:`prune`'s counts on a read-only connection: the derived tables copied as temporary
    ones (which shadow them by name, so the rules read the copies), the readings counted."""
    source = con.execute("SELECT current_database()").fetchone()[0].replace('"', '""')
    derived = [t for t, _, _ in plan if t not in READING_TABLES and has_table(con, t)]
    out: dict = {}
    try:
        for table in derived:  # of the models, not their artifacts (a year's: 2 GB)
            columns = "model_id, kind, params, is_champion, data_cutoff, created_at" if table == "models" else "*"
            con.execute(f'CREATE TEMP TABLE {table} AS SELECT {columns} FROM "{source}".main.{table}')
        for table, predicate, cut in plan:
            if not has_table(con, table):  # a warehouse read behind the schema: not there yet
                continue
            params = {"cut": cut} if "$cut" in predicate else None
            if table in derived:
                deleted = con.execute(f"DELETE FROM {table} WHERE {predicate}", params).fetchone()[0]
                kept = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            else:
                deleted = con.execute(f"SELECT count(*) FROM {table} WHERE {predicate}", params).fetchone()[0]
                kept = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0] - deleted
            out[table] = {"deleted": int(deleted), "kept": int(kept)}
    finally:
        for table in derived:
            con.execute(f"DROP TABLE IF EXISTS temp.main.{table}")
    return out


def alerts_pruned_before(con: duckdb.DuckDBPyConnection) -> datetime | None:
    """The latest history cut of a prune that deleted alerts (None: none did): a replay before
    it would fire again alerts resolved then, whose rows are gone."""
    if not has_table(con, "prunes"):
        return None
    return con.execute("SELECT max(history_cut) FROM prunes WHERE TRY_CAST(deleted->>'alerts' AS BIGINT) > 0"
                       ).fetchone()[0]


def compact(con: duckdb.DuckDBPyConnection, path: str | Path) -> tuple[int, int]:
    """Copy the warehouse open on ``con`` (its writer) into a new file and put it in its place;
    return the file's size before and after. DuckDB reuses freed space but never gives it back;
    a copy holds only what is live. The copy takes the file's mode, owner and group (a
    service's warehouse stays its own), and replaces the file a symlink points at, not the
    link. The new file is locked before it replaces the old, so a process that opens the path
    meanwhile waits for it as for any writer; on any failure the copy is removed and the
    warehouse is as it was."""
    path = Path(path).resolve()
    tmp = compaction_copy(path)
    leftovers = (tmp, tmp.with_name(tmp.name + ".wal"))  # the copy, and its log when a write failed
    stat = path.stat()
    name = con.execute("SELECT current_database()").fetchone()[0]
    alias = f"headroom_compact_{os.getpid()}_{int.from_bytes(os.urandom(4), 'big')}"  # not the file's own name
    held = None
    try:
        # and what a compaction killed midway left (this one holds the lock: no other runs)
        for p in compaction_copies(path):
            p.unlink(missing_ok=True)
        con.execute("CHECKPOINT")
        con.execute(f"ATTACH ? AS {alias}", [str(tmp)])
        try:
            quoted = name.replace('"', '""')  # the file's stem: any character a file name may hold
            con.execute(f'COPY FROM DATABASE "{quoted}" TO {alias}')
        finally:
            con.execute(f"DETACH {alias}")
        held = duckdb.connect(str(tmp))  # the new file's lock, held across the swap
        _same_rows(con, held, tmp)
        _same_owner(tmp, stat, path)
        os.replace(tmp, path)
        _sync_folder(path.parent)
    except BaseException as exc:
        if held is not None:
            held.close()
        for p in leftovers:
            p.unlink(missing_ok=True)
        if isinstance(exc, faults.EnvironmentFault):  # worded already (the owner refused)
            raise
        fault = faults.environment_fault(exc, warehouse=path, of_warehouse=True) if isinstance(exc, Exception) else None
        if fault is not None:
            raise fault from exc
        raise
    con.close()  # the old file, now unlinked: nothing of it is read again
    held.close()
    return stat.st_size, path.stat().st_size


def check_owner(path: str | Path) -> None:
    """Refuse (:class:`EnvironmentFault`) before anything is done when a compacted copy could
    not be given the warehouse's mode, owner and group: tried on an empty file beside it."""
    path = Path(path).resolve()
    probe = compaction_copy(path)
    try:
        probe.write_bytes(b"")
        _same_owner(probe, path.stat(), path)
    except faults.EnvironmentFault:
        raise
    except OSError as exc:
        raise (faults.environment_fault(exc, warehouse=path, of_warehouse=True) or exc) from exc
    finally:
        probe.unlink(missing_ok=True)


def _same_owner(tmp: Path, stat: os.stat_result, path: Path) -> None:
    """The copy gets the warehouse's mode, owner and group; refused (nothing changed) when this
    user may not give them, as a copy owned by someone else could lock its service out."""
    os.chmod(tmp, stat.st_mode & 0o7777)
    if (tmp.stat().st_uid, tmp.stat().st_gid) == (stat.st_uid, stat.st_gid):
        return
    try:
        os.chown(tmp, stat.st_uid, stat.st_gid)
    except PermissionError:
        raise faults.EnvironmentFault(
            f"warehouse {path}: belongs to uid {stat.st_uid} gid "
            f"{stat.st_gid}, and a compacted copy made by this user could not be given them; it was not "
            "compacted: run headroom prune --compact as the warehouse's owner (or root)") from None


def _same_rows(old: duckdb.DuckDBPyConnection, new: duckdb.DuckDBPyConnection, tmp: Path) -> None:
    """Refuse a copy that lost a row of any table."""
    tables = [t for (t,) in old.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = "
                                         "current_database() AND NOT temporary ORDER BY table_name").fetchall()]
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
