"""Demand history from node readings: the rules that turn per-node hourly means into the
forecasters' history frame ``unique_id, ds, y`` (no I/O; the shell reads the node hours).

Per node, ``used`` is averaged within each hour (so 5-minute and hourly samples weigh the
same); node averages are then summed per cluster/pool/resource, with a node's short silences
filled from its own readings rather than counted as zero (:func:`sum_nodes`).
"""
from __future__ import annotations

import logging

import numpy as np
import pandas as pd

log = logging.getLogger(__name__)

# hours: a node's silence up to this long is missed scrapes (interpolated); a longer one, the
# node was off or gone (a nightly power-down must not be filled in with daytime load)
MAX_NODE_GAP = 6
MIN_REPORTING_SHARE = 0.5  # an hour with no more of its nodes than this (after filling) is not a total
# hours: a node that has not reported the newest hours (an exporter or an ingest run behind the
# others) counts at its last hourly mean while it is at most this far behind
LATE_CARRY = 3


HOUR = pd.Timedelta(hours=1)


def sum_nodes(node_hours: pd.DataFrame, late: str = "carry", step: pd.Timedelta = HOUR) -> pd.DataFrame:
    """:func:`combine_nodes` from node hourly means ``unique_id, node_id, ds, used`` (or each
    ``step``'s means: a replay at the readings' own resolution)."""
    g = node_hours.groupby(["unique_id", "ds"], sort=True)["used"]
    totals = pd.DataFrame({"y": g.sum().round(6), "nodes": g.size()}).reset_index()
    ordered = node_hours.sort_values("ds")
    per_node = ordered.groupby(["unique_id", "node_id"], sort=True)
    spans = pd.DataFrame({"first": per_node["ds"].min(), "last": per_node["ds"].max(), "hours": per_node.size(),
                          "last_used": per_node["used"].last()}).reset_index()
    span_h = (spans["last"] - spans["first"]) / step + 1
    gappy = spans.loc[spans["hours"] < span_h, ["unique_id", "node_id"]]
    return combine_nodes(totals, spans, node_hours.merge(gappy, on=["unique_id", "node_id"]), late, step)


