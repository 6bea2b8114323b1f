"""Spot-price-spike predictor (LightGBM) and the persistence baseline.

Both set their alert threshold the same way, on scores of the training span only (the
predictor's out-of-fold, persistence's own, as it learns nothing): the most recall among
the thresholds whose precision reaches the policy's target, or, when none does, the best
F1, of those whose alerts beat alerts at random hours; when none does, no alert at all
(:func:`choose_threshold`, which says which rule it took).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import lightgbm as lgb
import numpy as np
import pandas as pd
from scipy.stats import binom
from sklearn.base import BaseEstimator
from sklearn.metrics import precision_recall_curve

from anomaly.base import check_fitted, require_columns, short_duration
from anomaly.fault_eval import NEVER, SKILL_LEVEL
from anomaly.spike_features import (
    SERIES_KEY,
    SpikePolicy,
    build_spike_frame,
    spike_feature_columns,
    spike_feature_span,
)

log = logging.getLogger(__name__)

TARGET_PRECISION = "target_precision"  # a threshold reached the target precision
MAX_F1 = "max_f1"  # none did (or no target): the best F1 of those that beat chance
NO_SKILL = "no_skill"  # no threshold's alerts beat alerts at random rows: never alert
DEFAULT = "default"  # no scores with both classes to choose on: the given default


@dataclass(frozen=True)
class ThresholdChoice:
    """An alert threshold, the rule that chose it, and what it gave on the scores it was set on."""

    threshold: float
    rule: str
    precision: float = float("nan")
    recall: float = float("nan")
    f1: float = float("nan")
    alerts: int = 0

    def metrics(self) -> dict[str, float | int | str]:
        return {"rule": self.rule, "precision": self.precision, "recall": self.recall, "f1": self.f1,
                "alerts": self.alerts}


def choose_threshold(y: np.ndarray, score: np.ndarray, target_precision: float | None,
                     default: float = 0.5, never: float = NEVER) -> ThresholdChoice:
    """Of the thresholds whose alerts beat alerts at random rows (:func:`beats_chance_all`),
    the one with the most recall among those whose precision on ``(y, score)`` reaches
    ``target_precision`` (of equal recall, the highest: fewer alerts); when none does (or
    the target is None), the one with the best F1, rule ``max_f1``; when none beats
    chance, ``never`` (above any score), rule ``no_skill``: alerting on every hour of every
    market had the best F1, at the base rate's precision. NaN scores (rows no fold scored)
    are left out; with one class left, ``default``, rule ``default``."""
    y, score = np.asarray(y, dtype=float), np.asarray(score, dtype=float)
    keep = np.isfinite(score) & np.isfinite(y)
    y, score = y[keep].astype(int), score[keep]
    if y.size == 0 or y.sum() in (0, y.size):
        return ThresholdChoice(float(default), DEFAULT)
    p, r, t = precision_recall_curve(y, score)
    p, r = p[:-1], r[:-1]  # the last point is "no alert"; p[i], r[i] belong to t[i] (ascending)
    f1 = 2 * p * r / np.maximum(p + r, 1e-12)
    alerts = score.size - np.searchsorted(np.sort(score), t, side="left")
    skilled = np.where(beats_chance_all(p, alerts, float(y.mean())), f1, 0.0)
    rule = MAX_F1
    i = int(np.argmax(skilled))
    if target_precision is not None:  # (of those that beat chance too: one lucky alert is precision 1)
        ok = np.nonzero((p >= target_precision) & (skilled > 0))[0]
        if ok.size:
            best = r[ok].max()
            i = int(ok[r[ok] == best][-1])
            rule = TARGET_PRECISION
    if rule == MAX_F1 and not skilled[i] > 0:
        return ThresholdChoice(float(never), NO_SKILL, alerts=0)
    thr = float(t[i])
    return ThresholdChoice(thr, rule, float(p[i]), float(r[i]), float(f1[i]), int((score >= thr).sum()))


def beats_chance_all(precision: np.ndarray, alerts: np.ndarray, chance: float) -> np.ndarray:
    """Per threshold, whether ``alerts`` alerts right at ``precision`` beat alerts at random
    rows (right at ``chance``, the base rate) beyond luck: the one-sided binomial test of
    :func:`anomaly.fault_eval.beats_chance`, at its level shared among the thresholds tried
    (Bonferroni: of hundreds tried on noise, some pass by luck at 5% each)."""
    n = np.asarray(alerts, dtype=float)
    right = np.round(np.asarray(precision, dtype=float) * n)
    pvalue = binom.sf(right - 1, n, chance)
    return (n > 0) & (np.asarray(precision) > chance) & (pvalue < SKILL_LEVEL / max(n.size, 1))


def spike_time_folds(ts: pd.Series, policy: SpikePolicy) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, test) masks of ``policy.folds`` equal time blocks of ``ts``, purged: a block's
    model leaves out the rows whose labels reach into the block (the horizon before it) and
    those after it whose features reach back into it (the longest trailing window)."""
    ns = ts.to_numpy(dtype="datetime64[ns]").astype(np.int64)
    rel = ns - ns.min()
    span = int(rel.max()) + 1
    edges = np.array([f * span // policy.folds for f in range(policy.folds + 1)], dtype=np.int64)
    block = np.searchsorted(edges[1:-1], rel, side="right")
    before = pd.Timedelta(policy.horizon).value
    after = max(spike_feature_span(policy), pd.Timedelta(policy.horizon)).value
    return [((rel < edges[f] - before) | (rel >= edges[f + 1] + after), block == f) for f in range(policy.folds)]


class SpikePredictor(BaseEstimator):
    """P(spike within the horizon) per grid row of :func:`build_spike_frame`.

    ``fit`` sets ``threshold_`` on out-of-fold scores of the training rows (purged time
    blocks, :func:`spike_time_folds`), never on rows a model scoring them has seen;
    ``threshold_rule_`` says whether it reached the target precision (``target_precision``)
    or fell back to the best F1 (``max_f1``), and ``oof_metrics_`` what it gave there.
    """

    def __init__(self, policy: SpikePolicy | None = None) -> None:
        self.policy = policy

    def _model(self) -> lgb.LGBMClassifier:
        p = self.policy or SpikePolicy()
        return lgb.LGBMClassifier(
            n_estimators=p.n_estimators, learning_rate=p.learning_rate, num_leaves=p.num_leaves,
            min_child_samples=p.min_child_samples, subsample=0.8, subsample_freq=1,
            colsample_bytree=0.8, random_state=p.seed, n_jobs=1, verbose=-1,
        )

    def fit(self, frame: pd.DataFrame) -> SpikePredictor:
        """Train on labelled rows; the alert threshold is chosen on their out-of-fold scores."""
        require_columns(frame, ["ts", "label"], "spike frame")
        p = self.policy or SpikePolicy()
        rows = frame[frame["label"].notna()]
        if rows.empty:  # every hour's horizon runs past the prices: no label is known yet
            raise ValueError(f"no training hour has a known label: the training span is no longer than the "
                             f"{short_duration(p.horizon)} horizon; give more price history, a shorter --horizon "
                             "or a smaller --test-fraction")
        if rows["label"].nunique() < 2:
            every = "a spike ahead" if rows["label"].iloc[0] == 1 else "no spike ahead"
            raise ValueError(f"spike labels have a single class: every training hour has {every} (price >= "
                             f"{p.k:g} x its trailing median, or >= the on-demand price): nothing to learn")
        cols = spike_feature_columns(rows)
        X, y = rows[cols].to_numpy(dtype=float), rows["label"].to_numpy(dtype=int)
        oof = np.full(len(y), np.nan)
        for train, test in spike_time_folds(rows["ts"], p):
            if test.any() and train.any() and y[train].min() != y[train].max():  # else: unscored
                oof[test] = self._model().fit(X[train], y[train]).predict_proba(X[test])[:, 1]
        choice = choose_threshold(y, oof, p.target_precision)
        if choice.rule == MAX_F1 and p.target_precision is not None:
            log.warning("spike alerts: no threshold reaches precision %.2f on out-of-fold scores; using the "
                        "best-F1 one (precision %.2f, recall %.2f)", p.target_precision, choice.precision,
                        choice.recall)
        elif choice.rule == NO_SKILL:
            log.warning("spike alerts: no threshold's alerts beat alerts at random hours (base rate %.3f) on "
                        "out-of-fold scores: the model raises none", float(np.mean(y)))
        elif choice.rule == DEFAULT:
            log.warning("spike alerts: the out-of-fold scores hold one class only; alert threshold defaults to 0.5")
        self.threshold_, self.threshold_rule_ = choice.threshold, choice.rule
        self.oof_metrics_ = choice.metrics()
        self.model_ = self._model().fit(X, y)
        self.feature_columns_ = cols
        return self

    def predict_proba(self, frame: pd.DataFrame) -> np.ndarray:
        """Spike probability per row."""
        check_fitted(self, "model_")
        return self.model_.predict_proba(frame.reindex(columns=self.feature_columns_).to_numpy(dtype=float))[:, 1]

    def predict(self, frame: pd.DataFrame) -> np.ndarray:
        """1 where the probability reaches ``threshold_``."""
        return (self.predict_proba(frame) >= self.threshold_).astype(int)


class PersistenceSpikeBaseline(BaseEstimator):
    """"What is spiking now will be spiking": the score is the current spike severity,
    ``max(ratio / k, price / on-demand)``. Its alert threshold is chosen as the predictor's,
    on its scores of the training rows (it learns nothing else); without labelled rows of
    both classes it is 1.0, "spiking now"."""

    def __init__(self, k: float = 2.0, target_precision: float | None = 0.8) -> None:
        self.k = k
        self.target_precision = target_precision

    def _severity(self, frame: pd.DataFrame) -> np.ndarray:
        sev = np.fmax(frame["ratio"].to_numpy(dtype=float) / self.k, frame["od_ratio"].to_numpy(dtype=float))
        return np.nan_to_num(sev, nan=0.0)

    def fit(self, frame: pd.DataFrame) -> PersistenceSpikeBaseline:
        """Choose the threshold on the labelled rows of ``frame``."""
        require_columns(frame, ["ratio", "od_ratio"], "spike frame")
        if "label" in frame.columns:
            rows = frame[frame["label"].notna()]
            choice = choose_threshold(rows["label"].to_numpy(), self._severity(rows), self.target_precision, 1.0,
                                      never=np.inf)
        else:
            choice = ThresholdChoice(1.0, DEFAULT)
        self.threshold_, self.threshold_rule_ = choice.threshold, choice.rule
        return self

    def predict_proba(self, frame: pd.DataFrame) -> np.ndarray:
        """Current severity (not a probability; only its ranking matters for AUC)."""
        check_fitted(self, "threshold_")
        return self._severity(frame)

    def predict(self, frame: pd.DataFrame) -> np.ndarray:
        """1 where the severity reaches ``threshold_``."""
        return (self.predict_proba(frame) >= self.threshold_).astype(int)


def market_probabilities(model: SpikePredictor, prices: pd.DataFrame, on_demand: pd.DataFrame,
                        policy: SpikePolicy, at: pd.Timestamp | None = None) -> pd.DataFrame:
    """Every spot market's latest grid row (at or before ``at``, when given) with
    ``p_spike``, its probability of a spike within the policy's horizon, and the model's
    alert ``threshold``."""
    if at is not None:
        prices = prices[prices["ts"] <= at]
    frame = build_spike_frame(prices, policy, on_demand if not on_demand.empty else None, end=at)
    latest = frame.sort_values("ts").groupby(SERIES_KEY).tail(1)
    return latest.assign(p_spike=model.predict_proba(latest), threshold=float(model.threshold_))
