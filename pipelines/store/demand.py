"""Demand series from the warehouse: the SQL that reads node hourly means per
cluster/pool/resource; :mod:`forecasters.demand` turns them into the history frame."""
from __future__ import annotations

import logging
from datetime import datetime

import duckdb
import pandas as pd

from forecasters.demand import combine_nodes, drop_stale, regularize, sum_nodes
from pipelines.store import warehouse

log = logging.getLogger(__name__)

_NODE_HOURS = """
WITH node_hours AS (
    SELECT cluster || '/' || pool || '/' || resource AS unique_id, node_id,
           date_trunc('hour', ts) AS ds, round(avg(used), 9) AS used, count(*) AS samples
    FROM utilization
    WHERE (?::TIMESTAMP IS NULL OR ts >= ?::TIMESTAMP)
      AND (?::TIMESTAMP IS NULL OR ts <  ?::TIMESTAMP)
    GROUP BY ALL
)
"""
# per series-hour: the sum of the nodes that reported (the common case needs nothing more)
TOTALS_SQL = _NODE_HOURS + """
SELECT unique_id, ds,
       -- parallel float sums differ in the last bits from run to run; rounding keeps
       -- training (and so champions and model ids) reproducible
       round(sum(used), 6)::DOUBLE AS y, count(*) AS nodes, sum(samples) AS samples
FROM node_hours GROUP BY unique_id, ds ORDER BY unique_id, ds
"""
# per node: its first and last hour and how many hours it reported
SPANS_SQL = _NODE_HOURS + """
SELECT unique_id, node_id, min(ds) AS first, max(ds) AS last, count(*) AS hours,
       arg_max(used, ds) AS last_used
FROM node_hours GROUP BY unique_id, node_id ORDER BY unique_id, node_id
"""
# the hours of the nodes that fell silent somewhere inside their span (usually few)
GAPPY_SQL = _NODE_HOURS + """,
gappy AS (
    SELECT unique_id, node_id FROM node_hours GROUP BY unique_id, node_id
    HAVING count(*) < date_diff('hour', min(ds), max(ds)) + 1
)
SELECT n.unique_id, n.node_id, n.ds, n.used
FROM node_hours n JOIN gappy USING (unique_id, node_id) ORDER BY n.unique_id, n.node_id, n.ds
"""

def load_demand(
    con: duckdb.DuckDBPyConnection, since: pd.Timestamp | None = None, until: pd.Timestamp | None = None,
    late: str = "carry",
) -> pd.DataFrame:
    """Hourly demand ``unique_id, ds, y`` on a regular grid (see :func:`combine_nodes`, whose
    ``late`` says what a node a few hours behind counts as, and :func:`regularize`)."""
    params = [since, since, until, until]
    totals = warehouse.query(con, TOTALS_SQL, params)
    if totals.empty:
        return pd.DataFrame({"unique_id": pd.Series(dtype=str), "ds": pd.Series(dtype="datetime64[ns]"),
                             "y": pd.Series(dtype=float)})
    spans = warehouse.query(con, SPANS_SQL, params)
    gappy = warehouse.query(con, GAPPY_SQL, params)
    return regularize(combine_nodes(totals, spans, gappy, late))


SERIES_SQL = "SELECT DISTINCT cluster || '/' || pool || '/' || resource AS unique_id FROM utilization"


# a newest reading time standing this far past the one before it is a mistyped date when few rows
# hold it (one row typed a day or a month off), and at STRAY_FAR whatever holds it (a year off); a
# feed back from an outage comes back with its nodes, as many rows as before it
STRAY_AFTER = pd.Timedelta(days=1)
STRAY_FAR = pd.Timedelta(days=7)
STRAY_FEW = 0.5  # "few": under half the rows of the time before it


def is_stray(gap: pd.Timedelta, rows_newest: int, rows_before: int, far: pd.Timedelta = STRAY_FAR,
             few: bool = True) -> bool:
    """Whether a newest reading time ``gap`` after the one before it, held by ``rows_newest``
    rows against ``rows_before``, is a mistyped date (see ``STRAY_AFTER``; ``few`` False: only
    at ``far``, for change events, which come a few rows at a time)."""
    return gap > far or (few and gap > STRAY_AFTER and rows_newest < STRAY_FEW * rows_before)