def combine_nodes(totals: pd.DataFrame, spans: pd.DataFrame, gappy: pd.DataFrame,
                  late: str = "carry", step: pd.Timedelta = HOUR) -> pd.DataFrame:
    """Demand ``unique_id, ds, y, nodes`` (``nodes``: how many reported; and ``samples``,
    the readings behind them, when ``totals`` has it) from the per-hour sums of the nodes
    that reported, each node's span, and the hours of the nodes that fell silent inside
    their span.

    A node silent for up to ``MAX_NODE_GAP`` hours inside its span is not counted as zero:
    those hours are interpolated from its own readings. Each hour expects the nodes whose
    span covers it, less those silent for longer than that (off, not missed), plus those that
    went quiet less than a day before the end of the data (late, not gone). An hour where
    no more than ``MIN_REPORTING_SHARE`` of the expected nodes have a value (the last hours,
    before most nodes have reported them) is left out, to be treated as a missing hour by
    :func:`regularize`. Both are counted in the log.

    A node that has not reported the newest hours, while it is at most ``LATE_CARRY`` hours
    behind the end, counts in them at its last hourly mean (``spans.last_used``), in the hours
    kept by the rule above: a node whose readings come a few hours after the others' would
    otherwise read as a dip in demand, which a forecast starts from and the burst detector
    reads once and never again. A node drained before it left (near zero) adds nothing; one
    further behind counts as absent (it may be gone), and so does one that reports in another
    series of its cluster since (moved to another pool). With ``late="wait"`` (the burst
    detector) those hours are left out instead, until the node reports them or falls further
    behind: a busy node that died, its jobs rescheduled onto the others, would otherwise be
    counted twice, a burst the detector could not take back.

    ``step``: the grid's step (an hour; a replay's is its readings' own), the hours above
    being counted in time, not in steps."""
    if late not in ("carry", "wait"):
        raise ValueError(f"late must be 'carry' or 'wait', got {late!r}")
    quiet = pd.Timedelta(hours=24)  # a node quiet for less than this at the end of the data is late
    spans = _latest_anywhere(spans)
    parts, invented = [], []
    gappy_by = dict(tuple(gappy.groupby("unique_id", sort=False))) if not gappy.empty else {}
    for uid, t in totals.groupby("unique_id", sort=True):
        grid = pd.date_range(t["ds"].min(), t["ds"].max(), freq=step)
        pos = {ts: i for i, ts in enumerate(grid)}
        y = pd.Series(t["y"].to_numpy(), index=pd.DatetimeIndex(t["ds"])).reindex(grid).to_numpy(dtype=float)
        nodes = pd.Series(t["nodes"].to_numpy(), index=pd.DatetimeIndex(t["ds"])).reindex(grid).fillna(0).to_numpy()
        # expected nodes per hour: +1 from a node's first hour to its last (or to the end, if
        # it went quiet less than a day before it), by a running sum
        sp = spans[spans["unique_id"] == uid]
        end = grid[-1]
        # (a node that moved to another pool is not expected back)
        last = sp["last"].where(~((end - sp["last"] <= quiet) & (sp["last"] < end) & ~sp["elsewhere"]), end)
        change = np.zeros(len(grid) + 1)
        np.add.at(change, sp["first"].map(pos).to_numpy(dtype=int), 1)
        np.add.at(change, last.map(pos).to_numpy(dtype=int) + 1, -1)
        expected = np.cumsum(change)[:-1]
        have = nodes.astype(float)
        g = gappy_by.get(uid)
        filled_total = 0
        if g is not None:
            wide = g.pivot(index="ds", columns="node_id", values="used").reindex(grid)
            values = wide.to_numpy(dtype=float)
            missing = np.isnan(values)
            inside = ~np.isnan(wide.ffill().to_numpy()) & ~np.isnan(wide.bfill().to_numpy())
            run_len = np.zeros_like(values)  # the length of the silence each missing hour is in
            for j in range(values.shape[1]):
                col = (missing & inside)[:, j].astype(np.int8)
                edges = np.flatnonzero(np.diff(np.concatenate([[0], col, [0]])))
                for a, b in zip(edges[::2], edges[1::2]):
                    run_len[a:b, j] = b - a
            longest = MAX_NODE_GAP * HOUR / step  # in steps
            fill = missing & inside & (run_len <= longest)
            out = missing & inside & (run_len > longest)
            if fill.any():
                interp = wide.interpolate(limit_area="inside").to_numpy(dtype=float)
                add = np.where(fill, interp, 0.0).sum(axis=1)
                y = np.where(np.isnan(y), 0.0, y) + add
                y[(nodes == 0) & ~fill.any(axis=1)] = np.nan
                have = have + fill.sum(axis=1)
                filled_total = int(fill.sum())
            _warn_mass_silence(uid, grid, out.sum(axis=1), expected, step)
            expected = expected - out.sum(axis=1)
        if filled_total:
            log.warning("demand %s: %d node-%s(s) missing inside their node's span interpolated", uid, filled_total,
                        _unit(step))
        keep = (have > 0) & (have > MIN_REPORTING_SHARE * expected)
        partial = int(((have > 0) & ~keep).sum())
        if partial:
            log.warning("demand %s: %d %s(s) with %.0f%% or fewer of the nodes reporting treated as missing",
                        uid, partial, _unit(step), 100 * MIN_REPORTING_SHARE)
        y, carried = _carry_late_nodes(uid, y, keep, sp, grid, end)
        if late == "wait":
            keep = keep & ~carried
        # an hour no node reported, kept because its silent nodes were interpolated: no reading
        invented += [(str(uid), ts) for ts in grid[keep & (nodes == 0)]]
        part = pd.DataFrame({"unique_id": uid, "ds": grid[keep], "y": np.round(y[keep], 6),
                             "nodes": nodes[keep].astype(int)})
        if "samples" in t:
            samples = pd.Series(t["samples"].to_numpy(), index=pd.DatetimeIndex(t["ds"])).reindex(grid)
            part["samples"] = samples.fillna(0).to_numpy()[keep].astype(int)
        parts.append(part)
    out = pd.concat(parts, ignore_index=True)
    out.attrs["filled"] = tuple(invented)  # see regularize
    return out


