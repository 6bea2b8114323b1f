"""``headroom plan replay``: walk forward through a span of one pool's demand, at each decision
point using only the data before it, and score every strategy on what followed.

The forecasts are the train flow's own: its models, its champion choice by backtest
(:mod:`forecasters.selection`), refit daily and refreshed hourly from the newest complete
hour; the capacity rule is the plan's (:func:`planner.prescale.planned_capacity`).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import duckdb
import numpy as np
import pandas as pd

from forecasters import selection
from forecasters.validation import HistoryError
from pipelines.store import demand, replays, warehouse
from planner.cost import reference_offer, select_offers
from planner.plan import PlanPolicy, instance_units, offer_fit
from planner.prescale import PrescalePolicy
from planner.replay import ReplaySpan, frontier_verdict, replay_table  # noqa: F401 (the command's verdict)

log = logging.getLogger(__name__)

DEFAULT_MODELS = ("seasonal_naive", "lgbm", "prophet_lgbm")  # the train flow's
RESELECT_DAYS = 7  # the champion is chosen again by backtest this often; refit every day
LOOKBACK = pd.Timedelta(days=56)  # what a fit sees, as the train flow's --lookback-days
MAX_GAP = pd.Timedelta(days=1)  # one daily season: a longer silence is not replayed through
HISTORY = pd.Timedelta(days=60)  # the most a decision reads before its step (a forecast's history)


class ReplayError(ValueError):
    """A replay that cannot run on this input (a gap, a span outside the data, ...)."""


@dataclass(frozen=True)
class ReplayResult:
    """The table, the capacity of each strategy over the span, and what the forecasts were."""

    table: pd.DataFrame
    ts: pd.DatetimeIndex
    demand: np.ndarray
    capacities: dict[str, np.ndarray]
    champions: dict[str, str]  # day -> model used
    unit_price: float | None = None  # what cost_usd priced a unit-hour at (None: not priced)


def hourly(series: pd.Series) -> pd.DataFrame:
    """The series' hourly means as a history frame: its complete hours, and the hours a gap
    left without readings filled from the same hour a day before (else the last hour), as the
    forecasters need a regular history."""
    uid = series.name
    step = series.index[1] - series.index[0]
    per_hour = max(int(pd.Timedelta("1h") / step), 1)
    g = series.groupby(series.index.floor("h"))
    means = g.mean()[g.count() >= per_hour]
    if means.empty:
        return pd.DataFrame({"unique_id": pd.Series(dtype=str), "ds": pd.Series(dtype="datetime64[ns]"),
                             "y": pd.Series(dtype=float)})
    grid = pd.date_range(means.index[0], means.index[-1], freq="h")
    full = means.reindex(grid)
    full = full.fillna(full.shift(24)).ffill()  # never from a later hour: no lookahead
    return pd.DataFrame({"unique_id": uid, "ds": grid, "y": full.to_numpy()})


def _interpolate(hour_starts: pd.DatetimeIndex, means: np.ndarray, steps: pd.DatetimeIndex) -> np.ndarray:
    """Hourly means as a value per step, linear between hour midpoints."""
    mid = (hour_starts + pd.Timedelta("30min")).as_unit("ns").asi8.astype(float)  # one unit on both sides
    return np.interp(steps.as_unit("ns").asi8.astype(float), mid, means, left=np.nan, right=means[-1] if len(means) else np.nan)


def live_forecasts(series: pd.Series, start: int, policy: PrescalePolicy, models: Sequence[str] = DEFAULT_MODELS,
                   seed: int = 0, progress: Callable[[int, int], None] | None = None
                   ) -> tuple[np.ndarray, dict[str, str]]:
    """The forecast for each step of ``series`` from ``start`` on as it stood before the step:
    every ``refresh`` (at most hourly) the champion forecasts from the newest complete hour
    seen by then; the champion is refit daily and re-chosen every ``RESELECT_DAYS`` on the
    hours before that day. NaN where no model could fit yet."""
    step = series.index[1] - series.index[0]
    lag = policy.steps("lead", step) * step
    refresh = max(pd.Timedelta(policy.refresh), pd.Timedelta("1h"))
    hours = hourly(series)
    out = np.full(len(series), np.nan)
    spec = selection.TrainSpec(horizon=24, windows=2, seed=seed)
    days = pd.date_range(series.index[start].floor("D"), series.index[-1].floor("D"), freq="D")
    champions: dict[str, str] = {}
    name, model = None, None
    for k, day in enumerate(days):
        past = hours[(hours["ds"] + pd.Timedelta("1h") <= day - lag + step) & (hours["ds"] >= day - LOOKBACK)]
        try:
            if name is None or k % RESELECT_DAYS == 0:
                names = [m for m in models if len(past) >= selection.min_points([m], spec)]
                if names:
                    results = [{"group": "g", "model": m, "metrics": selection.backtest_model(past, m, spec)[0]}
                               for m in names]
                    name = selection.champions_from(results).get("g", name)
            model = selection.make_model(name, spec).fit(past) if name is not None else None
        except (HistoryError, ValueError) as exc:
            log.warning("replay %s: no forecast from %s (%s); the rule follows demand alone that day", series.name,
                        day.date(), exc)
            model = None
        champions[str(day.date())] = name if model is not None else "none"
        for r in pd.date_range(day, day + pd.Timedelta("1D") - refresh, freq=refresh):
            sel = (series.index >= r) & (series.index < r + refresh) & (np.arange(len(series)) >= start)
            if model is None or not sel.any():
                continue
            known = hours[hours["ds"] + pd.Timedelta("1h") <= r - lag + step]
            if known.empty:
                continue
            fc = model.predict(24, level=(80,), history=known.tail(24 * 60))
            starts = pd.DatetimeIndex([known["ds"].iloc[-1], *pd.DatetimeIndex(fc["ds"])])
            means = np.concatenate([[known["y"].iloc[-1]], fc["mean"].to_numpy(dtype=float)])
            out[sel] = _interpolate(starts, means, series.index[sel])
        if progress is not None:
            progress(k + 1, len(days))
    return out, champions


def replay(series: pd.Series, start: pd.Timestamp, end: pd.Timestamp, instance_units: float,
           policy: PrescalePolicy, unit_price: float | None = None, models: Sequence[str] = DEFAULT_MODELS,
           progress: Callable[[int, int], None] | None = None) -> ReplayResult:
    """Replay ``[start, end)`` of one series at its own resolution (a regular ``pd.Series``
    named by its ``unique_id``)."""
    series = series[series.index < end]
    first = int(series.index.searchsorted(pd.Timestamp(start)))
    if first <= 0:
        raise ReplayError(f"{series.name}: no data before the replay's start {start} to decide the first step on")
    if first >= len(series):
        raise ReplayError(f"{series.name}: no data in [{start}, {end})")
    live, champions = live_forecasts(series, first, policy, models, progress=progress)
    span = ReplaySpan(series.to_numpy(dtype=float), live, series.index[1] - series.index[0], first, instance_units)
    table, caps = replay_table(span, policy, unit_price)
    return ReplayResult(table, series.index[first:], span.demand[first:], caps, champions, unit_price)


def planned_pools(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Every ``cluster/pool`` with GPU or vCPU demand (what a plan schedules)."""
    ids = demand.series_ids(con)
    return sorted({u.rsplit("/", 1)[0] for u in ids if u.rsplit("/", 1)[1] in ("gpu", "cpu")})


