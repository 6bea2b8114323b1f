"""Prophet per series, in a lean configuration (few changepoints, no sampling).

Built-in seasonalities are off; one Fourier seasonality per period in
``default_seasons(freq, season_length)`` is added instead, so any regular
frequency works. Integer-step series are mapped onto a fake hourly clock.
"""
from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd

from forecasters.base import BaseForecaster, Context, series_arrays
from forecasters.registry import register
from forecasters.validation import HistoryError, default_seasons, freq_offset

log = logging.getLogger(__name__)
_EPOCH = pd.Timestamp("1970-01-05")
COMPONENTS = ("yhat", "trend")
PROPHET_MIN_POINTS = 8  # Prophet's optimiser fails on 2-4 points of a trend


# prophet.plot logs an ERROR at import when plotly is absent (also when a stored model is
# unpickled); headroom never plots with it, so that line is noise
logging.getLogger("prophet.plot").setLevel(logging.CRITICAL)


def quiet_stan() -> None:
    """cmdstanpy logs two INFO lines per fit to its own handler; silence it."""
    logging.getLogger("cmdstanpy").disabled = True
    logging.getLogger("prophet").setLevel(logging.WARNING)
    # prophet.plot logs an ERROR at import when plotly is absent; we never plot with it
    logging.getLogger("prophet.plot").setLevel(logging.CRITICAL)


@dataclass(frozen=True)
class ProphetParams:
    """Prophet's hyperparameters, declared once for every model that fits Prophet."""

    n_changepoints: int = 10  # at most: a series gets one per 10 points it is fit on
    changepoint_prior_scale: float = 0.05
    max_fit_points: int = 24 * 28  # each series is fit on its last this many points
    # Fourier order of a season of s points: min(max_fourier_order, s // fourier_divisor)
    max_fourier_order: int = 10
    fourier_divisor: int = 4