def _unit(step: pd.Timedelta) -> str:
    return "hour" if step == HOUR else "step"


def _warn_mass_silence(uid: str, grid: pd.DatetimeIndex, silent: np.ndarray, expected: np.ndarray,
                       step: pd.Timedelta = HOUR) -> None:
    """Warn when more than ``MIN_REPORTING_SHARE`` of a series' nodes fall silent together for
    longer than ``MAX_NODE_GAP`` hours and report again after: more likely the monitoring than
    the fleet. Those hours count only the nodes that reported (silent nodes are taken as off)."""
    mass = (expected > 0) & (silent > MIN_REPORTING_SHARE * expected)
    if not mass.any():
        return
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mass.astype(np.int8), [0]])))
    runs = list(zip(edges[::2], edges[1::2]))
    a, b = max(runs, key=lambda r: r[1] - r[0])
    # with every node silent no step has a reading: a gap, filled as gaps are, not a drop
    none = silent[a:b] >= expected[a:b]
    drop = "count only the nodes that reported, a drop in demand that forecasts and plans will learn"
    effect = ("no node reported: they are missing, filled as gaps are" if none.all() else
              f"in {int(none.sum())} of them no node reported (missing, filled as gaps are); the others {drop}"
              if none.any() else drop)
    log.warning("demand %s: %d of %d nodes silent together from %s to %s, all reporting again after (%d such "
                "stretch(es)): a monitoring outage? Those %ss %s", uid, int(silent[a:b].max()),
                int(expected[a:b].max()), grid[a], grid[b - 1], len(runs), _unit(step), effect)


def _latest_anywhere(spans: pd.DataFrame) -> pd.DataFrame:
    """``spans`` with ``elsewhere``: whether the node has a later reading in another pool of
    its cluster (it moved there): not late, then. (Another resource of the same pool does not
    count: its exporter may be on time while this one's is late.)"""
    parts = spans["unique_id"].str.split("/", n=2, expand=True) if not spans.empty else None
    if parts is None or parts.shape[1] < 2:
        return spans.assign(elsewhere=False)
    keyed = spans.assign(_c=parts[0], _p=parts[1])
    pools = keyed.groupby(["_c", "node_id", "_p"], as_index=False)["last"].max()
    other = pools.merge(pools, on=["_c", "node_id"], suffixes=("", "_o"))
    other = other[other["_p"] != other["_p_o"]].groupby(["_c", "node_id", "_p"], as_index=False)["last_o"].max()
    keyed = keyed.merge(other, on=["_c", "node_id", "_p"], how="left")
    return spans.assign(elsewhere=(keyed["last_o"] > keyed["last"]).fillna(False).to_numpy(dtype=bool))


def _carry_late_nodes(uid: str, y: np.ndarray, keep: np.ndarray, spans: pd.DataFrame, grid: pd.DatetimeIndex,
                      end: pd.Timestamp) -> tuple[np.ndarray, np.ndarray]:
    """``y`` plus, in the kept hours after each node's last one, that node's last hourly mean,
    for the nodes at most ``LATE_CARRY`` hours behind ``end`` and silent everywhere (see
    :func:`combine_nodes`); and the hours where something was carried."""
    behind = end - spans["last"]
    late = spans[(behind > pd.Timedelta(0)) & (behind <= pd.Timedelta(hours=LATE_CARRY)) & ~spans["elsewhere"]]
    carried = np.zeros(len(y), dtype=bool)
    if late.empty or "last_used" not in late:
        return y, carried
    y = y.copy()
    after = grid.searchsorted(late["last"].to_numpy(), side="right")
    for start, used in zip(after, late["last_used"].to_numpy(dtype=float)):
        y[start:] = np.where(keep[start:], y[start:] + used, y[start:])
        if used > 0:
            carried[start:] |= keep[start:]
    log.info("demand %s: %d node(s) not reported since up to %d hour(s) before the end count at their last "
             "hourly mean meanwhile", uid, len(late), LATE_CARRY)
    return y, carried


MAX_INTERPOLATED_GAP = pd.Timedelta(hours=24)  # a longer outage is not filled in
MIN_STRETCH = pd.Timedelta(days=7)  # what must follow a long outage for a series to be kept

