"""What ``headroom status`` reads: what the warehouse holds and what the flows last wrote.

Every flow writes only when it succeeds (a failed run leaves nothing), so a flow's last run
here is its last successful one; the ingest batches also record refused files.
"""
from __future__ import annotations

import json
from datetime import datetime

import duckdb
import pandas as pd

from pipelines.store import warehouse
from pipelines.store.detection import FAULT_MODEL, SPIKE_MODEL

DETECTORS = f"('{FAULT_MODEL}', '{SPIKE_MODEL}')"  # models the detect flow registers, not demand models

# source kind -> (table, time column): the telemetry a run is fed
SOURCES = {
    "utilization": ("utilization", "ts"),
    "telemetry": ("device_telemetry", "ts"),
    "failures": ("failures", "ts"),
    "spot_prices": ("spot_prices", "ts"),
}


def _ts(value: object) -> datetime | None:
    return None if value is None or pd.isna(value) else pd.Timestamp(value).to_pydatetime()


def sources(con: duckdb.DuckDBPyConnection, now: datetime) -> list[dict]:
    """Rows, first and last timestamp per source kind; its age is the hours from its newest row
    at or before ``now`` (a row dated after the clock, a typo or a replay's future, does not
    make a feed that stopped look fresh), and ``ahead_rows`` counts those after it."""
    out = []
    for kind, (table, col) in SOURCES.items():
        rows, first, last, known, ahead = con.execute(
            f"SELECT count(*), min({col}), max({col}), max({col}) FILTER (WHERE {col} <= ?), "
            f"count(*) FILTER (WHERE {col} > ?) FROM {table}", [now, now]).fetchone()
        known = _ts(known)
        out.append({"kind": kind, "rows": int(rows), "first": _ts(first), "last": _ts(last), "ahead_rows": int(ahead),
                    "age_hours": None if known is None else (now - known).total_seconds() / 3600})
    return out


LAST_RUNS_SQL = {
    # the last ingest: the batches of the newest batch's run; before runs were kept (run_id
    # NULL), the batches that follow each other within a minute
    "ingest": "WITH b AS (SELECT started_at, finished_at, {run_id} AS run_id, CASE WHEN started_at - lag(finished_at) OVER "
              "(ORDER BY started_at, finished_at) > INTERVAL 60 SECOND THEN 1 ELSE 0 END AS new FROM ingest_batches), "
              "s AS (SELECT finished_at, run_id, sum(new) OVER (ORDER BY started_at, finished_at) AS run FROM b), "
              "last AS (SELECT run_id, run FROM s ORDER BY finished_at DESC LIMIT 1) "
              "SELECT max(finished_at), count(*) FILTER (WHERE CASE WHEN (SELECT run_id FROM last) IS NULL "
              "THEN run = (SELECT run FROM last) ELSE run_id = (SELECT run_id FROM last) END) FROM s",
    "train": "SELECT max(created_at), count(*) FILTER (WHERE is_champion) FROM models WHERE kind NOT IN " + DETECTORS,
    "plan": "SELECT max(created_at), count(DISTINCT run_id) FROM recommendations",
    "detect": "SELECT (SELECT max(t) FROM (SELECT updated_at AS t FROM alerts UNION ALL SELECT updated_at "
              "FROM detector_state)), (SELECT count(*) FROM alerts WHERE status = 'firing')",
    "replay": "SELECT max(created_at), count(DISTINCT unique_id) FROM replays",
}
# the table each flow's row reads: one a warehouse behind the schema lacks means the flow never ran
LAST_RUNS_TABLE = {"ingest": "ingest_batches", "train": "models", "plan": "recommendations", "detect": "alerts",
                   "replay": "replays"}


# plan, detect and replay stamp their rows with the clock they decided on (the data's end when
# replaying old data), so that a rerun on the same input writes the same rows; ingest and
# train stamp the wall clock
CLOCK = {"ingest": "wall", "train": "wall", "plan": "decision", "detect": "decision", "replay": "decision"}


