"""The Forecaster protocol, the shared base class and its conformal intervals.

Every model follows scikit-learn's estimator contract: parameters are stored by
``__init__`` unchanged, learned state lives in attributes ending with ``_``,
``fit`` returns ``self`` and replaces earlier state, ``predict`` before ``fit``
raises :class:`NotFittedError` (scikit-learn's, shared with :mod:`anomaly`).
``get_params``/``set_params``/``clone`` are scikit-learn's (:class:`~sklearn.base.BaseEstimator`);
a model's hyperparameters may be grouped in a frozen dataclass (``LGBMParams``, ``ProphetParams``),
which :meth:`BaseForecaster.flat_params` and the pickled artifact spell out field by field.

Intervals are split-conformal, per horizon step: ``fit`` first fits a copy of
the model on each series minus its last ``horizon + calibration_origins - 1``
points, forecasts from rolling origins in that held-out stretch (all of the
``calibration_origins``, or 168 of them spread evenly when there are more; each
forecast sees only data up to its origin), and keeps the absolute errors. A short
series takes fewer origins, at most half of itself, at the end of the stretch; the
others keep theirs. A model with a state per series (``forecasts_any_series`` false)
fits up to ``MAX_EXTRA_CUTS`` more copies, on the data before a short series' first
origin, where the panel's copy holds too little of it; a series shorter still gives no errors. A model whose forecast does not
read the data after its fit (Prophet) sets ``calibration_refits``: the origins
then come in that many blocks, each forecast by a copy fit on the data before it.
Each error is normalised by the series' volatility at its origin (the mean
absolute seasonal difference over the week of seasons before it, see
``_local_scale``), so that series of different scale, and calm and turbulent
stretches of one series, can be pooled: normalised (locally weighted) split
conformal. The interval half-width at step ``j`` is the conformal quantile of
the pooled normalised errors at step ``j`` times the series' volatility at the
forecast origin, so intervals widen when a series turns turbulent and narrow
when it calms down. The quantile weighs recent origins more (non-exchangeable
conformal prediction, Barber et al. 2023): an origin's weight halves with every
quarter of the calibration stretch it lies further back (or every ``MIN_HALF_LIFE``
steps, if longer: a short stretch has too few errors to discount), so with the default
two weeks of hourly origins the oldest count a sixteenth of the newest, and the errors
of the days nearest the forecast, the regime it starts in, count most. The errors of all
series are pooled, but a series whose own errors bound its quantile lower (a one-sided 95%
confidence bound over their effective count) takes that bound: a neighbour's step or
burst does not widen a steady series' band. A level above 80% is
never narrower than the 80% half-width stretched as a normal distribution's tail would be
(95%: x 1.53): its quantile rests on a few errors, and a short stretch may hold none of the
wide ones a turbulent day brings. The model itself is fit on all data (first, so that a model
whose training length is chosen on data can give its copy the same, see
``_calibration_copy``).
"""
from __future__ import annotations

import dataclasses
import inspect
import logging
import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, ClassVar, Protocol, Self, runtime_checkable

import numpy as np
import pandas as pd
from numpy.lib.stride_tricks import sliding_window_view
from sklearn.base import BaseEstimator
from sklearn.base import clone as sklearn_clone
from sklearn.exceptions import NotFittedError as NotFittedError  # re-exported: one class, core-wide
from sklearn.utils.validation import check_is_fitted

from forecasters.params import flatten, nest
from forecasters.validation import HistoryError, future_ds, step_index, validate_history

log = logging.getLogger(__name__)

