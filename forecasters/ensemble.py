"""ensemble: a weighted combination of fitted member models, the weights chosen by backtest.

Each member is fit on the history minus its last ``horizon`` points of every series and
forecasts them; its weight is the inverse of its mean scaled error there (``weights =
"inverse_error"``; ``"mean"``: equal weights), and a member more than ``drop_ratio`` times
worse than the best gets none. The members are then refit on all of the history. The
ensemble's intervals are its own: the base class calibrates them on the combined forecast's
errors, as for any model.
"""
from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from forecasters.base import BaseForecaster, Context, series_arrays, windows_at
from forecasters.registry import create, register

log = logging.getLogger(__name__)
WEIGHTINGS = ("inverse_error", "mean")


@register
class EnsembleForecaster(BaseForecaster):
    """Members (comma-separated registered names) combined by backtest weights."""

    name = "ensemble"

    def __init__(
        self,
        horizon: int = 24,
        freq: str | None = "h",
        season_length: int = 24,
        calibration_origins: int = 336,
        members: str = "lgbm,ets",
        weights: str = "inverse_error",
        drop_ratio: float = 1.5,
        seed: int = 0,
    ) -> None:
        self.horizon = horizon
        self.freq = freq
        self.season_length = season_length
        self.calibration_origins = calibration_origins
        self.members = members
        self.weights = weights
        self.drop_ratio = drop_ratio
        self.seed = seed

    def _names(self) -> list[str]:
        names = [n.strip() for n in str(self.members).split(",") if n.strip()]
        if not names or "ensemble" in names:
            raise ValueError(f"ensemble: members must name other registered models, got {self.members!r}")
        if self.weights not in WEIGHTINGS:
            raise ValueError(f"ensemble: weights must be one of {', '.join(WEIGHTINGS)}, not {self.weights!r}")
        return names

    def _models(self) -> list[BaseForecaster]:
        return [create(n, horizon=self.horizon, freq=self.freq, season_length=self.season_length, seed=self.seed)
                for n in self._names()]

    def _min_length(self) -> int:
        # the members' own need, and a horizon more for the backtest that sets the weights
        return max(m._min_length() for m in self._models()) + self.horizon

    def _context_length(self) -> int:
        return max(m._context_length() for m in self._models())

    @staticmethod
    def _member_points(model: BaseForecaster, ctx: Context, h: int) -> np.ndarray:
        width = model._context_length()
        return model._predict_points(Context(ctx.uids, ctx.values[:, -width:], ctx.end), h)

    def _backtest_weights(self, frame: pd.DataFrame, models: list[BaseForecaster]) -> np.ndarray:
        """Each member's weight from its forecast of every series' last ``horizon`` points."""
        if self.weights == "mean" or len(models) == 1:
            return np.full(len(models), 1.0 / len(models))
        h = self.horizon
        from_end = frame.groupby("unique_id", sort=False).cumcount(ascending=False).to_numpy()
        head = frame.loc[from_end >= h].reset_index(drop=True)
        uids, ys, starts = series_arrays(frame)
        width = self._context_length()
        ctx = Context(uids, np.vstack([windows_at(y, width, [len(y) - h]) for y in ys]),
                      np.array([s + len(y) - h - 1 for y, s in zip(ys, starts)]))
        truth = np.vstack([y[-h:] for y in ys])
        scale = np.array([max(float(np.mean(np.abs(y[:-h]))), 1e-9) for y in ys])[:, None]
        errors = []
        for model in models:
            probe = model.clone()
            probe._fit_points(head)
            errors.append(float(np.mean(np.abs(truth - self._member_points(probe, ctx, h)) / scale)))
        err = np.maximum(np.array(errors), 1e-12)
        inv = np.where(err <= self.drop_ratio * err.min(), 1.0 / err, 0.0)
        return inv / inv.sum()

    def _fit_points(self, frame: pd.DataFrame) -> None:
        models = self._models()
        self.weights_ = self._backtest_weights(frame, models)
        kept = []
        for model, w in zip(models, self.weights_):
            if w > 0:
                # a member validates as it would fitted alone on the ensemble's calibration stretch
                model._calibration_span_ = getattr(self, "_calibration_span_", None)
                model._fit_points(frame)
                model.__dict__.pop("probe_", None)  # no calibration copy of a member takes it
                kept.append(model)
        self.members_ = kept
        self.member_weights_ = {m.name: float(w) for m, w in zip(models, self.weights_)}
        log.info("ensemble: weights %s", {k: round(v, 3) for k, v in self.member_weights_.items()})

    def _predict_points(self, ctx: Context, h: int) -> np.ndarray:
        weights = [w for w in self.weights_ if w > 0]
        return sum(w * self._member_points(m, ctx, h) for m, w in zip(self.members_, weights))