def last_runs(con: duckdb.DuckDBPyConnection) -> list[dict]:
    """When each flow last wrote, from what it writes (none: it has not run on this warehouse),
    and on which clock (``CLOCK``)."""
    out = []
    for flow, sql in LAST_RUNS_SQL.items():
        if flow == "ingest":  # a warehouse from before schema 100, read unmigrated, has no run_id
            has_run = warehouse.has_table(con, "ingest_batches") and "run_id" in warehouse.table_columns(
                con, "ingest_batches")
            sql = sql.format(run_id="run_id" if has_run else "NULL::VARCHAR")
        at, count = con.execute(sql).fetchone() if warehouse.has_table(con, LAST_RUNS_TABLE[flow]) else (None, 0)
        out.append({"flow": flow, "last_written": _ts(at), "clock": CLOCK[flow], "count": int(count or 0)})
    batches = warehouse.query(con, "SELECT status, count(*) AS n, sum(rows_loaded) AS loaded, sum(rows_rejected) "
                                   "AS rejected FROM ingest_batches GROUP BY status ORDER BY status")
    out[0]["batches"] = {r["status"]: {"batches": int(r["n"]), "rows_loaded": int(r["loaded"] or 0),
                                       "rows_rejected": int(r["rejected"] or 0)} for r in batches.to_dict("records")}
    return out


def champions(con: duckdb.DuckDBPyConnection) -> list[dict]:
    """The demand champions: group, model, id, data cutoff and backtest WAPE."""
    rows = warehouse.query(con, "SELECT target, kind, model_id, data_cutoff, metrics FROM models "
                                f"WHERE is_champion AND kind NOT IN {DETECTORS} ORDER BY target, created_at DESC")
    out = []
    for r in rows.drop_duplicates("target").to_dict("records"):
        metrics = json.loads(r["metrics"]) if r["metrics"] else {}
        out.append({"group": r["target"], "model": r["kind"], "model_id": r["model_id"],
                    "data_cutoff": _ts(r["data_cutoff"]), "wape": metrics.get("wape")})
    return out


def firing_alerts(con: duckdb.DuckDBPyConnection) -> list[dict]:
    """Firing alerts, most severe and newest first."""
    rows = warehouse.query(con, "SELECT kind, entity, severity, probability, starts_at, summary FROM alerts "
                                "WHERE status = 'firing' ORDER BY CASE severity WHEN 'critical' THEN 0 "
                                "WHEN 'warning' THEN 1 ELSE 2 END, starts_at DESC")
    return [{**r, "starts_at": _ts(r["starts_at"]),
             "probability": None if pd.isna(r["probability"]) else float(r["probability"])}
            for r in rows.to_dict("records")]


def plan_headline(con: duckdb.DuckDBPyConnection) -> dict | None:
    """The latest plan run: its id, data cutoff and the recommended split's sentence per pool."""
    row = con.execute("SELECT run_id, max(data_cutoff) FROM recommendations GROUP BY run_id "
                      "ORDER BY max(created_at) DESC LIMIT 1").fetchone()
    if row is None:
        return None
    rows = warehouse.query(con, "SELECT kind, key, payload FROM recommendations WHERE run_id = ? AND kind IN "
                                "('allocation', 'unplanned') ORDER BY kind, key", [row[0]])
    lines = []
    for r in rows.to_dict("records"):
        p = json.loads(r["payload"])
        if r["kind"] == "unplanned":  # what the plan left out, and why, as the report's summary says it
            what = UNPLANNED_WHAT.get(p.get("not_planned"), "not planned")
            lines.append({"unique_id": p.get("unique_id", r["key"]), "text": f"{what}: {p.get('reason')}"})
        elif p.get("recommended") and p.get("headline"):
            lines.append({"unique_id": p.get("unique_id", r["key"]), "text": p["headline"]})
    return {"run_id": row[0], "data_cutoff": _ts(row[1]), "headline": lines}


UNPLANNED_WHAT = {"all": "not planned", "allocation": "no allocation, reservation or spot",
                  "prescale": "no pre-scale schedule"}
