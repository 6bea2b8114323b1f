"""ensemble: a combination of fitted member models, the weights chosen by backtest for each
group of alike series.

Each member is fit on the history minus its last ``horizon`` points of every series (or each
of the last ``backtest_windows`` horizons in turn) and forecasts them. The series fall into
``groups`` groups by how regular they are: the mean absolute seasonal difference over their
last week of seasons, relative to their level there; the group edges are quantiles over the
series. In each group a member's weight is the inverse of its mean scaled error there
(``weights="inverse_error"``; ``"mean"``: equal weights), and a member more than
``drop_ratio`` times worse than the group's best gets none: at the default of 1.0 each group
takes its best member. A group holds at least ``MIN_GROUP_SERIES`` series, so a small panel
has fewer groups (below 40 series, one). A series' group at a forecast comes from its
context then, as in the backtest. The members are then refit on all of the history. The
ensemble's intervals are its own: the base class calibrates them on the combined forecast's
errors, as for any model.

On M4 Hourly's dev split, ``lgbm`` with ``seasonal_naive`` in 8 groups gives OWA 0.457
(``lgbm`` alone 0.475): the most regular series, where seasonal naive is near exact, go to it.
"""
from __future__ import annotations

import logging
import warnings

import numpy as np
import pandas as pd

from forecasters.base import LOCAL_SEASONS, BaseForecaster, Context, series_arrays, windows_at
from forecasters.registry import create, register

log = logging.getLogger(__name__)
WEIGHTINGS = ("inverse_error", "mean")
# the fewest series whose backtest errors choose a group's weights: a group of a handful
# would follow the noise of one window
MIN_GROUP_SERIES = 20


