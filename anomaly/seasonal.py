"""The seasonal baseline that burst detectors measure residuals against.

The baseline at time t is the median of the values at the same phase in the previous
``n_seasons`` seasons (t - S, t - 2S, ...): it follows the daily tide and adapts to a
lasting level change within about ``n_seasons / 2`` seasons. It only looks back, so a
batch can be scored with the last ``S * n_seasons`` values as its only memory.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

MAD_TO_SIGMA = 1.4826


def to_grid(
    ds: pd.Series, y: pd.Series, freq: pd.Timedelta, after: pd.Timestamp | None = None
) -> tuple[pd.DatetimeIndex, np.ndarray]:
    """Place one series on a regular grid of step ``freq``; gaps become NaN.

    With ``after`` the grid continues from that timestamp (points at or before it are
    dropped: they were already processed), so a resumed run sees the same grid.
    """
    s = pd.Series(np.asarray(y, dtype=float), index=pd.DatetimeIndex(ds))
    if after is not None:
        s = s[s.index > after]
    if s.empty:
        return pd.DatetimeIndex([]), np.empty(0)
    origin = after if after is not None else s.index.min()
    steps = np.floor((s.index - origin) / freq).astype(np.int64)
    if after is not None:
        steps = np.maximum(steps, 1)
    s = s.groupby(steps).mean()
    first = 1 if after is not None else 0
    full = np.arange(first, int(s.index.max()) + 1)
    values = s.reindex(full).to_numpy(dtype=float)
    index = pd.DatetimeIndex(origin + full * freq)
    return index, values


def seasonal_baseline(
    memory: np.ndarray, values: np.ndarray, season_length: int, n_seasons: int
) -> np.ndarray:
    """Median of the same-phase values in the previous ``n_seasons`` seasons, per point.

    ``memory`` holds the ``season_length * n_seasons`` values before ``values`` (NaN when
    unknown). The result is NaN where no same-phase value is known yet.
    """
    span = season_length * n_seasons
    if len(memory) != span:
        raise ValueError(f"baseline memory must hold {span} values, got {len(memory)}")
    arr = np.concatenate([memory, values])
    n = len(values)
    lagged = np.stack(
        [arr[span - j * season_length : span - j * season_length + n] for j in range(1, n_seasons + 1)]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns are expected early on
        return np.nanmedian(lagged, axis=0)


def robust_scale(resid: np.ndarray, reference: np.ndarray | None = None) -> float:
    """MAD-based sigma of the residuals, with fallbacks so it is never zero."""
    r = resid[np.isfinite(resid)]
    if r.size == 0:
        return 1.0
    med = float(np.median(r))
    scale = MAD_TO_SIGMA * float(np.median(np.abs(r - med)))
    if scale <= 0:
        scale = 1.2533 * float(np.mean(np.abs(r - med)))  # mean absolute deviation to sigma
    if scale <= 0:
        ref = reference[np.isfinite(reference)] if reference is not None else r
        scale = 1e-6 * max(float(np.median(np.abs(ref))) if ref.size else 0.0, 1.0)
    return scale