MAX_CAL_ORIGINS = 168
# a panel of many series needs fewer origins each for as many errors: at most this many
# (series, origin) contexts in all, and never fewer than MIN_CAL_ORIGINS origins a series. The
# quantiles are shared by all series: 5,000 contexts cover as 20,000 did (M4 Hourly 0.831/0.954
# vs 0.829/0.953, Bitbrains panel 0.810/0.941 vs 0.810/0.940) at a quarter of the predictions,
# and 3,000 as 5,000 (M4 Hourly lgbm 0.844/0.956 vs 0.842/0.954)
MAX_CAL_CONTEXTS = 3_000
MIN_CAL_ORIGINS = 8
MAX_EXTRA_CUTS = 2  # copies fit for series too short for the model's own calibration blocks
LOCAL_SEASONS = 7
LONGRUN_SHARE = 0.25
LEVEL_SHARE = 1e-3
HALF_LIFE_SHARE = 0.25  # an origin's weight halves every quarter of the calibration stretch ...
MIN_HALF_LIFE = 84  # ... or every 84 steps if longer: a short stretch is weighed about evenly
OWN_BOUND_Z = 1.645  # a one-sided 95% confidence bound on a series' own quantile
TAIL_REFERENCE = 80  # a wider level's half-width is at least this one's, stretched as a normal's
_NORMAL = NormalDist()
FORECAST_COLUMNS = ["unique_id", "ds", "model", "mean", "lo_80", "hi_80", "lo_95", "hi_95"]


