"""Decisions replayed on history: every strategy's capacity over one span of one series, scored
on the same demand at the data's own resolution.

The strategies are what users run without headroom (static peak provisioning, reactive
autoscalers at several target utilizations and lags), headroom's predictive + reactive rule
(:func:`planner.prescale.planned_capacity`, the rule ``headroom plan`` schedules), and the
oracle that holds exactly the demand. Pure: arrays in, a table out.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from planner.prescale import PrescalePolicy, planned_capacity
from planner.scaling import SCORE_COLUMNS, ReactivePolicy, reactive_capacity, score, whole_instances

REPLAY_COLUMNS = ["strategy", "cost", "cost_vs_oracle", *SCORE_COLUMNS[1:]]
REACTIVE_TARGETS = (0.8, 0.7, 0.6, 0.5)
STATIC_MARGIN = 0.15  # static provisioning: the peak before the span plus this share
LATE = pd.Timedelta("30min")  # reactive_80_30m: the same autoscaler acting this late


@dataclass(frozen=True)
class ReplaySpan:
    """One series at its own resolution and the span ``[start, len)`` that is scored. Steps
    with no reading (NaN demand) are not scored; the rules hold what they last saw through them."""

    demand: np.ndarray
    live_forecast: np.ndarray  # the forecast for each step as it stood before it (NaN: none)
    step: pd.Timedelta
    start: int
    instance_units: float

    def __post_init__(self) -> None:
        if len(self.demand) != len(self.live_forecast):
            raise ValueError("demand and live_forecast differ in length")
        if not 0 < self.start < len(self.demand):
            raise ValueError(f"start {self.start} must leave history before it and steps after it")
        if not self.instance_units > 0:
            raise ValueError(f"instance size must be > 0, got {self.instance_units}")


def capacities(span: ReplaySpan, policy: PrescalePolicy) -> dict[str, np.ndarray]:
    """Each strategy's capacity over the whole series (score only ``span.start`` on)."""
    d, u = pd.Series(span.demand, dtype=float).ffill().bfill().to_numpy(), span.instance_units
    lag = policy.steps("lead", span.step)
    wait = policy.steps("stabilization", span.step)
    out = {"oracle": np.asarray(span.demand, dtype=float)}
    peak = float(np.nanmax(d[: span.start]))
    out["static_peak"] = np.full(len(d), whole_instances(np.array([peak * (1 + STATIC_MARGIN)]), u)[0])
    for target in REACTIVE_TARGETS:
        out[f"reactive_{round(target * 100)}"] = reactive_capacity(d, ReactivePolicy(target, lag, wait), u)
    late = max(int(round(LATE / span.step)), lag)
    out["reactive_80_30m"] = reactive_capacity(d, ReactivePolicy(0.8, late, wait), u)
    out["planned"] = planned_capacity(d, span.live_forecast, policy, span.step, u, start=span.start)
    return out


def replay_table(span: ReplaySpan, policy: PrescalePolicy, unit_price: float | None = None
                 ) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """The scores of every strategy on the span (one row each, ``REPLAY_COLUMNS``, and
    ``cost_usd`` when a price per unit-hour is known) and their capacities on it."""
    hours = span.step / pd.Timedelta(hours=1)
    d = span.demand[span.start:]
    seen = np.isfinite(d)
    caps = {k: v[span.start:] for k, v in capacities(span, policy).items()}
    rows = [{"strategy": k, **score(c[seen], d[seen], hours)} for k, c in caps.items()]
    table = pd.DataFrame(rows)
    oracle = float(table.loc[table["strategy"] == "oracle", "cost"].iloc[0])
    table["cost_vs_oracle"] = table["cost"] / oracle if oracle > 0 else np.nan
    if unit_price is not None:
        table["cost_usd"] = table["cost"] * unit_price
    return table[[*REPLAY_COLUMNS, *(["cost_usd"] if unit_price is not None else [])]], caps


def frontier_verdict(table: pd.DataFrame, strategy: str = "planned") -> list[str]:
    """The reactive strategies that are no dearer and no more under-provisioned than
    ``strategy`` (empty: it is beyond the reactive frontier)."""
    me = table.set_index("strategy").loc[strategy]
    rivals = table[table["strategy"].str.startswith("reactive_")]
    worse = rivals[(rivals["cost"] <= me["cost"] + 1e-9) &
                   (rivals["underprovisioned_pct"] <= me["underprovisioned_pct"] + 1e-9)]
    return worse["strategy"].tolist()
