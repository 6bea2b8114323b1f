"""The one feature builder of the LightGBM family, used by fit and by predict.

Models are direct multi-horizon: a row describes the value ``k`` steps after an
origin, from the window of values up to the origin (most recent last) and ``k``.
A feature can never read past the origin. Values are divided by the window's own
scale (mean absolute value of its recent part), which lets one global model fit
series of any size and needs nothing but data up to the origin.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

EPS = 1e-9


@dataclass(frozen=True)
class FeatureSpec:
    """Which lags and seasonal statistics to build."""

    seasons: tuple[int, ...]
    short_lags: int = 6
    season_repeats: tuple[int, ...] = (7, 2)  # past cycles read per season, by position

    def repeats(self, i: int) -> int:
        return self.season_repeats[min(i, len(self.season_repeats) - 1)]

    @property
    def window(self) -> int:
        """Values each row needs."""
        need = [s * self.repeats(i) for i, s in enumerate(self.seasons)]
        return max(max(need), max(self.seasons), self.short_lags)

    @property
    def scale_window(self) -> int:
        return min(self.window, max(self.seasons))


def seasonal_block(norm: np.ndarray, k: np.ndarray, s: int, repeats: int) -> list[np.ndarray]:
    """Values at the target's phase one, two, ... cycles back (NaN when not yet known),
    and their median and mean."""
    w = norm.shape[1]
    rows = np.arange(len(norm))
    lagged = []
    for r in range(1, repeats + 1):
        # the value r cycles before the target sits r*s - k steps before the origin
        back = r * s - k
        pos = w - 1 - back
        ok = (back >= 0) & (pos >= 0)
        lagged.append(np.where(ok, norm[rows, np.clip(pos, 0, w - 1)], np.nan))
    stack = np.column_stack(lagged)
    med, mean = row_nanmedian(stack), np.full(len(stack), np.nan)
    # all-NaN rows (short history) stay NaN; computed apart because numpy warns on them,
    # and silencing warnings is not thread-safe (models fit in parallel threads)
    some = ~np.isnan(stack).all(axis=1)
    if some.any():
        mean[some] = np.nanmean(stack[some], axis=1)
    return lagged[:2] + [med, mean]


def row_nanmedian(stack: np.ndarray) -> np.ndarray:
    """``np.nanmedian(stack, axis=1)`` (NaN where a row has no value), without numpy's
    masked-array path for rows with NaN, which took a third of a 414-series fit: sorting puts
    NaN last, and the median is the mean of the middle two of each row's finite values."""
    ordered = np.sort(stack, axis=1)
    count = np.isfinite(ordered).sum(axis=1)
    rows = np.arange(len(ordered))
    lo, hi = np.maximum((count - 1) // 2, 0), np.maximum(count // 2, 0)
    med = 0.5 * (ordered[rows, np.minimum(lo, ordered.shape[1] - 1)] + ordered[rows, np.minimum(hi, ordered.shape[1] - 1)])
    return np.where(count > 0, med, np.nan)


@dataclass(frozen=True)
class WindowStats:
    """What a row's features take from its window alone, whatever the step ``k``: built once
    per window when one window is forecast for many steps (the direct forecast, calibration)."""

    scale: np.ndarray
    norm: np.ndarray
    short: list[np.ndarray]
    last: np.ndarray  # the last known value of the first season's cycle (the anchor's fallback)
    seasonal: list[list[np.ndarray]]  # per season: mean, std, max, median of its last cycle


def window_stats(y_win: np.ndarray, spec: FeatureSpec) -> WindowStats:
    """The step-independent part of :func:`build_features` for these windows."""
    with np.errstate(all="ignore"):
        scale = np.nanmean(np.abs(y_win[:, -spec.scale_window:]), axis=1)
    scale = np.where(np.isfinite(scale) & (scale > EPS), scale, 1.0)
    norm = y_win / scale[:, None]
    first = spec.seasons[0]
    last = pd.DataFrame(norm[:, -first:]).ffill(axis=1).to_numpy()[:, -1]
    seasonal = []
    for s in spec.seasons:
        part = norm[:, -s:]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            seasonal.append([np.nanmean(part, axis=1), np.nanstd(part, axis=1), np.nanmax(part, axis=1),
                             row_nanmedian(part)])
    return WindowStats(scale, norm, [norm[:, -j] for j in range(1, spec.short_lags + 1)], last, seasonal)


def build_features(
    y_win: np.ndarray,
    origin_step: np.ndarray,
    k: np.ndarray,
    spec: FeatureSpec,
    base_win: np.ndarray | None = None,
    base_target: np.ndarray | None = None,
    stats: WindowStats | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features for the value ``k`` steps after each window's last value: (X, scale, anchor).

    ``anchor`` is the robust seasonal forecast the boosters correct: the median of the
    values at the target's phase over the last cycles of the first season (the last
    value when none is known yet), in scaled units.

    ``origin_step`` is the global step index of the window's last value. With
    ``base_win``/``base_target`` (the hybrid) a base model's curve over the window and
    at the target adds the base forecast and its recent residuals. ``stats``: these windows'
    :func:`window_stats`, when the caller built them once for several steps.
    """
    k = np.asarray(k, dtype=np.int64)
    st = window_stats(y_win, spec) if stats is None else stats
    scale, norm = st.scale, st.norm
    cols: list[np.ndarray] = [k.astype(float), *st.short]
    anchor = None
    for i, s in enumerate(spec.seasons):
        block = seasonal_block(norm, k, s, spec.repeats(i))
        if anchor is None:
            anchor = np.where(np.isnan(block[2]), st.last, block[2])
        cols += block
        cols += st.seasonal[i]
        cols.append(((np.asarray(origin_step) + k) % s).astype(float))
    cols.append(np.log1p(scale))
    if base_win is not None and base_target is not None:
        resid = (y_win[:, -3:] - base_win[:, -3:]) / scale[:, None]
        cols += [base_target / scale, (base_target - base_win[:, -1]) / scale, *resid.T]
    return np.column_stack(cols).astype(np.float32), scale, np.nan_to_num(anchor)