@runtime_checkable
class Forecaster(Protocol):
    """What the backtester, the registry and the pipelines rely on."""

    name: ClassVar[str]
    horizon: int

    def fit(self, history: pd.DataFrame) -> Self: ...

    def predict(
        self, h: int | None = None, level: tuple[int, ...] = (80, 95), history: pd.DataFrame | None = None
    ) -> pd.DataFrame: ...

    def get_params(self, deep: bool = True) -> dict[str, Any]: ...

    def flat_params(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Context:
    """Right-aligned recent values of a set of series, the input of every point forecast.

    ``values`` is (n, length), left-padded with NaN; the last column is the value at
    ``end`` (the step index of the forecast origin) for each row.
    """

    uids: np.ndarray
    values: np.ndarray
    end: np.ndarray


def series_arrays(frame: pd.DataFrame) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
    """Split a validated frame into (uids, y arrays, first step index) per series."""
    uids, starts = np.unique(frame["unique_id"].to_numpy(), return_index=True)
    order = np.argsort(starts)
    uids, starts = uids[order], starts[order]
    y = frame["y"].to_numpy(dtype=float)
    bounds = list(starts[1:])
    return uids, np.split(y, bounds), frame["_step"].to_numpy()[starts]


def windows_at(y: np.ndarray, length: int, known: np.ndarray) -> np.ndarray:
    """Rows of the last ``length`` values of ``y[:k]`` for each ``k`` in ``known``, NaN-padded."""
    padded = np.concatenate([np.full(length, np.nan), y])
    return sliding_window_view(padded, length)[np.asarray(known, dtype=np.int64)]


class BaseForecaster(BaseEstimator):
    """Shared fit/predict plumbing: validation, contexts, conformal intervals, the frame."""

    name: ClassVar[str] = "base"
    # copies fit to calibrate the intervals (see _calibrate): one, unless a model's forecast
    # from an origin does not read the data up to it
    calibration_refits: ClassVar[int] = 1
    # origins forecast per series at most (spread evenly over the stretch); a model whose every
    # forecast refits something costly (ets' MSTL) takes fewer
    max_calibration_origins: ClassVar[int] = MAX_CAL_ORIGINS
    # a model that forecasts a series from its context alone (no state of its own per series): a
    # calibration copy then forecasts a series too short to be in its fit, with no copy of its own
    forecasts_any_series: ClassVar[bool] = False
    # parameters added after artifacts were saved: the value an artifact without one was fit with
    legacy_params: ClassVar[dict[str, Any]] = {}

    # --- parameters (get_params, set_params and repr are scikit-learn's) ----------
    @classmethod
    def _param_groups(cls) -> dict[str, Any]:
        """Constructor parameters that group hyperparameters in a frozen dataclass (those
        whose default is a dataclass instance): name -> that default."""
        params = inspect.signature(cls.__init__).parameters.values()
        return {p.name: p.default for p in params if dataclasses.is_dataclass(p.default)}

    def flat_params(self) -> dict[str, Any]:
        """The constructor parameters with each group's fields in its place, all plain values:
        what the model registry stores and hashes (one key per hyperparameter)."""
        return flatten(self.get_params(deep=False), self._param_groups())

    def clone(self) -> Self:
        """An unfitted copy with the same parameters (:func:`sklearn.base.clone`)."""
        return sklearn_clone(self)

    def __getstate__(self) -> dict[str, Any]:
        # pickled flat, one entry per hyperparameter as before the groups existed: the same fit
        # is the same artifact bytes, and an artifact saved before the groups still loads
        return flatten(self.__dict__, self._param_groups())

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = nest(state, self._param_groups())
        missing = {k: v for k, v in self.legacy_params.items() if k not in state}
        if missing:  # the parameters in the constructor's order, as a fresh model holds them
            names = [n for n in inspect.signature(type(self).__init__).parameters if n != "self"]
            params = {n: state[n] if n in state else missing[n] for n in names if n in state or n in missing}
            state = {**params, **{k: v for k, v in state.items() if k not in params}}
        self.__dict__.update(state)

    # --- what subclasses provide -------------------------------------------------
    def _min_length(self) -> int:
        """Points a series needs for the model itself (not counting calibration)."""
        return 1

    def _context_length(self) -> int:
        """How many trailing values a point forecast reads."""
        return int(getattr(self, "season_length", 1))

    def _fit_points(self, frame: pd.DataFrame) -> None:
        """Learn from a validated frame (with ``_step``); set attributes ending in ``_``."""
        raise NotImplementedError

    def _predict_points(self, ctx: Context, h: int) -> np.ndarray:
        """Point forecasts (len(ctx.uids), h) from the given contexts."""
        raise NotImplementedError

    # --- public API ---------------------------------------------------------------
    def _validate(self, history: pd.DataFrame, min_length: int) -> pd.DataFrame:
        try:
            frame = validate_history(history, self.freq, min_length=min_length)
        except HistoryError as exc:
            raise HistoryError(f"{self.name}: {exc}", exc.series) from exc
        frame["_step"] = step_index(frame["ds"], self.freq)
        return frame

    def fit(self, history: pd.DataFrame) -> Self:
        """Fit on all of ``history``, then calibrate the intervals on held-out origins."""
        if self.horizon < 1:
            raise ValueError(f"{self.name}: horizon must be >= 1")
        if int(getattr(self, "season_length", 1)) < 1:
            raise ValueError(f"{self.name}: season_length must be >= 1 (1: no season), got {self.season_length}")
        # the model's own minimum, and a horizon more for at least one calibration origin
        frame = self._validate(history, self.min_points())
        lengths = frame.groupby("unique_id", sort=False).size()
        # each series' own calibration stretch takes at most half of it, so that the copy whose
        # errors it measures is fit on as much as it is tested on (or more), not on the model's
        # bare minimum; the panel's stretch is the longest series' (a short series beside long
        # ones gives errors from its own stretch, the end of the panel's, not the whole panel
        # a stretch as short as its own: one 3-day series took 21-day ones' 80/95% coverage
        # from 0.83/0.96 to 0.48/0.58)
        own = np.minimum(np.minimum(self.calibration_origins, lengths - self._min_length() - self.horizon + 1),
                         np.maximum((lengths - self.horizon + 1) // 2, 1))
        if int(own.min()) < 1:
            uid = own.idxmin()
            need = self._min_length() + self.horizon
            raise HistoryError(
                f"series {uid!r}: {int(lengths[uid])} points is too short for {self.name} with "
                f"horizon {self.horizon} and conformal calibration; need at least {need}", str(uid)
            )
        n_cal = int(own.max())
        # the points from the first calibration origin on, which a model may validate on
        self._calibration_span_ = self.horizon + n_cal - 1
        self._fit_points(frame)
        self._calibrate(frame, own.to_numpy())
        # the forecast's own weight is the share of the quantile no calibration error can reach:
        # above 5%, the 95% interval is the widest error seen (coverage loose, bands wide)
        loose = [lv for lv in (95, 80) if self._unreached_share() > 1 - lv / 100]
        if loose and n_cal < self.calibration_origins:
            log.warning("%s: only %d calibration origin(s) fit before the horizon; intervals at %s%% are the "
                        "widest calibration error, so their coverage is loose: give the series more history",
                        self.name, n_cal, " and ".join(map(str, loose)))
        self.history_ = frame
        # floored at 0 series by series: one series below 0 leaves its neighbours' floor alone
        self.signed_ = np.asarray(sorted(frame.loc[frame["y"] < 0, "unique_id"].astype(str).unique()), dtype=object)
        self.nonnegative_ = not len(self.signed_)  # (what older artifacts hold, for the whole panel)
        return self

    def _floored(self, uids: np.ndarray) -> np.ndarray:
        """Per series: whether its forecasts stay at 0 or above (its history never went below)."""
        if not hasattr(self, "signed_"):  # an artifact from before: one answer for the panel
            return np.full(len(uids), bool(self.nonnegative_))
        return ~np.isin(np.asarray(uids).astype(str), self.signed_)

    def _unreached_share(self, rows: np.ndarray | None = None) -> float:
        """The forecast's weight over all weights (see :meth:`conformal_quantile`) of the
        calibration errors (or of ``rows`` of them): a level above ``1 -`` this is the widest."""
        w = getattr(self, "conformal_weights_", None)
        if w is None:
            return 1.0 / (self.conformal_scores_.shape[0] + 1)
        w = w if rows is None else w[rows]
        return float(w.max() / (w.sum() + w.max()))

    def min_points(self) -> int:
        """Points each series needs for ``fit``: the model's own minimum plus a horizon, so
        that one calibration origin fits before it (the fit warns while too few origins fit
        for intervals that are not the widest error seen)."""
        return self._min_length() + self.horizon

    def _calibration_copy(self) -> Self:
        """The unfitted model whose errors on the held-out origins calibrate the intervals:
        a plain copy; a model whose training stops on data can make its copy train alike
        (``fit`` has fitted ``self`` on all data by then)."""
        return self.clone()

    def _calibrate(self, frame: pd.DataFrame, own: np.ndarray) -> None:
        """Errors of held-out forecasts from each series' own last ``own`` origins (offsets
        ``n_cal - own`` .. ``n_cal - 1`` of the panel's stretch of ``n_cal = own.max()``)."""
        n_cal = int(own.max())
        span = self.horizon + n_cal - 1
        from_end = frame.groupby("unique_id", sort=False).cumcount(ascending=False).to_numpy()
        uids, ys, starts = series_arrays(frame)
        lengths = np.array([len(y) for y in ys])
        first = n_cal - own  # each series' first origin on the panel's stretch
        # the first cut (offset) at which a copy's data hold the model's minimum of a series
        fits_from = span + self._min_length() - lengths
        length = self._context_length()
        # at most max_calibration_origins origins a series, spread evenly over its stretch:
        # neighbouring origins give nearly the same errors, a long stretch gives variety
        per_series = max(MAX_CAL_CONTEXTS // max(len(ys), 1), MIN_CAL_ORIGINS)
        offsets = [np.unique(np.linspace(f, n_cal - 1, min(n, self.max_calibration_origins, per_series))
                             .round().astype(np.int64)) for f, n in zip(first, own)]
        # the origins in ``calibration_refits`` consecutive blocks, each forecast by a copy fit
        # on the data before the block's first origin; a series too short for the copy of the
        # block its stretch starts in gets a block of its own (at most MAX_EXTRA_CUTS more copies)
        cuts = set(np.linspace(0, n_cal, max(1, min(int(self.calibration_refits), n_cal)) + 1).round()
                   .astype(np.int64).tolist())
        for _ in range(0 if self.forecasts_any_series else MAX_EXTRA_CUTS):
            lo = np.array([max(c for c in cuts if c <= f) for f in first])
            late = first[lo < fits_from]
            if late.size == 0:
                break
            cuts.add(int(late.min()))
        edges = sorted(cuts)
        errs, scaled, ages, ids_all = [], [], [], []
        for lo, hi in zip(edges[:-1], edges[1:]):
            fits = fits_from <= lo
            picks = [o[(o >= lo) & (o < hi)] if ok or self.forecasts_any_series else o[:0]
                     for o, ok in zip(offsets, fits)]
            if not any(p.size for p in picks):
                continue
            calib = self._calibration_copy()
            cut = min(int(p[0]) for p in picks if p.size)  # the block's first origin
            keep = np.repeat(fits, lengths) & (from_end >= span - cut)
            calib._fit_points(frame.loc[keep].reset_index(drop=True))
            rows, truths, ends, ids = [], [], [], []
            for uid, y, start, pick in zip(uids, ys, starts, picks):
                if pick.size == 0:
                    continue
                known = len(y) - span + pick
                rows.append(windows_at(y, length, known))
                truths.append(sliding_window_view(y, self.horizon)[known])
                ends.append(start + known - 1)
                ids.append(np.repeat(np.array([uid], dtype=object), pick.size))  # one str object, pickled once
                scaled.append(self._scale_at(y, known))
                ages.append(span - pick)  # steps from each origin to the end of history
            ids_all.extend(ids)
            ctx = Context(np.concatenate(ids), np.vstack(rows), np.concatenate(ends))
            errs.append(np.abs(np.vstack(truths) - calib._predict_points(ctx, self.horizon)))
        local = np.concatenate([s for s, _ in scaled])
        scores = (np.vstack(errs) / local[:, None]).astype(np.float64)
        age = np.concatenate(ages).astype(np.float64)
        # an origin before which its series' volatility cannot be measured (all zeros so far, or
        # not one season of differences yet) gives a normalised error of any size: left out, as
        # the pooled quantiles would otherwise widen every series' band by it; one of a flat
        # series (a pool pinned at capacity) errs 0 over its level floor: left out, as it would
        # narrow them (three such neighbours took a series' 80% coverage from 0.84 to 0.31)
        measured = np.concatenate([m for _, m in scaled])
        ids = np.concatenate(ids_all)
        if measured.any() and not measured.all():
            scores, age, ids = scores[measured], age[measured], ids[measured]
        self.conformal_scores_ = scores
        self.conformal_ids_ = ids
        half_life = max(HALF_LIFE_SHARE * n_cal, MIN_HALF_LIFE)
        self.conformal_weights_ = 0.5 ** ((age - age.min()) / half_life)
        self.conformal_scale_ = {u: float(self._local_scale(y, [len(y)])[0]) for u, y in zip(uids.tolist(), ys)}

    def _local_scale(self, y: np.ndarray, known: np.ndarray | list[int]) -> np.ndarray:
        """How volatile each series is just before an origin: the mean absolute seasonal
        difference over the last ``LOCAL_SEASONS`` seasons of ``y[:k]`` for each ``k`` in
        ``known``, at least ``LONGRUN_SHARE`` of its mean over all of ``y[:k]``, and at least
        ``LEVEL_SHARE`` of the mean absolute level of ``y[:k]`` (and above 0: a billionth of the
        series' own mean level, so that one series' units never set another's floor)."""
        return self._scale_at(y, known)[0]

    def _scale_at(self, y: np.ndarray, known: np.ndarray | list[int]) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_local_scale` at each ``k`` in ``known``, and whether it was measured there: a
        season of differences before it, and differences that set the scale (not the floors at a
        share of the level: a flat series' errors, 0 over its floor, would narrow every band)."""
        s = max(int(getattr(self, "season_length", 1)), 1)
        csum = np.zeros(len(y) + 1)
        if len(y) > s:
            csum[s + 1:] = np.cumsum(np.abs(y[s:] - y[:-s]))
        known = np.asarray(known, dtype=np.int64)
        lo = np.clip(known - LOCAL_SEASONS * s, s, None)
        local = (csum[known] - csum[np.minimum(lo, known)]) / np.maximum(known - lo, 1)
        longrun = (csum[known] - csum[np.minimum(s, known)]) / np.maximum(known - s, 1)
        # and never below a thousandth of the series' level: a stretch of idle zeros would
        # otherwise turn any small error into an enormous normalised one
        level = np.concatenate([[0.0], np.cumsum(np.abs(y))])[known] / np.maximum(known, 1)
        floor = max(float(np.mean(np.abs(y))) * 1e-9 if len(y) else 0.0, 1e-12)
        scale = np.maximum(np.maximum(np.maximum(local, LONGRUN_SHARE * longrun), LEVEL_SHARE * level), floor)
        moved = np.maximum(local, LONGRUN_SHARE * longrun)
        return scale, (known > s) & (moved > 0) & (moved >= LEVEL_SHARE * level)

    def _check_fitted(self) -> None:
        check_is_fitted(self, "history_", msg=f"{self.name} is not fitted yet: call fit(history) before predict")

    def conformal_quantile(self, level: int, rows: np.ndarray | None = None) -> np.ndarray:
        """Normalised half-width per horizon step for a central ``level``% interval: the
        weighted conformal quantile of the calibration errors, the forecast itself weighing
        as much as the newest origin (at infinity: the widest error seen when the weights of
        the errors below it fall short). Above ``TAIL_REFERENCE``% it is at least the
        reference level's half-width stretched as a normal distribution's would be
        (95%: x 1.53 the 80% half-width)."""
        self._check_fitted()
        q = self._weighted_quantile(level, rows)
        if level > TAIL_REFERENCE:
            # never a lighter tail than the normal's: a few calibration errors set a wide level's
            # quantile and the one origin that erred widely may be missing from them; the band at
            # TAIL_REFERENCE%, set by many more, bounds it (only ever wider: still valid)
            q = np.maximum(q, self._weighted_quantile(TAIL_REFERENCE, rows) * _tail_ratio(level))
        return q

    def _weighted_quantile(self, level: float, rows: np.ndarray | None = None) -> np.ndarray:
        scores = self.conformal_scores_ if rows is None else self.conformal_scores_[rows]
        n = scores.shape[0]
        weights = getattr(self, "conformal_weights_", None)
        if weights is not None and rows is not None:
            weights = weights[rows]
        if weights is None:  # an artifact calibrated before the weights: equal weights
            rank = min(math.ceil((n + 1) * level / 100.0), n)
            return np.sort(scores, axis=0)[rank - 1]
        order = np.argsort(scores, axis=0, kind="stable")
        cum = np.cumsum(weights[order], axis=0) / (weights.sum() + weights.max())
        # the first error whose cumulative weight reaches the level (a hair of float noise allowed)
        rank = np.minimum((cum < level / 100.0 - 1e-12).sum(axis=0), n - 1)
        return np.take_along_axis(scores, order, axis=0)[rank, np.arange(scores.shape[1])]

    def _own_bounds(self, uids: np.ndarray, level: int) -> list[np.ndarray | None]:
        """Per series, an upper confidence bound on its own errors' ``level`` quantile: their
        weighted quantile at ``level`` plus ``OWN_BOUND_Z`` standard errors of a proportion over
        their effective count; None where that level is past their reach (too few errors)."""
        ids = getattr(self, "conformal_ids_", None)
        weights = getattr(self, "conformal_weights_", None)
        if ids is None or weights is None:
            return [None] * len(uids)  # an older artifact: the pooled errors alone
        names, group = np.unique(ids, return_inverse=True)
        if len(names) < 2:
            return [None] * len(uids)  # one series: the pooled errors are its own
        total, square = np.bincount(group, weights), np.bincount(group, weights ** 2)
        top = np.zeros(len(names))
        np.maximum.at(top, group, weights)
        p = level / 100.0
        upper = p + OWN_BOUND_Z * np.sqrt(p * (1 - p) * square / total ** 2)
        reach = upper < 1 - top / (total + top)  # as _unreached_share, per series
        index = {u: i for i, u in enumerate(names.tolist())}
        out: list[np.ndarray | None] = []
        for u in uids.tolist():
            i = index.get(u)
            out.append(None if i is None or not reach[i] else self.conformal_quantile(100 * upper[i], group == i))
        return out

    def predict(
        self, h: int | None = None, level: tuple[int, ...] = (80, 95), history: pd.DataFrame | None = None
    ) -> pd.DataFrame:
        """Forecast ``h`` steps after the end of the fitted history (or of ``history``,
        with the learned parameters and no refit) as a forecast frame."""
        self._check_fitted()
        bad = [lv for lv in level if not 0 < lv < 100]
        if bad:
            raise ValueError(f"{self.name}: interval levels are percentages between 0 and 100, got {bad}")
        h = self.horizon if h is None else int(h)
        if not 1 <= h <= self.horizon:
            raise ValueError(f"{self.name}: h must be in 1..{self.horizon} (the fitted horizon), got {h}")
        frame = self.history_ if history is None else self._validate(history, 1)
        uids, ys, starts = series_arrays(frame)
        unknown = [u for u in uids if u not in self.conformal_scale_]
        if unknown:
            raise HistoryError(f"series {unknown[0]!r} was not seen by fit; refit to forecast it", str(unknown[0]))
        length = self._context_length()
        values = np.vstack([windows_at(y, length, [len(y)]) for y in ys])
        ends = np.array([s + len(y) - 1 for y, s in zip(ys, starts)])
        mean = self._predict_points(Context(uids, values, ends), h)
        # the volatility at the origin; a history too short to tell falls back to fit time
        season = max(int(getattr(self, "season_length", 1)), 1)
        scale = np.array([
            self._local_scale(y, [len(y)])[0] if len(y) > season else self.conformal_scale_[u]
            for u, y in zip(uids.tolist(), ys)
        ])
        floored = self._floored(uids)
        mean = np.where(floored[:, None], np.maximum(mean, 0.0), mean)
        last = frame.groupby("unique_id", sort=False)["ds"].last().loc[uids].to_numpy()
        out = pd.DataFrame(
            {
                "unique_id": np.repeat(uids, h),
                "ds": np.concatenate([future_ds(t, h, self.freq) for t in last]),
                "model": self.name,
                "mean": mean.ravel(),
            }
        )
        # the pooled errors' quantile, unless a series' own errors bound its quantile lower (one
        # series' step or burst no longer widens a steady neighbour's band); a wide level stays
        # at least the reference level's band, stretched as a normal tail, series by series
        quantiles = {}
        for lv in sorted(set(level) | ({TAIL_REFERENCE} if max(level, default=0) > TAIL_REFERENCE else set())):
            pooled = self.conformal_quantile(lv)[:h]
            q = np.vstack([pooled if b is None else np.minimum(pooled, b[:h]) for b in self._own_bounds(uids, lv)])
            quantiles[lv] = q if lv <= TAIL_REFERENCE else np.maximum(q, quantiles[TAIL_REFERENCE] * _tail_ratio(lv))
        for lv in level:
            half = (scale[:, None] * quantiles[lv]).ravel()
            lo, hi = out["mean"].to_numpy() - half, out["mean"].to_numpy() + half
            lo = np.where(np.repeat(floored, h), np.maximum(lo, 0.0), lo)
            out[f"lo_{lv}"], out[f"hi_{lv}"] = lo, hi
        cols = FORECAST_COLUMNS[:4] + [c for lv in level for c in (f"lo_{lv}", f"hi_{lv}")]
        return out[cols]


def _tail_ratio(level: float) -> float:
    """A normal distribution's half-width at ``level``% over its half-width at TAIL_REFERENCE%."""
    return _NORMAL.inv_cdf(0.5 + level / 200.0) / _NORMAL.inv_cdf(0.5 + TAIL_REFERENCE / 200.0)
