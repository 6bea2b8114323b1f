"""Replays in the warehouse: what ``headroom plan replay`` and the run's replay stage write, and
what the report reads (the latest replay of each series)."""
from __future__ import annotations

import json

import duckdb
import numpy as np
import pandas as pd

from pipelines.store import warehouse

# the newest span of each series; of spans ending together (the run's week and a longer
# replay by hand), the longest (its id, series/start/end, sorts first): the same rows always
# give the same page, whatever order they were stored in
LATEST_REPLAY_IDS_SQL = """
SELECT replay_id FROM (
    SELECT replay_id, row_number() OVER (PARTITION BY unique_id ORDER BY created_at DESC, replay_id) AS r
    FROM (SELECT DISTINCT unique_id, replay_id, created_at FROM replays)
) WHERE r = 1
"""
LATEST_REPLAYS_SQL = f"SELECT * FROM replays WHERE replay_id IN ({LATEST_REPLAY_IDS_SQL}) ORDER BY unique_id, strategy"
CAPACITY_SQL = "SELECT ts, demand, planned, reactive_80 FROM replay_capacity WHERE replay_id = ? ORDER BY ts"
DRAWN = ("planned", "reactive_80")  # the capacities the report draws beside the demand


def replay_id(unique_id: str, start: pd.Timestamp, end: pd.Timestamp) -> str:
    """Names a replay by its series and span: the same span replayed again replaces it."""
    return f"replay/{unique_id}/{pd.Timestamp(start):%Y-%m-%dT%H:%M}/{pd.Timestamp(end):%Y-%m-%dT%H:%M}"


def _clean(value: object) -> object:
    if isinstance(value, (float, np.floating)):
        return float(value) if np.isfinite(value) else None
    return value.item() if isinstance(value, np.generic) else value


def save_replay(con: duckdb.DuckDBPyConnection, unique_id: str, start: pd.Timestamp, end: pd.Timestamp,
                step: pd.Timedelta, instance_units: float, models: str, table: pd.DataFrame,
                ts: pd.DatetimeIndex, demand: np.ndarray, capacities: dict[str, np.ndarray],
                created_at: pd.Timestamp, rule: str | None = None) -> str:
    """Replace the replay of ``unique_id`` over ``[start, end)`` in one transaction; ``rule``
    says the pre-scaling rule replayed."""
    rid = replay_id(unique_id, start, end)
    rows = pd.DataFrame([{
        "replay_id": rid, "unique_id": unique_id, "span_start": pd.Timestamp(start), "span_end": pd.Timestamp(end),
        "step_seconds": step.total_seconds(), "instance_units": float(instance_units), "models": models,
        "strategy": r["strategy"], "created_at": created_at, "rule": rule,
        "scores": json.dumps({k: _clean(v) for k, v in r.items() if k != "strategy"}, sort_keys=True),
    } for r in table.to_dict("records")])
    caps = pd.DataFrame({"replay_id": rid, "ts": ts, "demand": demand,
                         **{k: capacities[k] for k in DRAWN if k in capacities}})
    with warehouse.transaction(con):
        con.execute("DELETE FROM replays WHERE replay_id = ?", [rid])
        con.execute("DELETE FROM replay_capacity WHERE replay_id = ?", [rid])
        warehouse.upsert(con, "replays", rows)
        warehouse.upsert(con, "replay_capacity", caps)
    return rid


def latest_replays(con: duckdb.DuckDBPyConnection) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """The latest replay of each series as a table (one row per strategy, scores as columns) and
    its drawn capacities by replay_id."""
    rows = warehouse.query(con, LATEST_REPLAYS_SQL)
    if rows.empty:
        return rows, {}
    scores = pd.DataFrame([json.loads(s) for s in rows["scores"]], index=rows.index)
    table = pd.concat([rows.drop(columns="scores"), scores], axis=1)
    return table, {rid: warehouse.query(con, CAPACITY_SQL, [rid]) for rid in table["replay_id"].unique()}
