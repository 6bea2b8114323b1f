"""Baselines: seasonal naive and additive damped Holt-Winters ETS (statsmodels)."""
from __future__ import annotations

import logging
import warnings

import numpy as np
import pandas as pd

from forecasters.base import BaseForecaster, Context, series_arrays
from forecasters.registry import register
from forecasters.validation import HistoryError

log = logging.getLogger(__name__)


@register
class SeasonalNaive(BaseForecaster):
    """Repeat the last observed season."""

    name = "seasonal_naive"

    def __init__(
        self, horizon: int = 24, freq: str | None = "h", season_length: int = 24, calibration_origins: int = 336
    ) -> None:
        self.horizon = horizon
        self.freq = freq
        self.season_length = season_length
        self.calibration_origins = calibration_origins

    def _min_length(self) -> int:
        return self.season_length

    def _fit_points(self, frame: pd.DataFrame) -> None:
        self.n_series_ = int(frame["unique_id"].nunique())

    def _predict_points(self, ctx: Context, h: int) -> np.ndarray:
        s = self.season_length
        last = ctx.values[:, -s:]
        cols = np.arange(h) % s
        out = last[:, cols]
        # a series shorter than one season repeats its last value (documented fallback)
        fallback = pd.DataFrame(ctx.values).ffill(axis=1).to_numpy()[:, -1]
        return np.where(np.isnan(out), fallback[:, None], out)


@register
class ETS(BaseForecaster):
    """Additive damped Holt-Winters per series; smoothing parameters come from
    statsmodels, the states are re-run over the last ``window`` points of each
    context so that any origin can be forecast without refitting."""

    name = "ets"

    def __init__(
        self,
        horizon: int = 24,
        freq: str | None = "h",
        season_length: int = 24,
        calibration_origins: int = 336,
        window_seasons: int = 6,
    ) -> None:
        self.horizon = horizon
        self.freq = freq
        self.season_length = season_length
        self.calibration_origins = calibration_origins
        self.window_seasons = window_seasons

    def _context_length(self) -> int:
        # without a season (length 1) six steps are too few to settle level and trend on
        return self.window_seasons * self.season_length if self.season_length >= 2 else 48

    def _min_length(self) -> int:
        return self._context_length()

    def _fit_points(self, frame: pd.DataFrame) -> None:
        from statsmodels.tsa.holtwinters import ExponentialSmoothing

        uids, ys, _ = series_arrays(frame)
        params: dict[str, np.ndarray] = {}
        for uid, y in zip(uids, ys):
            tail = y[-max(self._context_length(), 10 * self.season_length):]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    # a season of one step is no season: a damped Holt trend (its seasonal
                    # term stays zero in _predict_points with no seasonal smoothing)
                    seasonal = self.season_length >= 2
                    res = ExponentialSmoothing(
                        tail, trend="add", damped_trend=True, seasonal="add" if seasonal else None,
                        seasonal_periods=self.season_length if seasonal else None,
                        initialization_method="heuristic" if seasonal else "estimated",
                    ).fit(use_brute=False)
                    p = res.params
                    vec = np.array([p["smoothing_level"], p["smoothing_trend"],
                                    p["smoothing_seasonal"] if seasonal else 0.0, p["damping_trend"]], dtype=float)
                except (ValueError, np.linalg.LinAlgError) as exc:
                    log.warning("ets: series %s fell back to default smoothing (%s)", uid, exc)
                    vec = np.array([0.3, 0.01, 0.1, 0.95])
            # a level that never moves cannot follow the re-run window; keep it adaptive
            params[str(uid)] = np.clip(np.nan_to_num(vec, nan=0.1), [0.01, 0.0, 0.0, 0.8], [1.0, 1.0, 1.0, 1.0])
            if self.season_length < 2:
                params[str(uid)][2] = 0.0
        self.params_ = params

    def _predict_points(self, ctx: Context, h: int) -> np.ndarray:
        m = self.season_length
        a, b, g, phi = np.vstack([self.params_[str(u)] for u in ctx.uids]).T
        y = ctx.values
        if np.isnan(y).any():
            raise HistoryError(f"ets needs {self._context_length()} points of context per series")
        # the start: the first season's mean level and the mean change to the next; with no
        # season (m = 1) the first quarter of the context stands in for a season, and the
        # level is moved to its last step, where the run starts
        first = m if m >= 2 else max(y.shape[1] // 4, 1)
        level = y[:, :first].mean(axis=1)
        trend = (y[:, first:2 * first].mean(axis=1) - level) / first
        if m < 2:
            level = level + trend * (first - 1) / 2
        season = y[:, :m] - level[:, None] if m >= 2 else np.zeros((len(y), 1))  # season[:, t % m]
        for t in range(first, y.shape[1]):
            k = t % m
            prev_l, prev_b = level, trend
            level = a * (y[:, t] - season[:, k]) + (1 - a) * (prev_l + phi * prev_b)
            trend = b * (level - prev_l) + (1 - b) * phi * prev_b
            season[:, k] = g * (y[:, t] - prev_l - phi * prev_b) + (1 - g) * season[:, k]
        n = y.shape[1]
        steps = np.arange(1, h + 1)
        damp = np.cumsum(phi[:, None] ** steps[None, :], axis=1)
        seas = season[:, (n + steps - 1) % m]
        return level[:, None] + damp * trend[:, None] + seas
