"""Demand series from the warehouse: hourly totals per cluster/pool/resource.

Per node, ``used`` is averaged within each hour (so 5-minute and hourly samples
weigh the same); node averages are then summed per cluster/pool/resource, with a
node's short silences filled from its own readings rather than counted as zero
(:func:`sum_nodes`). The result is the forecasters' history frame ``unique_id, ds, y``.
"""
from __future__ import annotations

import logging

import duckdb
import numpy as np
import pandas as pd

from pipelines import warehouse

log = logging.getLogger(__name__)

NODE_HOURS_SQL = """
SELECT cluster || '/' || pool || '/' || resource AS unique_id, node_id,
       date_trunc('hour', ts) AS ds,
       round(avg(used), 9)    AS used
FROM utilization
WHERE (?::TIMESTAMP IS NULL OR ts >= ?::TIMESTAMP)
  AND (?::TIMESTAMP IS NULL OR ts <  ?::TIMESTAMP)
GROUP BY ALL
ORDER BY unique_id, ds, node_id
"""

MAX_NODE_GAP = 24  # hours: a node's gap up to this long is interpolated; a longer one, the node was out
MIN_REPORTING_SHARE = 0.5  # an hour with fewer of its nodes than this (after filling) is not a total


def sum_nodes(node_hours: pd.DataFrame) -> pd.DataFrame:
    """Node hourly means -> demand ``unique_id, ds, y, nodes`` (``nodes``: how many reported).

    A node that misses some hours inside its span (between its first and last report) is
    not counted as zero: gaps of up to ``MAX_NODE_GAP`` hours are interpolated from its own
    readings. An hour where, even so, fewer than ``MIN_REPORTING_SHARE`` of the nodes whose
    span covers it have a value (a collector outage) is left out, to be treated as a
    missing hour by :func:`regularize`. Both are counted in the log."""
    parts = []
    for uid, g in node_hours.groupby("unique_id", sort=True):
        wide = g.pivot(index="ds", columns="node_id", values="used").sort_index()
        wide = wide.reindex(pd.date_range(wide.index.min(), wide.index.max(), freq="h"))
        reported = wide.notna()
        values = wide.to_numpy(dtype=float)
        missing = np.isnan(values)
        inside = ~np.isnan(wide.ffill().to_numpy()) & ~np.isnan(wide.bfill().to_numpy())
        # length of the run of missing hours each missing cell belongs to
        run_len = np.zeros_like(values)
        for j in np.flatnonzero((missing & inside).any(axis=0)):
            col = missing[:, j]
            edges = np.flatnonzero(np.diff(np.concatenate([[0], col.astype(np.int8), [0]])))
            for a, b in zip(edges[::2], edges[1::2]):
                run_len[a:b, j] = b - a
        fill = missing & inside & (run_len <= MAX_NODE_GAP)
        if fill.any():
            interp = wide.interpolate(limit_area="inside").to_numpy(dtype=float)
            values = np.where(fill, interp, values)
            log.warning("demand %s: %d node-hour(s) missing inside their node's span interpolated",
                        uid, int(fill.sum()))
        have = ~np.isnan(values)
        expected = inside.sum(axis=1)
        total = np.where(have, values, 0.0).sum(axis=1)
        keep = have.any(axis=1) & (have.sum(axis=1) >= MIN_REPORTING_SHARE * expected)
        partial = int((have.any(axis=1) & ~keep).sum())
        if partial:
            log.warning("demand %s: %d hour(s) with under %.0f%% of the nodes reporting treated as missing",
                        uid, partial, 100 * MIN_REPORTING_SHARE)
        parts.append(pd.DataFrame({"unique_id": uid, "ds": wide.index[keep], "y": np.round(total[keep], 6),
                                   "nodes": reported.sum(axis=1).to_numpy()[keep]}))
    return pd.concat(parts, ignore_index=True)


def load_demand(
    con: duckdb.DuckDBPyConnection, since: pd.Timestamp | None = None, until: pd.Timestamp | None = None
) -> pd.DataFrame:
    """Hourly demand ``unique_id, ds, y`` on a regular grid (see :func:`sum_nodes` and
    :func:`regularize`)."""
    params = [since, since, until, until]
    raw = warehouse.query(con, NODE_HOURS_SQL, params)
    if raw.empty:
        return pd.DataFrame({"unique_id": pd.Series(dtype=str), "ds": pd.Series(dtype="datetime64[ns]"),
                             "y": pd.Series(dtype=float)})
    return regularize(sum_nodes(raw))


MAX_INTERPOLATED_GAP = pd.Timedelta(hours=24)  # a longer outage is not filled in
MIN_STRETCH = pd.Timedelta(days=7)  # what must follow a long outage for a series to be kept