def newest_two(con: duckdb.DuckDBPyConnection, table: str, until=None) -> tuple:
    """``table``'s newest reading time (at or before ``until``), the one before it, and the rows
    at each: ``(newest, before, rows_newest, rows_before)``, times None when there are none."""
    u = datetime.max if until is None else pd.Timestamp(until).to_pydatetime()
    return con.execute(f"""
        WITH t AS (SELECT ts FROM {table} WHERE ts <= $u),
        two AS (SELECT ts, count(*) AS n FROM t WHERE ts >= (SELECT max(ts) FROM t WHERE ts < (SELECT max(ts) FROM t))
                   OR ts = (SELECT max(ts) FROM t) GROUP BY ts)
        SELECT max(ts), min(ts) FILTER (WHERE ts < (SELECT max(ts) FROM two)), arg_max(n, ts),
               arg_min(n, ts) FILTER (WHERE ts < (SELECT max(ts) FROM two)) FROM two""", {"u": u}).fetchone()


def stray_newest(con: duckdb.DuckDBPyConnection, table: str) -> tuple[pd.Timestamp, pd.Timestamp] | None:
    """(newest, the reading time before it) when ``table``'s newest reading time is a stray
    (:func:`is_stray`: a reading dated a day to months ahead, a mistyped date), else None."""
    newest, before, n_new, n_before = newest_two(con, table)
    if before is None or not is_stray(pd.Timestamp(newest) - pd.Timestamp(before), n_new, n_before):
        return None
    return pd.Timestamp(newest), pd.Timestamp(before)


def load_recent_demand(con: duckdb.DuckDBPyConnection, lookback_days: int | None) -> pd.DataFrame:
    """Demand over the last ``lookback_days`` of utilization (all of it when None). The
    window ends at the newest reading of any series; a series with no reading in it is
    left out, and named in the log. ValueError when that newest reading stands days after
    every other (a mistyped date would end the window there, and train and plan on nothing)."""
    stray = stray_newest(con, "utilization")
    if stray is not None:
        newest, before = stray
        raise ValueError(f"the newest utilization reading ({newest:%Y-%m-%d %H:%M} UTC) stands "
                         f"{(newest - before).days} days after the one before it ({before:%Y-%m-%d %H:%M}): a "
                         "mistyped date? the demand window ends at the newest reading; fix or delete that reading")
    last = con.execute("SELECT max(ts) FROM utilization").fetchone()[0]
    since = None if last is None or lookback_days is None else pd.Timestamp(last) - pd.Timedelta(days=lookback_days)
    out = load_demand(con, since=since)
    if since is not None:
        recent = warehouse.query(con, SERIES_SQL + " WHERE ts >= ?", [since])["unique_id"]
        stale = sorted(set(warehouse.query(con, SERIES_SQL)["unique_id"]) - set(recent))
        if stale:  # (a series dropped for an outage inside the window is named by regularize)
            log.warning("%d series have no utilization in the %d days up to %s and are not planned or "
                        "forecast: %s", len(stale), lookback_days, last, ", ".join(stale))
    return out


def load_training_demand(con: duckdb.DuckDBPyConnection, lookback_days: int | None, where: str) -> pd.DataFrame:
    """:func:`load_recent_demand` without the series that stopped reporting
    (:func:`forecasters.demand.drop_stale`); ValueError naming ``where`` when none is left."""
    recent = load_recent_demand(con, lookback_days)
    frame = drop_stale(recent)
    frame.attrs["filled"] = recent.attrs.get("filled")  # the interpolated points, not to be scored
    if frame.empty:
        has_rows = con.execute("SELECT count(*) > 0 FROM utilization").fetchone()[0]
        raise ValueError(
            f"no demand series in {where} has enough recent data to train on (see the warnings above)"
            if has_rows else f"no utilization in {where}: ingest some before training")
    return frame


# The clock's steps (seconds) a series' readings are put on: its slowest node's median interval
# between readings, snapped to the nearest of these. Each reading goes to the nearest step and
# each node counts once per step (its mean), so nodes that report a few seconds or minutes
# apart, jittered, or at different rates still add up; readings on the grid stay as they are.
CLOCK_STEPS = (1, 2, 5, 10, 15, 20, 30, 60, 120, 180, 240, 300, 360, 600, 720, 900, 1200, 1800,
               3600, 7200, 10800, 14400, 21600, 28800, 43200, 86400)
