"""Baselines: seasonal naive, and MSTL + ETS (statsforecast's MSTL model)."""
from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from forecasters.base import BaseForecaster, Context, series_arrays
from forecasters.registry import register
from forecasters.validation import HistoryError, default_seasons

log = logging.getLogger(__name__)


@register
class SeasonalNaive(BaseForecaster):
    """Repeat the last observed season."""

    name = "seasonal_naive"
    forecasts_any_series = True  # from each context alone

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
    """MSTL + ETS, as statsforecast's ``MSTL`` model: each context is split by MSTL into its
    seasons (daily and weekly for hourly data, see ``default_seasons``) and the rest, an ETS
    model without a season (AutoETS ``ZZN``: additive or multiplicative error, no, additive
    or damped trend, chosen by AICc) forecasts the seasonally adjusted rest, and each season
    adds its last cycle. The ETS model and its parameters are chosen at fit, on each series'
    last ``window_cycles`` cycles of its longest season; a forecast re-runs MSTL and the ETS
    states over the same span of its own context (statsforecast's ``forward``), so any origin,
    and any new history, is forecast without a refit. M4 Hourly dev split (the training part's
    last 48 points held out): OWA 0.575 (statsforecast's own MSTL 0.575; seasonal naive 0.629,
    the old daily Holt-Winters 0.829); a context of 4 weeks instead of 6 gave 0.582, 3 weeks 0.608.
    """

    name = "ets"
    # each forecast re-runs MSTL (about 0.1 s for 6 weeks of hourly data): 24 origins a series,
    # spread over the stretch, rather than 168 (6 series x 60 days: 330 s -> see the commit)
    max_calibration_origins = 24

    def __init__(
        self,
        horizon: int = 24,
        freq: str | None = "h",
        season_length: int = 24,
        calibration_origins: int = 336,
        window_cycles: int = 6,
    ) -> None:
        self.horizon = horizon
        self.freq = freq
        self.season_length = season_length
        self.calibration_origins = calibration_origins
        self.window_cycles = window_cycles

    def _seasons(self) -> tuple[int, ...]:
        return tuple(p for p in default_seasons(self.freq, self.season_length) if p >= 2)

    def _context_length(self) -> int:
        # without a season, as many points as six days of hourly data would give
        return self.window_cycles * max(self._seasons(), default=8)

    def _min_length(self) -> int:
        # two cycles of the shortest season: the least STL decomposes (a season of one step:
        # as many points as the old damped trend read)
        return 2 * min(self._seasons(), default=24)

    def _fit_points(self, frame: pd.DataFrame) -> None:
        from statsforecast.models import AutoETS

        uids, ys, _ = series_arrays(frame)
        length = self._context_length()
        models: dict[str, object] = {}
        fewer = []
        for uid, y in zip(uids, ys):
            tail = y[-length:]
            periods = mstl_periods(self._seasons(), len(tail))
            if len(periods) < len(self._seasons()):
                fewer.append(str(uid))
            models[str(uid)] = AutoETS(model="ZZN").fit(seasonally_adjusted(tail, periods)[0])
        if fewer:
            # the copy that calibrates the intervals fits on less history: said only with -v
            copy = getattr(self, "_calibrating", False)
            (log.info if copy else log.warning)(
                "ets%s: %d series (%s) are shorter than two cycles of season(s) %s: fit on fewer seasons",
                " (the copy that calibrates the intervals)" if copy else "", len(fewer),
                ", ".join(fewer[:3]) + (", ..." if len(fewer) > 3 else ""),
                [p for p in self._seasons() if p not in mstl_periods(self._seasons(), min(map(len, ys)))])
        self.models_ = models

    def _calibration_copy(self) -> ETS:
        copy = self.clone()
        copy._calibrating = True
        return copy

    def _predict_points(self, ctx: Context, h: int) -> np.ndarray:
        out = np.empty((len(ctx.uids), h))
        for i, (uid, row) in enumerate(zip(ctx.uids, ctx.values)):
            y = row[~np.isnan(row)]  # a short series' context is NaN-padded on the left
            if len(y) < self._min_length():
                raise HistoryError(f"ets needs {self._min_length()} points of context per series, "
                                   f"series {uid!r} has {len(y)}", str(uid))
            periods = mstl_periods(self._seasons(), len(y))
            adjusted, ahead = seasonally_adjusted(y, periods, h)
            out[i] = self.models_[str(uid)].forward(y=adjusted, h=h)["mean"] + ahead  # type: ignore[attr-defined]
        return out


def mstl_periods(seasons: tuple[int, ...], n: int) -> tuple[int, ...]:
    """The seasons MSTL can estimate on ``n`` points: those with two full cycles."""
    return tuple(p for p in seasons if n >= 2 * p)


def seasonally_adjusted(y: np.ndarray, periods: tuple[int, ...], h: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``y`` less its MSTL seasons (statsforecast's ``mstl``: statsmodels' STL per season,
    R's windows), and the seasons' sum over the next ``h`` steps, each its last cycle repeated."""
    if not periods:
        return np.asarray(y, dtype=float), np.zeros(h)
    from statsforecast.mstl import mstl

    parts = mstl(np.asarray(y, dtype=float), list(periods))
    seasonal = [parts[f"seasonal{p}"].to_numpy() if len(periods) > 1 else parts["seasonal"].to_numpy()
                for p in sorted(periods)]
    ahead = sum((s[-p:][np.arange(h) % p] for p, s in zip(sorted(periods), seasonal)), np.zeros(h))
    return y - np.sum(seasonal, axis=0), ahead
