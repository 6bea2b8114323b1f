"""Capacity at the data's own resolution, step by step: what a reactive autoscaler holds,
what headroom's predictive + reactive rule holds, and what either costs on the demand that came.

Arrays are one series on a regular grid; index ``t`` is the step capacity serves. Every rule
is causal: capacity at ``t`` is set from demand up to ``t - lag`` (what a metric pipeline
has reported by then) and from forecasts made before it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

SCORE_COLUMNS = ["cost", "avg_utilization", "underprovisioned_pct", "unit_hours_short", "idle_unit_hours",
                 "scale_actions"]


@dataclass(frozen=True)
class ReactivePolicy:
    """A target-tracking autoscaler (Kubernetes' HPA, AWS target tracking): it holds capacity
    at ``demand / target_utilization``, scales out ``lag_steps`` after demand rose and scales
    in only once the lower capacity has held for ``stabilization_steps``."""

    target_utilization: float = 0.8
    lag_steps: int = 1
    stabilization_steps: int = 6

    def __post_init__(self) -> None:
        if not 0 < self.target_utilization <= 1 or self.lag_steps < 1 or self.stabilization_steps < 1:
            raise ValueError("0 < target_utilization <= 1, lag_steps >= 1 and stabilization_steps >= 1 are required")


def whole_instances(units: np.ndarray, instance_units: float, min_instances: int = 1) -> np.ndarray:
    """``units`` rounded up to whole instances of ``instance_units`` (at least ``min_instances``)."""
    if not instance_units > 0:
        raise ValueError(f"instance_units must be > 0, got {instance_units}")
    n = np.ceil(np.nan_to_num(units, nan=0.0) / instance_units - 1e-9)
    return np.maximum(n, min_instances) * instance_units


def delayed(values: np.ndarray, lag: int, fill: float = np.nan) -> np.ndarray:
    """``values`` seen ``lag`` steps late: ``out[t] = values[t - lag]``."""
    out = np.full(len(values), fill, dtype=float)
    if lag < len(values):
        out[lag:] = values[: len(values) - lag]
    return out


def stabilized(recommended: np.ndarray, window: int) -> np.ndarray:
    """The largest recommendation of the last ``window`` steps: scale-out at once, scale-in
    only after the lower recommendation held for the whole window."""
    s = pd.Series(recommended)
    return s.rolling(window, min_periods=1).max().to_numpy()


def reactive_capacity(demand: np.ndarray, policy: ReactivePolicy, instance_units: float,
                      min_instances: int = 1) -> np.ndarray:
    """A reactive autoscaler's capacity per step; before it has seen any demand it holds the
    first step's recommendation."""
    rec = whole_instances(np.asarray(demand, dtype=float) / policy.target_utilization, instance_units, min_instances)
    seen = delayed(rec, policy.lag_steps, fill=rec[0] if len(rec) else 0.0)
    return stabilized(seen, policy.stabilization_steps)


def score(capacity: np.ndarray, demand: np.ndarray, step_hours: float) -> dict[str, float]:
    """What holding ``capacity`` cost on ``demand``, in unit-hours, and how often it fell short."""
    c, d = np.asarray(capacity, dtype=float), np.asarray(demand, dtype=float)
    if c.shape != d.shape:
        raise ValueError(f"capacity and demand differ in length: {c.shape} vs {d.shape}")
    short = np.clip(d - c, 0.0, None)
    total = float(c.sum() * step_hours)
    return {
        "cost": total,
        "avg_utilization": float(np.minimum(c, d).sum() * step_hours / total) if total > 0 else float("nan"),
        "underprovisioned_pct": float(100.0 * (short > 1e-9).mean()) if len(d) else float("nan"),
        "unit_hours_short": float(short.sum() * step_hours),
        "idle_unit_hours": float(np.clip(c - d, 0.0, None).sum() * step_hours),
        "scale_actions": int((np.abs(np.diff(c)) > 1e-9).sum()),
    }