def drop_stale(frame: pd.DataFrame, max_lag: pd.Timedelta = MAX_INTERPOLATED_GAP) -> pd.DataFrame:
    """``frame`` without the series whose last hour is more than ``max_lag`` before the
    newest of any (a pool that stopped reporting: a forecast from its own last hour would lie
    in the past), each named in a warning with its last hour."""
    if frame.empty:
        return frame
    ends = frame.groupby("unique_id")["ds"].max()
    cutoff = ends.max()
    stale = ends[ends < cutoff - max_lag]
    if stale.empty:
        return frame
    named = ", ".join(f"{u} (last {t})" for u, t in stale.head(5).items())
    log.warning("%d series stopped reporting more than %s before the data cutoff %s and are not forecast: %s",
                len(stale), f"{max_lag / pd.Timedelta(hours=1):g} h", cutoff, named)
    return frame[~frame["unique_id"].isin(stale.index)].reset_index(drop=True)


def regularize(raw: pd.DataFrame, freq: str = "h") -> pd.DataFrame:
    """Put every series on a complete ``freq`` grid.

    Hours with no report at all are interpolated linearly between their neighbours (and
    counted in the log) when the gap is at most ``MAX_INTERPOLATED_GAP``. A longer outage
    is not invented: the series keeps only what follows its last such gap, and is left
    out when that is shorter than ``MIN_STRETCH`` (both logged). A last hour reported by
    fewer nodes than the hour before it, or with fewer readings per node (an hour still in
    progress: 25 minutes of 5-minute samples), is dropped until it is complete.

    ``attrs["filled"]`` lists the interpolated points (``(unique_id, ds)`` pairs, a tuple:
    pandas compares attrs when it concatenates), ``raw``'s own (hours :func:`combine_nodes`
    made up wholly from silent nodes) included: they have no actual, so a backtest must not
    score a forecast against them."""
    parts, filled_keys = [], list(raw.attrs.get("filled", ()))
    step = pd.Timedelta(freq if freq[0].isdigit() else f"1{freq}")
    for uid, g in raw.groupby("unique_id", sort=True):
        g = g.sort_values("ds")
        if "nodes" in g and len(g) > 1:
            last, before = g.iloc[-1], g.iloc[-2]
            fewer_nodes = last["nodes"] < before["nodes"]  # some nodes have not reported it yet
            fewer_samples = ("samples" in g and last["nodes"] > 0 and before["nodes"] > 0
                             and last["samples"] / last["nodes"] < before["samples"] / before["nodes"])
            if fewer_nodes or fewer_samples:
                g = g.iloc[:-1]
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
            filled_keys += [(str(uid), t) for t in grid[filled.isna().to_numpy()]]
            filled = filled.interpolate(limit_direction="both")
        parts.append(pd.DataFrame({"unique_id": uid, "ds": grid, "y": filled.to_numpy()}))
    if not parts:
        return pd.DataFrame({"unique_id": pd.Series(dtype=str), "ds": pd.Series(dtype="datetime64[ns]"),
                             "y": pd.Series(dtype=float)})
    out = pd.concat(parts, ignore_index=True)
    out["ds"] = out["ds"].astype("datetime64[ns]")
    out.attrs["filled"] = tuple(filled_keys)
    return out


def filled_points(frame: pd.DataFrame) -> pd.MultiIndex | None:
    """The (unique_id, ds) keys :func:`regularize` filled in ``frame`` (None: none known)."""
    filled = frame.attrs.get("filled")
    if not filled:
        return None
    return pd.MultiIndex.from_tuples(filled, names=["unique_id", "ds"])


def at_points(frame: pd.DataFrame, points: pd.MultiIndex) -> np.ndarray:
    """Which rows of ``frame`` are at the (unique_id, ds) ``points``."""
    return pd.MultiIndex.from_arrays([frame["unique_id"].astype(str), frame["ds"]]).isin(points)


def blank_filled(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with ``y`` NaN at the points :func:`regularize` filled: hours no node reported
    are no evidence (a chart's gap, a detector's silence), not the line drawn across them."""
    filled = filled_points(frame)
    if filled is None:
        return frame
    out = frame.copy()
    out.loc[at_points(frame, filled), "y"] = np.nan
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