def drained_pools(con: duckdb.DuckDBPyConnection, pools: Sequence[str]) -> list[str]:
    """Of ``pools``, those with no running capacity at the data's end (drained, or silent for a
    day): the plan does not plan them, so the run does not replay them either."""
    from pipelines.plan.planning import CAPACITY_SQL
    from planner.plan import primary_series

    running = set(primary_series(warehouse.query(con, CAPACITY_SQL))["pool_id"])
    return [p for p in pools if p not in running]


def unit_price(catalog: pd.DataFrame, unique_id: str, policy: PlanPolicy, capacity: pd.DataFrame,
               peak: float) -> float | None:
    """The price of one unit-hour of the series' pool: its own machine in the catalog (as the
    plan prices the private cloud); with none of its own, the public offer the plan picks for
    it (its memory per vCPU from ``capacity``, its regions, instances up to the size ratio of
    ``peak``), not the cheapest machine anywhere (a 0.6 GB f1-micro priced 4 GB VMs 3.7x low);
    None without either."""
    pool_id, _, resource = unique_id.rpartition("/")
    if catalog.empty:
        return None
    pool = pool_id.split("/")[-1]
    ref = reference_offer(catalog, resource, pool)
    if ref is None or not float(ref["on_demand_price"]) > 0:
        return None
    if str(ref["location"]) != "private":
        fit = offer_fit(policy.offers, capacity, pool_id, resource, peak)
        public = select_offers(catalog, resource, pool, *fit).get("public")
        return None if public is None else float(policy.costs.at("public").effective(public.unit_price))
    return float(policy.costs.at(str(ref["location"])).effective(float(ref["on_demand_price"]) / float(ref["units"])))