SERIES_SQL = "SELECT DISTINCT cluster || '/' || pool || '/' || resource AS unique_id FROM utilization"


def load_recent_demand(con: duckdb.DuckDBPyConnection, lookback_days: int | None) -> pd.DataFrame:
    """Demand over the last ``lookback_days`` of utilization (all of it when None). The
    window ends at the newest reading of any series; a series with no reading in it is
    left out, and named in the log."""
    last = con.execute("SELECT max(ts) FROM utilization").fetchone()[0]
    since = None if last is None or lookback_days is None else pd.Timestamp(last) - pd.Timedelta(days=lookback_days)
    out = load_demand(con, since=since)
    if since is not None:
        stale = sorted(set(warehouse.query(con, SERIES_SQL)["unique_id"]) - set(out["unique_id"]))
        if stale:
            log.warning("%d series have no utilization in the %d days up to %s and are not planned or "
                        "forecast: %s", len(stale), lookback_days, last, ", ".join(stale))
    return out


def regularize(raw: pd.DataFrame, freq: str = "h") -> pd.DataFrame:
    """Put every series on a complete ``freq`` grid.

    Hours with no report at all are interpolated linearly between their neighbours (and
    counted in the log) when the gap is at most ``MAX_INTERPOLATED_GAP``. A longer outage
    is not invented: the series keeps only what follows its last such gap, and is left
    out when that is shorter than ``MIN_STRETCH`` (both logged). A last hour reported by
    fewer nodes than the hour before it (a partial hour) is dropped."""
    parts = []
    step = pd.Timedelta(freq if freq[0].isdigit() else f"1{freq}")
    for uid, g in raw.groupby("unique_id", sort=True):
        g = g.sort_values("ds")
        if "nodes" in g and len(g) > 1 and g["nodes"].iloc[-1] < g["nodes"].iloc[-2]:
            g = g.iloc[:-1]  # some nodes have not reported their last hour yet
        series = g.set_index("ds")["y"]
        jumps = series.index.to_series().diff()
        long = jumps[jumps > MAX_INTERPOLATED_GAP + step]
        if not long.empty:
            restart = long.index[-1]
            gap = long.iloc[-1] - step
            if series.index[-1] - restart < MIN_STRETCH:
                log.warning("demand %s: left out, only %s of data since its last outage (%s without data "
                            "before %s)", uid, series.index[-1] - restart, gap, restart)
                continue
            log.warning("demand %s: %s without data before %s; the series starts after it", uid, gap, restart)
            series = series[series.index >= restart]
        grid = pd.date_range(series.index.min(), series.index.max(), freq=freq)
        filled = series.reindex(grid)
        gaps = int(filled.isna().sum())
        if gaps:
            log.warning("demand %s: %d missing hour(s) interpolated", uid, gaps)
            filled = filled.interpolate(limit_direction="both")
        parts.append(pd.DataFrame({"unique_id": uid, "ds": grid, "y": filled.to_numpy()}))
    if not parts:
        return pd.DataFrame({"unique_id": pd.Series(dtype=str), "ds": pd.Series(dtype="datetime64[ns]"),
                             "y": pd.Series(dtype=float)})
    out = pd.concat(parts, ignore_index=True)
    out["ds"] = out["ds"].astype("datetime64[ns]")
    return out


def series_group(unique_id: str, group_by: str) -> str:
    """The group a ``cluster/pool/resource`` series belongs to: 'resource', 'cluster',
    'pool' (cluster/pool) or 'all'."""
    cluster, pool, resource = (unique_id.split("/") + ["", "", ""])[:3]
    return {"resource": resource, "cluster": cluster, "pool": f"{cluster}/{pool}", "all": "all"}[group_by]


def split_groups(demand: pd.DataFrame, group_by: str = "resource") -> dict[str, pd.DataFrame]:
    """Demand split into series groups; one global model (and one champion) per group."""
    if group_by not in ("resource", "cluster", "pool", "all"):
        raise ValueError(f"group_by must be resource, cluster, pool or all, not {group_by!r}")
    keys = demand["unique_id"].map(lambda u: series_group(u, group_by))
    return {k: g.reset_index(drop=True) for k, g in demand.groupby(keys, sort=True)}


def describe(frame: pd.DataFrame) -> dict:
    """Series count and data cutoff (last timestamp) of a demand frame."""
    if frame.empty:
        return {"series": 0, "data_cutoff": None}
    return {"series": int(frame["unique_id"].nunique()), "data_cutoff": pd.Timestamp(frame["ds"].max())}
