"""Pre-scaling: predictive + reactive capacity at the data's own resolution.

At each step the rule holds

    need[t] = seen[t] + (forecast[t] - forecast[t - lead]) + margin

rounded up to whole instances: the demand last seen (``lead`` late, as metrics and new
instances are), moved by the change the forecast expects over the lead (so capacity rises
ahead of the daily and weekly tides the forecast knows), plus ``margin``, the ``q``-quantile
of how far demand recently ran above that prediction (a conformal bound on what the forecast
misses). ``q = shortage_cost / (shortage_cost + idle_cost)`` is the newsvendor quantile: the
level where one more unit's expected shortage saving equals its idle cost. Capacity comes in
whole instances, so the need is rounded to the cheaper of the two instance counts around it,
priced on the same recent misses (rounding up always put a whole idle instance behind a need
just over a boundary: 4.0011 GPUs on two 4-GPU machines). The margin is
re-learnt every ``refresh`` from the ``calibration`` window before it. Scale-in waits
``stabilization`` (the lower need must hold that long), as Kubernetes' HPA and target
tracking do.

:func:`prescale_schedule` is the plan's view of the same rule for the forecast ahead: the
capacity it expects to hold when demand follows the forecast.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from planner.scaling import delayed, stabilized, whole_instances
from planner.validation import require_columns

PRESCALE_COLUMNS = [
    "unique_id", "ts", "forecast_mean", "forecast_upper", "capacity", "target_capacity",
    "instances_delta", "action", "reason", "reactive_margin",
]
MIN_ERRORS = 12  # fewer recent errors than this: the margin is DEFAULT_SHARE of the level
DEFAULT_SHARE = 0.25  # what an 80%-target autoscaler keeps above demand


@dataclass(frozen=True)
class PrescalePolicy:
    """The cost trade-off that sets the margin, and the timing of the scaler."""

    shortage_cost: float = 99.0  # one unit short for a step, in idle units it is worth: q = 0.99
    idle_cost: float = 1.0
    lead: str = "5min"  # how late demand is seen and new capacity serves
    stabilization: str = "30min"  # scale in only once the lower need has held this long
    refresh: str = "1h"  # how often forecasts and the margin are refreshed
    calibration: str = "7D"  # the trailing window the margin learns from
    min_instances: int = 1
    instance_units: float | None = None  # units one instance adds, where no catalog offer says

    def __post_init__(self) -> None:
        if not (self.shortage_cost > 0 and self.idle_cost > 0):
            raise ValueError("shortage_cost and idle_cost must be > 0")
        for name in ("lead", "stabilization", "refresh", "calibration"):
            if not pd.Timedelta(getattr(self, name)) > pd.Timedelta(0):
                raise ValueError(f"{name} must be a positive duration, got {getattr(self, name)!r}")
        day = pd.Timedelta("1D")
        if pd.Timedelta(self.refresh) > day or day % pd.Timedelta(self.refresh) != pd.Timedelta(0):
            # the refreshes start each day afresh: one that does not divide a day left the day's
            # tail (7h: its last 3 hours; 2D: every hour) without a forecast, silently reactive
            raise ValueError(f"refresh must divide a day (e.g. 15min, 1h, 6h, 1D), got {self.refresh!r}")
        if self.min_instances < 0:
            raise ValueError("min_instances must be >= 0")
        if self.instance_units is not None and not self.instance_units > 0:
            raise ValueError(f"instance_units must be > 0, got {self.instance_units}")

    @property
    def quantile(self) -> float:
        """The newsvendor quantile the margin provisions for."""
        return self.shortage_cost / (self.shortage_cost + self.idle_cost)

    def steps(self, name: str, step: pd.Timedelta) -> int:
        """A duration of the policy in steps of ``step`` (at least one)."""
        return max(int(round(pd.Timedelta(getattr(self, name)) / step)), 1)


def predicted(demand: np.ndarray, forecast: np.ndarray, lag: int) -> np.ndarray:
    """Demand as seen ``lag`` steps late, moved by the forecast's own change over those steps
    (unmoved where the forecast is missing)."""
    seen, before = delayed(demand, lag), delayed(forecast, lag)
    f = np.asarray(forecast, dtype=float)
    change = np.where(np.isfinite(f) & np.isfinite(before), f - before, 0.0)
    return seen + change


def misses(demand: np.ndarray, prediction: np.ndarray) -> np.ndarray | None:
    """How far demand ran above its prediction, step by step (None: fewer than MIN_ERRORS)."""
    d, p = np.asarray(demand, dtype=float), np.asarray(prediction, dtype=float)
    ok = np.isfinite(d) & np.isfinite(p)
    return d[ok] - p[ok] if ok.sum() >= MIN_ERRORS else None


def misses_at(demand: np.ndarray, forecast: np.ndarray, policy: PrescalePolicy, step: pd.Timedelta,
              refresh_at: int) -> tuple[float, np.ndarray | None]:
    """The margin a refresh at step ``refresh_at`` learns, and the misses it learns from, over
    the calibration window of demand seen by then (up to ``refresh_at - lead``): the
    ``q``-quantile of the misses (at least 0); with too few, ``DEFAULT_SHARE`` of the window's
    level and no misses."""
    lag = policy.steps("lead", step)
    known = max(refresh_at - lag + 1, 0)
    lo = max(known - policy.steps("calibration", step), 0)
    pred = predicted(demand[:known], forecast[:known], lag)
    errors = misses(demand[lo:known], pred[lo:known])
    if errors is None:
        d = np.asarray(demand[lo:known], dtype=float)
        return float(DEFAULT_SHARE * (np.nanmax(d) if np.isfinite(d).any() else 0.0)), None
    return max(float(np.quantile(errors, policy.quantile)), 0.0), errors


def newsvendor_instances(level: np.ndarray, margin: float, errors: np.ndarray | None, instance_units: float,
                         policy: PrescalePolicy) -> np.ndarray:
    """Capacity for ``level + margin`` in whole instances: rounded up, or one instance fewer
    where that costs less on the recent misses (demand = level + a miss): idle units at
    ``idle_cost``, units short at ``shortage_cost``. Without misses, rounded up."""
    lvl = np.nan_to_num(np.asarray(level, dtype=float), nan=0.0)
    up = whole_instances(lvl + margin, instance_units, policy.min_instances)
    if errors is None or not len(errors):
        return up
    down = up - instance_units
    e = np.sort(np.asarray(errors, dtype=float))
    total = np.concatenate([[0.0], np.cumsum(e)])

    def cost(cap: np.ndarray) -> np.ndarray:  # mean cost over the misses, from sorted sums: no steps x misses
        t = cap - lvl  # capacity above the level: misses up to t leave idle units, those past it are short
        k = np.searchsorted(e, t, side="right")
        idle = t * k - total[k]
        short = (total[-1] - total[k]) - t * (len(e) - k)
        return (policy.idle_cost * idle + policy.shortage_cost * short) / len(e)
    cheaper = (down >= policy.min_instances * instance_units - 1e-9) & (down >= 0) & (cost(down) < cost(up))
    return np.where(cheaper, down, up)


def planned_capacity(demand: np.ndarray, live_forecast: np.ndarray, policy: PrescalePolicy, step: pd.Timedelta,
                     instance_units: float, start: int = 0) -> np.ndarray:
    """Capacity the rule holds at each step of one series: ``live_forecast[t]`` is the forecast
    for step ``t`` as it stood before ``t`` (NaN where there was none). Steps before ``start``
    hold the first learnt need."""
    d, f = np.asarray(demand, dtype=float), np.asarray(live_forecast, dtype=float)
    lag, every = policy.steps("lead", step), policy.steps("refresh", step)
    pred = predicted(d, f, lag)
    cap = np.zeros(len(d))
    for s in range(start, len(d), every):
        e = min(s + every, len(d))
        margin, errors = misses_at(d, f, policy, step, s)
        cap[s:e] = newsvendor_instances(pred[s:e], margin, errors, instance_units, policy)
    if start > 0:
        cap[:start] = cap[start] if start < len(d) else 0.0
    return stabilized(cap, policy.steps("stabilization", step))


def prescale_schedule(forecast: pd.DataFrame, capacity: float, units_per_instance: float,
                      policy: PrescalePolicy = PrescalePolicy(), recent: pd.DataFrame | None = None,
                      floor: np.ndarray | None = None) -> pd.DataFrame:
    """The capacity schedule for one series over its forecast, one row per forecast step,
    starting from what runs now (units), in instances of ``units_per_instance``: the need the
    rule expects when demand follows the forecast (mean + margin), raised ``lead`` ahead and
    lowered after the stabilization window.

    ``recent`` (``ds, y``, and ``forecast`` where one was live: the series at its own
    resolution over the calibration window) sets the margin; without it the margin is
    ``DEFAULT_SHARE`` of the forecast's peak, as an 80%-target autoscaler keeps. ``floor``
    (per forecast step, NaN for none): a level the schedule does not plan below, where demand
    has just risen to it and a forecast that learnt the old level lags (the rule itself,
    which follows the demand it sees, would hold it)."""
    require_columns(forecast, ["unique_id", "ds", "mean"], "forecast")
    if forecast["unique_id"].nunique() > 1:
        raise ValueError("prescale_schedule takes one series; group the forecast by unique_id")
    if not units_per_instance > 0:
        raise ValueError("units_per_instance must be > 0")
    fc = forecast.sort_values("ds").reset_index(drop=True)
    mean = fc["mean"].to_numpy(dtype=float)
    if not np.isfinite(mean).all():
        raise ValueError(f"forecast of {fc['unique_id'].iloc[0]!r} has NaN or infinite values")
    step = pd.Timedelta(pd.Series(fc["ds"]).diff().median()) if len(fc) > 1 else pd.Timedelta("1h")
    margin, errors = DEFAULT_SHARE * float(np.clip(mean, 0, None).max()), None
    if recent is not None and len(recent) > 1:
        r = recent.sort_values("ds")
        r_step = pd.Timedelta(pd.Series(r["ds"]).diff().median())
        y = r["y"].to_numpy(dtype=float)
        live = r["forecast"].to_numpy(dtype=float) if "forecast" in r else np.full(len(r), np.nan)
        margin, errors = misses_at(y, live, policy, r_step, len(y))
    level = np.clip(mean, 0, None)
    raised = np.zeros(len(mean), dtype=bool)
    if floor is not None:
        f = np.asarray(floor, dtype=float)
        raised = np.isfinite(f) & (f > level)
        level = np.where(raised, f, level)
    need = level + margin
    own = newsvendor_instances(level, margin, errors, units_per_instance, policy)
    down = own < whole_instances(need, units_per_instance, policy.min_instances) - 1e-9
    lead = policy.steps("lead", step)
    ahead = pd.Series(own[::-1]).rolling(lead + 1, min_periods=1).max().to_numpy()[::-1]
    target = stabilized(np.concatenate([[float(capacity)], ahead]), policy.steps("stabilization", step))[1:]
    rows, current = [], float(capacity)
    for i, ts in enumerate(fc["ds"]):
        new = float(target[i])
        action = "scale_up" if new > current + 1e-9 else "scale_down" if new < current - 1e-9 else "hold"
        # the step whose need sets this one's capacity: its own, a later one's (raised lead
        # ahead of it), or none (an earlier level held through the stabilization window)
        j = next((k for k in range(i, min(i + lead + 1, len(own))) if abs(own[k] - new) < 1e-9), None)
        size = f"{new / units_per_instance:.0f} instance(s)"

        def said(k: int) -> str:  # what sets step k's level: the forecast, or the floor over it
            return (f"{level[k]:.1f} (the level demand rose to; the forecast says {mean[k]:.1f})" if raised[k]
                    else f"{mean[k]:.1f}")
        what = ["level" if r else "forecast" for r in raised]

        def rounded(k: int) -> str:  # the newsvendor's rounding down, where it took it
            return (" (rounded down: on recent misses one more instance idles at a higher cost than the "
                    "shortage it saves)" if down[k] else "")
        if j is None:
            why = (f"holds {size} until the forecast stays lower for {policy.stabilization} (here {said(i)} "
                   f"+ {margin:.1f} needs {own[i] / units_per_instance:.0f})")
        elif j == i:
            why = f"{what[i]} {said(i)} + {margin:.1f} needs {size}{rounded(i)}"
        else:
            early = (fc["ds"][j] - ts) / pd.Timedelta(minutes=1)
            why = (f"the {what[j]} at {pd.Timestamp(fc['ds'][j]):%H:%M}, {said(j)} + {margin:.1f}, needs {size}"
                   f"{rounded(j)}, raised {early:g} min ahead of it")
        reason = (f"{why} (margin: the {policy.quantile:.0%} quantile of recent demand above its prediction); "
                  f"between forecasts the pool follows demand seen {policy.lead} late, scaling in after "
                  f"{policy.stabilization}")
        rows.append({
            "unique_id": fc["unique_id"][i], "ts": ts, "forecast_mean": float(mean[i]),
            "forecast_upper": float(need[i]), "capacity": current, "target_capacity": new,
            "instances_delta": round((new - current) / units_per_instance), "action": action, "reason": reason,
            "reactive_margin": margin,
        })
        current = new
    return pd.DataFrame(rows, columns=PRESCALE_COLUMNS)