_ON_STEPS = """
WITH rows AS (
    SELECT cluster || '/' || pool || '/' || resource AS unique_id, node_id, ts, used, capacity
    FROM utilization WHERE {where}
),
gaps AS (
    SELECT unique_id, node_id,
           epoch_us(ts) - lag(epoch_us(ts)) OVER (PARTITION BY unique_id, node_id ORDER BY ts) AS gap
    FROM rows
),
slowest AS (
    SELECT unique_id, max(gap) AS gap
    FROM (SELECT unique_id, node_id, median(gap) AS gap FROM gaps WHERE gap > 0 GROUP BY ALL) GROUP BY ALL
),
steps AS (
    SELECT unique_id, arg_min(s, abs(ln(s * 1e6 / gap)))::BIGINT * 1000000 AS step
    FROM slowest, (VALUES {clock}) AS clock(s) GROUP BY ALL
),
node_steps AS (
    SELECT unique_id, node_id,
           time_bucket(to_microseconds(coalesce(step, 1)), ts + to_microseconds(coalesce(step, 0) // 2)) AS ds,
           avg(used) AS used, avg(capacity) AS capacity
    FROM rows LEFT JOIN steps USING (unique_id) GROUP BY ALL
)
"""


def _on_steps(where: str) -> str:
    return _ON_STEPS.format(where=where, clock=", ".join(f"({s})" for s in CLOCK_STEPS))


SERIES_IDS_SQL = "SELECT DISTINCT cluster || '/' || pool || '/' || resource AS unique_id FROM utilization ORDER BY 1"


def series_ids(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Every ``cluster/pool/resource`` series the warehouse holds utilization of."""
    return warehouse.query(con, SERIES_IDS_SQL)["unique_id"].tolist()


# one series' nodes on its own steps (see ``CLOCK_STEPS``): each node's mean per step
NODES_AT_RESOLUTION_SQL = _on_steps("cluster || '/' || pool || '/' || resource = ?") + """
SELECT unique_id, node_id, ds, used, capacity FROM node_steps ORDER BY node_id, ds
"""


def nodes_at_resolution(con: duckdb.DuckDBPyConnection, unique_id: str) -> pd.DataFrame:
    """``unique_id, node_id, ds, used, capacity`` of one series' nodes on its own steps."""
    nodes = warehouse.query(con, NODES_AT_RESOLUTION_SQL, [unique_id])
    nodes["ds"] = pd.to_datetime(nodes["ds"]).astype("datetime64[ns]")
    return nodes


def steps_of(nodes: pd.DataFrame) -> pd.DataFrame:
    """``ts, y, nodes, node_capacity`` per step of :func:`nodes_at_resolution`'s frame: the nodes
    that reported summed, and the median capacity a node of it reports."""
    g = nodes.groupby("ds", sort=True)
    return pd.DataFrame({"y": g["used"].sum(), "nodes": g.size(), "node_capacity": g["capacity"].median()}
                        ).rename_axis("ts").reset_index()


def series_at_resolution(con: duckdb.DuckDBPyConnection, unique_id: str) -> pd.DataFrame:
    """``ts, y, nodes, node_capacity`` of one series on its own steps (see ``CLOCK_STEPS``)."""
    return steps_of(nodes_at_resolution(con, unique_id))


def demand_at_resolution(nodes: pd.DataFrame, step: pd.Timedelta) -> pd.DataFrame:
    """``ds, y`` of :func:`nodes_at_resolution`'s series on its ``step``: its nodes summed as
    training sums them (:func:`combine_nodes` at that step): a node's short silence filled from
    its own readings, a step too few of its nodes reported left out, and so is one a late node
    has not reported yet (``late="wait"``): a replay scores only demand that was there."""
    if nodes.empty:
        return pd.DataFrame({"ds": pd.Series(dtype="datetime64[ns]"), "y": pd.Series(dtype=float)})
    return sum_nodes(nodes[["unique_id", "node_id", "ds", "used"]], late="wait", step=step)[["ds", "y"]]


RECENT_SQL = _on_steps("ts >= ?") + """
SELECT unique_id, ds, sum(used) AS y FROM node_steps GROUP BY ALL ORDER BY unique_id, ds
"""


def recent_at_resolution(con: duckdb.DuckDBPyConnection, span: pd.Timedelta) -> pd.DataFrame:
    """Every series' nodes summed per step (see ``CLOCK_STEPS``) over the ``span`` before the
    newest reading."""
    last = con.execute("SELECT max(ts) FROM utilization").fetchone()[0]
    if last is None:
        return pd.DataFrame({"unique_id": pd.Series(dtype=str), "ds": pd.Series(dtype="datetime64[ns]"),
                             "y": pd.Series(dtype=float)})
    return warehouse.query(con, RECENT_SQL, [pd.Timestamp(last) - span])