def sizing(con: duckdb.DuckDBPyConnection, unique_id: str, node_units: float, policy: PlanPolicy,
           units: float | None = None, price: float | None = None,
           *, peak: float) -> tuple[float, float | None]:
    """(units one instance adds, price of a unit-hour) for replaying ``unique_id``: the given
    ones, else the plan's (:func:`planner.plan.instance_units`, the catalog machine's price).
    ReplayError when no instance size is known."""
    catalog = warehouse.query(con, "SELECT * FROM instance_catalog")
    pool_id, _, resource = unique_id.rpartition("/")
    units = units or instance_units(catalog, resource, pool_id.split("/")[-1], node_units, policy.prescale)
    if units is None:
        raise ReplayError(f"{unique_id}: no instance size known (no catalog machine, no node size); "
                          "pass --instance-units")
    if price:
        return units, price
    from pipelines.plan.planning import CAPACITY_SQL
    return units, unit_price(catalog, unique_id, policy, warehouse.query(con, CAPACITY_SQL), peak)


def rule_text(policy: PrescalePolicy, unit_price: float | None = None) -> str:
    """The pre-scaling rule in a line, as a replay stores it (with the price its cost_usd is at)."""
    text = (f"lead {policy.lead}, {policy.quantile:.0%} quantile of misses over {policy.calibration}, refreshed "
            f"every {policy.refresh}, scale-in after {policy.stabilization}, at least {policy.min_instances} "
            "instance(s), rounded to the cheaper whole count on the misses")
    return text if unit_price is None else f"{text}; cost_usd at ${unit_price:.4g} per unit-hour"


def store(con: duckdb.DuckDBPyConnection, series: pd.Series, start: pd.Timestamp, end: pd.Timestamp,
          units: float, models: Sequence[str], result: ReplayResult, policy: PrescalePolicy) -> str:
    """Save a replay in the warehouse for the report (the same span again replaces it), stamped
    with its last scored step: the clock it decided up to (``end`` is the step after it, past the
    data's newest reading)."""
    return replays.save_replay(con, str(series.name), start, end, series.index[1] - series.index[0], units,
                               ",".join(models), result.table, result.ts, result.demand, result.capacities,
                               created_at=series.index[series.index < end].max(), rule=rule_text(policy, result.unit_price))


def pick_series(con: duckdb.DuckDBPyConnection, pool: str | None, resource: str | None) -> tuple[pd.Series, float]:
    """The series to replay (``--pool``, ``--resource``) on a regular grid, and the median
    capacity of one of its nodes. ReplayError for an unknown pool, a pool without data or a gap."""
    ids = demand.series_ids(con)
    if not ids:
        raise ReplayError("no utilization to replay")
    pools = sorted({u.rsplit("/", 1)[0] for u in ids})
    if pool is None:
        if len(pools) > 1:
            raise ReplayError(f"{len(pools)} pools hold data; choose one with --pool ({', '.join(pools[:8])})")
        chosen = pools[0]
    else:
        matches = [p for p in pools if p == pool or p.split("/", 1)[1] == pool]
        if len(matches) != 1:
            raise ReplayError(f"pool {pool!r} " + ("is ambiguous: " if matches else "has no data; pools: ")
                              + ", ".join(matches or pools[:8]))
        chosen = matches[0]
    have = [u.rsplit("/", 1)[1] for u in ids if u.rsplit("/", 1)[0] == chosen]
    res = resource or ("gpu" if "gpu" in have else "cpu" if "cpu" in have else have[0])
    if res not in have:
        raise ReplayError(f"pool {chosen} has no {res} data (it has {', '.join(sorted(have))})")
    uid = f"{chosen}/{res}"
    nodes = demand.nodes_at_resolution(con, uid)
    rows = demand.steps_of(nodes)
    if len(rows) < 3:
        raise ReplayError(f"{uid}: {len(rows)} reading time(s), too few to replay")
    ts = pd.DatetimeIndex(rows["ts"]).as_unit("ns")
    step = pd.Timedelta(pd.Series(ts).diff().median())
    off = np.flatnonzero((ts.asi8 - ts.asi8[0]) % step.value != 0)
    if len(off):
        raise ReplayError(f"{uid}: readings every {step} but one at {ts[int(off[0])]} is off that grid; "
                          "replay needs a regular series")
    # the nodes summed as training sums them: a step only part of the pool reported is no demand
    summed = demand.demand_at_resolution(nodes, step)
    series = pd.Series(summed["y"].to_numpy(dtype=float), index=pd.DatetimeIndex(summed["ds"]).as_unit("ns"),
                       name=uid)
    series = series.reindex(pd.date_range(ts[0], ts[-1], freq=step))
    # the steps after the last one the pool reported (its nodes' last readings on a step too
    # few of them reached: a partial last step) end the data, not a gap in it
    end = series.last_valid_index()
    return (series if end is None else series[:end]), float(rows["node_capacity"].median())


