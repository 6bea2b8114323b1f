"""Pre-scaling schedules: capacity per pool and hour, ahead of the forecast demand.

Capacity is provisioned for the forecast's upper band (``hi_80`` by default) plus a
headroom margin, rounded up to whole instances, and raised ``lead_steps`` ahead of the
hour that needs it (instances take time to boot and join). It is lowered only when the
need falls below ``1 - hysteresis`` of what runs, so capacity does not flap.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from planner.validation import require_columns

PRESCALE_COLUMNS = [
    "unique_id", "ts", "forecast_mean", "forecast_upper", "capacity", "target_capacity",
    "instances_delta", "action", "reason",
]


@dataclass(frozen=True)
class PrescalePolicy:
    """How much margin to keep and how early to act."""

    band: str = "hi_80"  # forecast column to provision for: mean, hi_80 or hi_95
    headroom: float = 0.10  # extra share on top of the band
    lead_steps: int = 1  # raise capacity this many steps before it is needed
    hysteresis: float = 0.15  # lower capacity only when the need is this far below it ...
    down_steps: int = 3  # ... for this many steps in a row, so capacity does not flap
    min_instances: int = 1

    def __post_init__(self) -> None:
        if self.band not in ("mean", "hi_80", "hi_95"):
            raise ValueError(f"band must be mean, hi_80 or hi_95, got {self.band!r}")
        if self.headroom < 0 or not 0 <= self.hysteresis < 1 or self.lead_steps < 0 or self.down_steps < 1:
            raise ValueError("headroom >= 0, 0 <= hysteresis < 1, lead_steps >= 0 and down_steps >= 1 are required")


def prescale_schedule(forecast: pd.DataFrame, capacity: float, units_per_instance: float,
                      policy: PrescalePolicy = PrescalePolicy()) -> pd.DataFrame:
    """The schedule for one series: one row per forecast step.

    ``forecast`` is a forecast frame of one ``unique_id``; ``capacity`` is what runs now
    (units); ``units_per_instance`` the step capacity moves by.
    """
    require_columns(forecast, ["unique_id", "ds", "mean", policy.band], "forecast")
    if forecast["unique_id"].nunique() > 1:
        raise ValueError("prescale_schedule takes one series; group the forecast by unique_id")
    if units_per_instance <= 0:
        raise ValueError("units_per_instance must be > 0")
    fc = forecast.sort_values("ds").reset_index(drop=True)
    if not np.isfinite(fc[["mean", policy.band]].to_numpy(dtype=float)).all():
        raise ValueError(f"forecast of {fc['unique_id'].iloc[0]!r} has NaN or infinite values")
    upper = np.clip(fc[policy.band].to_numpy(dtype=float), 0.0, None)
    need = upper * (1.0 + policy.headroom)
    # what each step must already have: the largest need over the next lead_steps steps
    ahead = _max_ahead(need, policy.lead_steps + 1)
    target = np.maximum(np.ceil(ahead / units_per_instance - 1e-9), policy.min_instances) * units_per_instance
    # scaling down waits until the lower target holds for down_steps steps
    settled = _max_ahead(target, policy.down_steps, full=True)  # NaN: too close to the end to tell
    current = float(capacity)
    rows = []
    for i, ts in enumerate(fc["ds"]):
        want = float(target[i])
        if want > current + 1e-9:
            action = "scale_up"
            peak = i + int(np.argmax(need[i:i + policy.lead_steps + 1]))
            reason = (f"{policy.band} {upper[peak]:.1f} + {policy.headroom:.0%} headroom at "
                      f"{pd.Timestamp(fc['ds'][peak]):%Y-%m-%d %H:%M} exceeds capacity {current:g}")
        elif settled[i] < current * (1.0 - policy.hysteresis) - 1e-9:
            action, want = "scale_down", float(settled[i])
            reason = (f"need {ahead[i]:.1f} stays more than {policy.hysteresis:.0%} below capacity {current:g} "
                      f"for {policy.down_steps} steps")
        else:
            action, reason = "hold", ""
        new = want if action != "hold" else current
        rows.append({
            "unique_id": fc["unique_id"][i], "ts": ts, "forecast_mean": float(fc["mean"][i]),
            "forecast_upper": float(upper[i]), "capacity": current, "target_capacity": new,
            "instances_delta": round((new - current) / units_per_instance), "action": action,
            "reason": reason,
        })
        current = new
    return pd.DataFrame(rows, columns=PRESCALE_COLUMNS)


def _max_ahead(values: np.ndarray, width: int, full: bool = False) -> np.ndarray:
    """The largest of ``values[i : i + width]`` for each ``i``; shorter at the end, or NaN
    there when ``full``."""
    rolled = pd.Series(values[::-1]).rolling(width, min_periods=width if full else 1).max()
    return rolled.to_numpy()[::-1]