@register
class EnsembleForecaster(BaseForecaster):
    """Members (comma-separated registered names) combined by backtest weights per series group."""

    name = "ensemble"
    # artifacts from before groups had one set of weights, from one window
    legacy_params = {"groups": 1, "backtest_windows": 1}

    def __init__(
        self,
        horizon: int = 24,
        freq: str | None = "h",
        season_length: int = 24,
        calibration_origins: int = 336,
        members: str = "lgbm,seasonal_naive",
        weights: str = "inverse_error",
        drop_ratio: float = 1.0,
        groups: int = 8,
        backtest_windows: int = 1,
        seed: int = 0,
    ) -> None:
        self.horizon = horizon
        self.freq = freq
        self.season_length = season_length
        self.calibration_origins = calibration_origins
        self.members = members
        self.weights = weights
        self.drop_ratio = drop_ratio
        self.groups = groups
        self.backtest_windows = backtest_windows
        self.seed = seed

    def _names(self) -> list[str]:
        names = [n.strip() for n in str(self.members).split(",") if n.strip()]
        if not names or "ensemble" in names:
            raise ValueError(f"ensemble: members must name other registered models, got {self.members!r}")
        if self.weights not in WEIGHTINGS:
            raise ValueError(f"ensemble: weights must be one of {', '.join(WEIGHTINGS)}, not {self.weights!r}")
        for what in ("groups", "backtest_windows"):
            if int(getattr(self, what)) < 1:
                raise ValueError(f"ensemble: {what} must be at least 1, not {getattr(self, what)!r}")
        return names

    def _models(self) -> list[BaseForecaster]:
        return [create(n, horizon=self.horizon, freq=self.freq, season_length=self.season_length, seed=self.seed)
                for n in self._names()]

    def _min_length(self) -> int:
        # the members' own need, and the horizons of the backtest that sets the weights
        return max(m._min_length() for m in self._models()) + int(self.backtest_windows) * self.horizon

    def _context_length(self) -> int:
        # the members' windows, and the week of seasons (and one before) the grouping reads
        return max(max(m._context_length() for m in self._models()), (LOCAL_SEASONS + 1) * self._season())

    def _season(self) -> int:
        return max(int(self.season_length or 1), 1)

    def _regularity(self, values: np.ndarray) -> np.ndarray:
        """Each context row's mean absolute seasonal difference over its last week of
        seasons, relative to its mean absolute level there (NaN values ignored)."""
        s = self._season()
        tail = values[:, -(LOCAL_SEASONS + 1) * s:]
        with warnings.catch_warnings():  # an all-NaN row (a short context) is NaN, said below
            warnings.simplefilter("ignore", RuntimeWarning)
            diff = np.nanmean(np.abs(tail[:, s:] - tail[:, :-s]), axis=1)
            level = np.nanmean(np.abs(tail[:, s:]), axis=1)
        return diff / np.maximum(level, 1e-9)

    def _group_of(self, values: np.ndarray) -> np.ndarray:
        edges = getattr(self, "edges_", np.empty(0))
        r = self._regularity(values)
        # a context too short to tell joins the middle group
        r = np.where(np.isfinite(r), r, np.median(edges) if len(edges) else 0.0)
        return np.searchsorted(edges, r)

    @staticmethod
    def _member_points(model: BaseForecaster, ctx: Context, h: int) -> np.ndarray:
        width = model._context_length()
        return model._predict_points(Context(ctx.uids, ctx.values[:, -width:], ctx.end), h)

    def _inverse(self, err: np.ndarray) -> np.ndarray:
        err = np.maximum(err, 1e-12)
        inv = np.where(err <= self.drop_ratio * err.min(), 1.0 / err, 0.0)
        return inv / inv.sum()

    def _backtest_weights(self, frame: pd.DataFrame, models: list[BaseForecaster]) -> np.ndarray:
        """Weights (group x member) from each member's forecasts of every series' last
        ``backtest_windows`` horizons, each by a fit on the data before it; sets the group edges."""
        self.edges_ = np.empty(0)
        if self.weights == "mean" or len(models) == 1:
            return np.full((1, len(models)), 1.0 / len(models))
        h = self.horizon
        from_end = frame.groupby("unique_id", sort=False).cumcount(ascending=False).to_numpy()
        uids, ys, starts = series_arrays(frame)
        width = self._context_length()
        errors = np.zeros((len(uids), len(models)))
        for back in h * np.arange(int(self.backtest_windows), 0, -1):
            head = frame.loc[from_end >= back].reset_index(drop=True)
            ctx = Context(uids, np.vstack([windows_at(y, width, [len(y) - back]) for y in ys]),
                          np.array([s + len(y) - back - 1 for y, s in zip(ys, starts)]))
            truth = np.vstack([y[len(y) - back:len(y) - back + h] for y in ys])
            scale = np.array([max(float(np.mean(np.abs(y[:-back]))), 1e-9) for y in ys])[:, None]
            for j, model in enumerate(models):
                probe = model.clone()
                probe._fit_points(head)
                errors[:, j] += np.mean(np.abs(truth - self._member_points(probe, ctx, h)) / scale, axis=1)
        # the groups as the last window's contexts fall (``ctx``: the loop's last, nearest the end)
        n_groups = max(min(int(self.groups), len(uids) // MIN_GROUP_SERIES), 1)
        r = self._regularity(ctx.values)
        if n_groups > 1 and np.isfinite(r).sum() >= n_groups * MIN_GROUP_SERIES:
            self.edges_ = np.unique(np.nanquantile(r, np.linspace(0, 1, n_groups + 1)[1:-1]))
        group = self._group_of(ctx.values)
        return np.vstack([self._inverse(errors[group == g].mean(axis=0)) if (group == g).any()
                          else self._inverse(errors.mean(axis=0)) for g in range(len(self.edges_) + 1)])

    def _fit_points(self, frame: pd.DataFrame) -> None:
        models = self._models()
        self.group_weights_ = self._backtest_weights(frame, models)
        used = self.group_weights_.max(axis=0) > 0
        kept = []
        for model, keep in zip(models, used):
            if keep:
                # a member validates as it would fitted alone on the ensemble's calibration stretch
                model._calibration_span_ = getattr(self, "_calibration_span_", None)
                model._fit_points(frame)
                model.__dict__.pop("probe_", None)  # no calibration copy of a member takes it
                kept.append(model)
        self.members_ = kept
        self.group_weights_ = self.group_weights_[:, used]
        # each member's share over the groups, for the log and the registry
        share = np.zeros(len(models))
        share[used] = self.group_weights_.mean(axis=0)
        self.weights_ = share
        self.member_weights_ = {m.name: float(w) for m, w in zip(models, share)}
        log.info("ensemble: weights %s over %d group(s)", {k: round(v, 3) for k, v in self.member_weights_.items()},
                 len(self.group_weights_))

    def _predict_points(self, ctx: Context, h: int) -> np.ndarray:
        weights = getattr(self, "group_weights_", None)
        if weights is None:  # an artifact from before groups: one set of weights over every member
            weights = self.weights_[self.weights_ > 0][None, :]
        group = self._group_of(ctx.values) if len(weights) > 1 else np.zeros(len(ctx.values), dtype=int)
        return sum(weights[group, j][:, None] * self._member_points(m, ctx, h) for j, m in enumerate(self.members_))