def _gaps(series: pd.Series, step: pd.Timedelta) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    """The series' runs of steps without a reading, as ``[first, end)`` spans."""
    missing = series.isna().to_numpy()
    edges = np.flatnonzero(np.diff(np.concatenate([[0], missing.astype(np.int8), [0]])))
    return [(series.index[a], series.index[b - 1] + step) for a, b in zip(edges[::2], edges[1::2])]


def prepare(series: pd.Series, start: str | None, end: str | None
            ) -> tuple[pd.Series, pd.Timestamp, pd.Timestamp]:
    """The span to replay (:func:`span_of`) and the series it reads. Gaps matter only where
    the replay reads: one over ``MAX_GAP`` inside the span is a ReplayError; in the
    ``HISTORY`` before it, the history before the gap is not used (warned), as the forecasters
    would read it filled; shorter gaps in the span are not scored (warned)."""
    begin, stop = span_of(series, start, end)
    step = series.index[1] - series.index[0]
    long = [(a, b) for a, b in _gaps(series, step) if b - a > MAX_GAP and b > begin - HISTORY and a < stop]
    inside = [(a, b) for a, b in long if b > begin]
    if inside:
        a, b = max(inside, key=lambda g: g[1] - g[0])
        raise ReplayError(f"{series.name}: no readings from {a} to {b} ({b - a}), longer than one day; replay a span "
                          "without it (--start/--end)")
    if long:
        a, b = long[-1]
        if b + MAX_GAP > begin:  # the first decisions need a day of history, as span_of's default leaves
            if start:
                raise ReplayError(f"{series.name}: no readings from {a} to {b} ({b - a}), longer than one day, and "
                                  f"less than a day after it before --start {begin}; start at {b + MAX_GAP} or later")
            begin = b + MAX_GAP
            if begin >= stop:
                raise ReplayError(f"{series.name}: no readings from {a} to {b} ({b - a}), longer than one day, and "
                                  "too little data after it to replay")
        log.warning("%s: no readings from %s to %s (%s), longer than one day: the replay reads the data after it only%s",
                    series.name, a, b, b - a, f", from {begin}" if not start else "")
        series = series[series.index >= b]
    scored = series[(series.index >= begin) & (series.index < stop)]
    short = _gaps(scored, step)
    if short:
        a, b = max(short, key=lambda g: g[1] - g[0])
        steps = int(scored.isna().sum())
        log.warning("%s: %d step(s) without readings in %d gap(s), the longest %s (%s to %s): not scored, and the "
                    "rules hold what they last saw through them", series.name, steps, len(short), b - a, a, b)
    return series, begin, stop


def span_of(series: pd.Series, start: str | None, end: str | None) -> tuple[pd.Timestamp, pd.Timestamp]:
    """``[start, end)`` from the options: by default the last 30 days of the data."""
    step = series.index[1] - series.index[0]
    try:
        last = series.index[-1] + step
        stop = min(_utc(end), last) if end else last
        begin = _utc(start) if start else max(stop - pd.Timedelta(days=30), series.index[0] + pd.Timedelta(days=1))
    except ValueError as exc:
        raise ReplayError(f"--start/--end: {exc}") from exc
    if begin >= stop:
        if not start and not end:  # the defaults: the first day is history the rules start from
            raise ReplayError(f"{series.name}: {series.index[0]} to {last} is too short to replay: the first day of the "
                              "data is the history the first decisions are made on; give more than a day")
        if not start:  # the default start: never name a --start the user did not give
            raise ReplayError(f"--end {stop} leaves nothing to replay: the default start is {begin}, 30 days before "
                              "it or after the data's first day, the history the first decisions are made on")
        if not end:  # the end is the data's: never name an --end the user did not give
            raise ReplayError(f"--start {begin} is not before the data's end ({last}): nothing to replay")
        raise ReplayError(f"--start {begin} is not before --end {stop}")
    if stop - begin < step:  # it was charged as a whole step: 10 minutes cost a 15-minute step
        raise ReplayError(f"--start {begin} to --end {stop} is shorter than one step of the data ({step}); "
                          "replay at least one whole step")
    return begin, stop


def _utc(text: str) -> pd.Timestamp:
    """A timestamp option as naive UTC (the command has read a zone name already, as ingest does)."""
    t = pd.Timestamp(text)
    t = t.tz_convert("UTC").tz_localize(None) if t.tzinfo is not None else t
    if not pd.Timestamp("1970-01-01") <= t <= pd.Timestamp("2200-01-01"):  # pandas' ns clock ends in 1677 and 2262
        raise ValueError(f"{text!r} is not between 1970 and 2200")
    return t
