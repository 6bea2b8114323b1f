"""Scoring burst events against labelled windows (NAB style)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

METRIC_COLUMNS = [
    "detector", "windows", "detected", "detection_rate", "false_alarms",
    "false_alarms_per_week", "median_delay_points", "p90_delay_points", "delay_from",
]

Window = tuple[pd.Timestamp, pd.Timestamp]


def score_bursts(
    detector: str,
    events: pd.DataFrame,
    windows: Mapping[str, Sequence[Window]],
    spans: Mapping[str, tuple[pd.Timestamp, pd.Timestamp, pd.Timedelta]],
    labels: Mapping[str, Sequence[pd.Timestamp]] | None = None,
) -> dict[str, object]:
    """One metrics row.

    ``spans`` maps each scored series to (first, last, step) of the scored period. A
    window counts when it overlaps that period; it is detected when an event's
    ``detected_at`` falls inside it; every event outside all windows is a false alarm.
    Delay, in points of the series, runs to a window's first detection from its labelled
    anomaly when ``labels`` has one inside the window (an alarm at or before it: 0), else
    from the window's start. NAB centres each window on its label, so from the start a
    detection right at the anomaly reads as half a window late (100 points on 5-min data).
    The row's ``delays`` lists every detected window's delay (for pooling).
    """
    n_windows = detected = false_alarms = 0
    delays: list[float] = []
    refs: set[str] = set()
    weeks = 0.0
    for uid, (first, last, step) in spans.items():
        weeks += (last - first + step) / pd.Timedelta(days=7)
        wins = [(pd.Timestamp(a), pd.Timestamp(b)) for a, b in windows.get(uid, [])]
        wins = [(a, b) for a, b in wins if b >= first and a <= last]
        ev = events[events["unique_id"] == uid]
        times = pd.DatetimeIndex(ev["detected_at"]).sort_values()
        times = times[(times >= first) & (times <= last)]
        inside = np.zeros(len(times), dtype=bool)
        for a, b in wins:
            n_windows += 1
            hit = (times >= a) & (times <= b)
            inside |= hit
            if hit.any():
                detected += 1
                marks = [pd.Timestamp(t) for t in (labels or {}).get(uid, []) if a <= pd.Timestamp(t) <= b]
                ref = max(min(marks), first) if marks else max(a, first)
                refs.add("label" if marks else "window_start")
                delays.append(max((times[hit][0] - ref) / step, 0.0))
        false_alarms += int((~inside).sum())
    return {
        "detector": detector,
        "windows": n_windows,
        "detected": detected,
        "detection_rate": detected / n_windows if n_windows else float("nan"),
        "false_alarms": false_alarms,
        "false_alarms_per_week": false_alarms / weeks if weeks else float("nan"),
        "median_delay_points": float(np.median(delays)) if delays else float("nan"),
        "p90_delay_points": float(np.percentile(delays, 90)) if delays else float("nan"),
        "delay_from": "+".join(sorted(refs)) or ("label" if labels else "window_start"),
        "delays": delays,
    }


def thin_events(events: pd.DataFrame, cooldown: pd.Timedelta) -> pd.DataFrame:
    """Drop events within ``cooldown`` of the previous kept event of the same series: the
    CUSUM's own cooldown, applied to the baselines so the comparison is like for like."""
    if cooldown <= pd.Timedelta(0) or events.empty:
        return events
    keep = []
    for _uid, g in events.sort_values(["unique_id", "detected_at"]).groupby("unique_id", sort=False):
        last = None
        for idx, t in zip(g.index, g["detected_at"]):
            if last is None or t - last > cooldown:
                keep.append(idx)
                last = t
    return events.loc[keep].sort_values(["unique_id", "detected_at"]).reset_index(drop=True)
