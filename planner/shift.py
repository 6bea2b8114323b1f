"""Level shifts in a pool's recent demand: a month priced on four weeks of history is wrong
the day after the pool's load collapsed or tripled, and a commitment sized on them more so.

A shift is a run of the last whole days whose daily medians all stand ``SHIFT_RATIO`` (2)
times above every one of the whole week before them, or as far below, for at least 3 days,
or 3 times for 2 days (one odd day is not a new level; a two-day holiday at half the load is
not one either). Daily medians keep the day's tide out of it; comparing with each day of a
whole week (weekend days included) keeps a quiet weekend from reading as a collapse. A rise
needs load on every day of that week: a pool idle between jobs that runs one has no level
to shift from. A shift smaller than the weekly swing is not told from it. Pure.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

SHIFT_RATIO = 2.0  # a shift moves every recent day's median at least this far from every day before it
SHIFT_DAYS = 21  # how far back a shift is looked for (a week before it still in a 28-day lookback)
MIN_SHIFT_DAYS = 3  # days at the new level, or MIN_SHIFT_DAYS_LARGE for a move of LARGE_RATIO
MIN_SHIFT_DAYS_LARGE, LARGE_RATIO = 2, 3.0
BEFORE_DAYS = 7  # the whole week before the shift it is measured against (every day of it read)
MIN_DAY_READINGS = 12  # hours a day needs to have a median


@dataclass(frozen=True)
class LevelShift:
    """Demand moved ``days`` whole days before the series' last reading, from a median daily
    level ``before`` to ``after``; the readings after ``cut`` are at the new level."""

    days: int
    before: float
    after: float
    cut: pd.Timestamp

    def change(self) -> str:
        way = "rose" if self.after > self.before else "fell"
        return f"demand {way} from {self.before:.1f} to {self.after:.1f} (daily medians)"

    def text(self) -> str:
        return f"{self.change()} {self.days} day(s) ago"


def daily_medians(ds: pd.Series, y: np.ndarray) -> np.ndarray:
    """Median of each whole day counted back from the last reading (index 0 the oldest, NaN
    for a day with fewer than ``MIN_DAY_READINGS`` readings)."""
    ts = pd.to_datetime(pd.Series(ds)).reset_index(drop=True)
    v = np.asarray(y, dtype=float)
    ok = np.isfinite(v)
    if not ok.any():
        return np.array([])
    back = ((ts.iloc[-1] - ts) // pd.Timedelta(days=1)).to_numpy(dtype=np.int64)
    n = int(back.max()) + 1
    med = np.full(n, np.nan)
    frame = pd.DataFrame({"back": back[ok], "y": v[ok]})
    stats = frame.groupby("back")["y"].agg(["median", "size"])
    full = stats[stats["size"] >= MIN_DAY_READINGS]
    med[full.index.to_numpy(dtype=np.int64)] = full["median"].to_numpy(dtype=float)
    return med[::-1]


def level_shift(ds: pd.Series, y: np.ndarray, ratio: float = SHIFT_RATIO, max_days: int = SHIFT_DAYS
                ) -> LevelShift | None:
    """The most recent level shift of hourly (or finer) demand ``y`` at ``ds`` (sorted), or None:
    of the runs of last days that qualify, the shortest (a pool that rose twice is at its
    second level)."""
    med = daily_medians(ds, y)
    for days in range(MIN_SHIFT_DAYS_LARGE, max_days + 1):
        seg = med[len(med) - days:]
        pre = med[max(len(med) - days - BEFORE_DAYS, 0):len(med) - days]
        if len(pre) < BEFORE_DAYS:
            break
        pre = pre[np.isfinite(pre)]
        if len(pre) < BEFORE_DAYS - 1 or not np.isfinite(seg).all():  # a day of the week unread may pass; two not
            continue
        moved = (seg.min() / pre.max() if pre.min() > 0 and seg.min() > pre.max() else  # up, from a level
                 pre.min() / seg.max() if seg.max() > 0 and pre.min() > seg.max() else
                 ratio if seg.max() == 0 and pre.min() > 0 else 0.0)  # down to nothing: 3 days (a holiday idles 2)
        needed = ratio * LARGE_RATIO / SHIFT_RATIO if days < MIN_SHIFT_DAYS else ratio
        if moved >= needed:
            last = pd.Timestamp(pd.to_datetime(pd.Series(ds)).iloc[-1])
            return LevelShift(days, float(np.median(pre)), float(np.median(seg)), last - pd.Timedelta(days=days))
    return None


def hourly_level(ds: pd.Series, y: np.ndarray, cut: pd.Timestamp) -> pd.Series:
    """The median demand at each hour of the day over the readings after ``cut`` (index:
    hour 0-23; hours with no reading are absent)."""
    ts = pd.to_datetime(pd.Series(ds)).reset_index(drop=True)
    v = pd.Series(np.asarray(y, dtype=float))
    keep = (ts > cut) & v.notna()
    return v[keep].groupby(ts[keep].dt.hour).median()


TREND_DAYS = 16  # whole days a trend is judged on, at least (with 14 or 15 no run of pairs reaches TREND_P)
TREND_P = 0.01  # Kendall's tau test of the daily medians against time
TREND_TAU = 0.8  # and a strong one: nine in ten pairs of days in order (a noisy flat pool reached 0.71)
TREND_MOVE = 1.1  # and one that moved the level: the last week 10% off the window's
RECENT_DAYS = 7  # the level a trend is said to have reached: its last week's


@dataclass(frozen=True)
class Trend:
    """Demand that rose or fell steadily: the daily medians' Kendall tau against time, the
    window's median daily level and the last week's, and ``factor`` = recent / window."""

    tau: float
    window: float
    recent: float

    @property
    def factor(self) -> float:
        return self.recent / self.window

    def text(self) -> str:
        way = "rose" if self.tau > 0 else "fell"
        return (f"demand {way} steadily: the last {RECENT_DAYS} days' level {self.recent:.1f} against "
                f"{self.window:.1f} over the window (daily medians)")


def trend(ds: pd.Series, y: np.ndarray) -> Trend | None:
    """A steady rise or fall of the daily medians over the window (at least ``TREND_DAYS``
    whole days), or None. The test is the seasonal Mann-Kendall (Hirsch): each weekday's
    medians against the same weekday's in later weeks, so a weekly tide is no trend, nor a
    holiday dip; the rise must be strong (``TREND_TAU`` of the pairs in order, net),
    significant (``TREND_P``) and have moved the last week's level ``TREND_MOVE`` off the
    window's. A pool shrinking 2% a day reserved machines it would not use."""
    from scipy.stats import norm

    med = daily_medians(ds, y)
    if np.isfinite(med).sum() < TREND_DAYS:
        return None
    s = var = pairs = 0.0
    for weekday in range(7):  # days counted back from the last: the same weekday every 7
        x = med[len(med) - 1 - weekday::-7][::-1]
        x = x[np.isfinite(x)]
        n = len(x)
        if n < 2:
            continue
        s += float(np.sign(x[None, :] - x[:, None])[np.triu_indices(n, 1)].sum())
        var += n * (n - 1) * (2 * n + 5) / 18
        pairs += n * (n - 1) / 2
    if not var or not pairs:
        return None
    tau, p = s / pairs, 2 * norm.sf((abs(s) - 1) / np.sqrt(var))
    if abs(tau) < TREND_TAU or p >= TREND_P:
        return None
    ok = np.isfinite(med)
    window, recent = float(np.median(med[ok])), float(np.median(med[ok][-RECENT_DAYS:]))
    if not (window > 0 and recent > 0) or abs(np.log(recent / window)) < np.log(TREND_MOVE):
        return None
    return Trend(float(tau), window, recent)