@dataclass(frozen=True, kw_only=True)
class ProphetCore:
    """Fits and evaluates one Prophet model per series; shared by prophet and prophet_lgbm."""

    freq: str | None
    season_length: int
    params: ProphetParams
    n_jobs: int

    def seasons(self) -> tuple[int, ...]:
        return default_seasons(self.freq, self.season_length)

    def fourier_order(self, s: int) -> int:
        return min(self.params.max_fourier_order, max(s // self.params.fourier_divisor, 1))

    def to_ds(self, steps: np.ndarray) -> pd.DatetimeIndex:
        """Prophet's clock for global step indices."""
        step = freq_offset(self.freq) or pd.Timedelta(hours=1)
        return pd.DatetimeIndex(_EPOCH + step * np.asarray(steps, dtype=np.int64))

    def _fit_one(self, y: np.ndarray, start: int) -> object:
        quiet_stan()
        from prophet import Prophet

        step_days = (freq_offset(self.freq) or pd.Timedelta(hours=1)) / pd.Timedelta(days=1)
        model = Prophet(
            n_changepoints=min(self.params.n_changepoints, max(len(y) // 10, 0)),
            changepoint_prior_scale=self.params.changepoint_prior_scale,
            uncertainty_samples=0,
            daily_seasonality=False, weekly_seasonality=False, yearly_seasonality=False,
        )
        for s in self.seasons():
            if len(y) >= 2 * s:
                model.add_seasonality(name=f"s{s}", period=s * step_days, fourier_order=self.fourier_order(s))
        try:
            model.fit(pd.DataFrame({"ds": self.to_ds(start + np.arange(len(y))), "y": y}))
        except RuntimeError as exc:  # cmdstan's optimiser failed: say which series, not its console log
            raise HistoryError(f"prophet could not fit a series of {len(y)} points (its optimiser failed: "
                               f"{str(exc).splitlines()[0][:120]}); give it more history") from exc
        # prediction reads model.params only; the optimiser's run record holds temporary file
        # names and times, so keeping it would make every refit's artifact differ (and larger)
        model.stan_fit = None
        model.stan_backend = None
        # its changepoints pickle with dtype objects shared or not depending on the fit's
        # history, so a refit on the same data pickled differently: rebuilt from plain arrays,
        # a refit's artifact is bit-identical (and the registry keeps its row)
        cp = model.changepoints
        model.changepoints = pd.Series(np.array(cp.to_numpy(), dtype="datetime64[ns]"),
                                       index=np.array(cp.index, dtype=np.int64), name=cp.name)
        return model

    def fit(self, frame: pd.DataFrame) -> dict[str, object]:
        """One fitted Prophet per series, fitted on its last ``max_fit_points`` points."""
        uids, ys, starts = series_arrays(frame)
        keep = self.params.max_fit_points
        tails = [(y[-keep:], int(s) + max(len(y) - keep, 0)) for y, s in zip(ys, starts)]
        def fit_named(uid: str, tail: tuple[np.ndarray, int]) -> object:
            try:
                return self._fit_one(*tail)
            except HistoryError as exc:
                raise HistoryError(f"series {uid!r}: {exc}", uid) from exc

        if self.n_jobs > 1 and len(tails) > 1:
            # cmdstan runs in a subprocess, so threads overlap the optimiser runs
            with ThreadPoolExecutor(self.n_jobs) as pool:
                fitted = list(pool.map(fit_named, map(str, uids), tails))
        else:
            fitted = [fit_named(str(u), t) for u, t in zip(uids, tails)]
        return dict(zip(uids.tolist(), fitted))

    def components(self, model: object, steps: np.ndarray) -> pd.DataFrame:
        """Prophet's yhat and trend at the given step indices."""
        out = model.predict(pd.DataFrame({"ds": self.to_ds(steps)}))  # type: ignore[attr-defined]
        return out[list(COMPONENTS)].reset_index(drop=True)

    def curve(self, models: dict[str, object], uids: np.ndarray, steps: np.ndarray, column: str = "yhat") -> np.ndarray:
        """A Prophet component at a (rows, k) matrix of step indices, row i from series uids[i]."""
        out = np.empty(steps.shape)
        for uid in np.unique(uids):
            rows = np.flatnonzero(uids == uid)
            need = np.unique(steps[rows])
            comp = self.components(models[str(uid)], need)[column].to_numpy()
            out[rows] = comp[np.searchsorted(need, steps[rows])]
        return out

    def forecast(self, models: dict[str, object], ctx: Context, h: int) -> np.ndarray:
        """(rows, h) of yhat for the ``h`` steps after each context's end."""
        return self.curve(models, ctx.uids, ctx.end[:, None] + np.arange(1, h + 1)[None, :])


@register
class ProphetForecaster(BaseForecaster):
    """Prophet alone, one model per series."""

    name = "prophet"
    # its forecast never reads the data after its fit: seven copies, each fit before its block of
    # origins, keep a calibration error's lead within two days of its step (one copy: up to two
    # weeks, intervals too wide); fourteen measured no better than seven
    calibration_refits = 7

    def __init__(
        self,
        horizon: int = 24,
        freq: str | None = "h",
        season_length: int = 24,
        calibration_origins: int = 336,
        # a stiffer trend than the hybrid's: alone, Prophet extrapolates its last trend segment
        # over the whole horizon (M4 Hourly dev split, point OWA: prior 0.05 0.735, 0.01 0.711,
        # 0.003 0.703; seasonal naive 0.629), and near-full Fourier orders (daily 12, weekly 80,
        # i.e. an hour-of-week profile; were 6 and 10): 0.626. Weekly 20: 0.685, 40: 0.655
        prophet: ProphetParams = ProphetParams(changepoint_prior_scale=0.003, max_fourier_order=80,
                                               fourier_divisor=2),
        n_jobs: int = 2,
    ) -> None:
        self.horizon = horizon
        self.freq = freq
        self.season_length = season_length
        self.calibration_origins = calibration_origins
        self.prophet = prophet
        self.n_jobs = n_jobs

    def _core(self) -> ProphetCore:
        return ProphetCore(freq=self.freq, season_length=self.season_length, params=self.prophet, n_jobs=self.n_jobs)

    def _min_length(self) -> int:
        return max(2 * self.season_length, PROPHET_MIN_POINTS)

    def _context_length(self) -> int:
        return 1

    def _fit_points(self, frame: pd.DataFrame) -> None:
        self.models_ = self._core().fit(frame)

    def _predict_points(self, ctx: Context, h: int) -> np.ndarray:
        return self._core().forecast(self.models_, ctx, h)
