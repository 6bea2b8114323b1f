"""Hardware-fault predictor: LightGBM on telemetry-window features, "fails within H"."""
from __future__ import annotations

import logging

import lightgbm as lgb
import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator

from anomaly.base import check_fitted, require_columns
from anomaly.fault_eval import choose_threshold, dedup_alerts, scorable_failures, score_alerts
from anomaly.fault_features import (
    FaultPolicy,
    build_fault_features,
    feature_columns,
    feature_span,
    label_failures,
)

log = logging.getLogger(__name__)


def _model(policy: FaultPolicy, pos_weight: float) -> lgb.LGBMClassifier:
    return lgb.LGBMClassifier(
        n_estimators=policy.n_estimators, learning_rate=policy.learning_rate,
        num_leaves=policy.num_leaves, min_child_samples=policy.min_child_samples,
        subsample=0.8, subsample_freq=1, colsample_bytree=0.8, scale_pos_weight=pos_weight,
        random_state=policy.seed, n_jobs=1, verbose=-1,
    )


def _time_folds(features: pd.DataFrame, policy: FaultPolicy) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, test) masks of ``policy.folds`` equal time blocks of the span, purged: a block's
    model leaves out the rows whose labels reach into the block (the horizon before it), and
    after it those whose features reach back into it (the feature span) or whose labels
    share a failure with the block's last rows (the horizon)."""
    ts = features["ts"].to_numpy(dtype="datetime64[ns]").astype(np.int64)
    rel = ts - ts.min()
    span = int(rel.max()) + 1
    # block edges in Python integers: rel * folds could overflow int64 on a span of decades
    edges = np.array([f * span // policy.folds for f in range(policy.folds + 1)], dtype=np.int64)
    block = np.searchsorted(edges[1:-1], rel, side="right")
    before = pd.Timedelta(policy.horizon).value
    after = max(feature_span(policy), pd.Timedelta(policy.horizon)).value
    return [((rel < edges[f] - before) | (rel >= edges[f + 1] + after), block == f) for f in range(policy.folds)]


def _device_folds(features: pd.DataFrame, policy: FaultPolicy) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """(train, test) masks of ``policy.folds`` groups of devices (None for a single device)."""
    devices = features["device_id"].astype(str).to_numpy()
    unique = np.unique(devices)
    folds = min(policy.folds, len(unique))
    if folds < 2:
        return None
    rng = np.random.default_rng(policy.seed)
    fold_of = dict(zip(rng.permutation(unique), np.arange(len(unique)) % folds))
    fold = np.array([fold_of[d] for d in devices])
    return [(fold != f, fold == f) for f in range(folds)]


class FaultPredictor(BaseEstimator):
    """P(device fails within [t + lead, t + horizon]) from its telemetry up to t.

    ``fit`` trains on feature rows (see :func:`build_fault_features`) and failures, and
    sets ``threshold_`` on out-of-fold scores (purged time blocks, or groups of devices:
    ``FaultPolicy.threshold_folds``), so the threshold is never tuned on rows the model
    has seen; ``oof_metrics_`` are those scores' alert metrics at that threshold (what to
    expect of the alerts).
    """

    def __init__(self, policy: FaultPolicy | None = None) -> None:
        self.policy = policy

    def _policy(self) -> FaultPolicy:
        return self.policy or FaultPolicy()

    def fit(self, features: pd.DataFrame, failures: pd.DataFrame) -> FaultPredictor:
        """Train on ``features`` (one row per device and time) labelled by ``failures``."""
        require_columns(features, ["device_id", "ts"], "fault features")
        policy = self._policy()
        y = label_failures(features, failures, policy)
        if y.sum() == 0:
            raise ValueError("no failure falls within the horizon of any feature row: nothing to learn")
        cols = feature_columns(features)
        X = features[cols].to_numpy(dtype=float)
        pos_weight = float(max((len(y) - y.sum()) / max(y.sum(), 1), 1.0)) ** 0.5
        self.threshold_, self.oof_metrics_ = self._threshold(features, failures,
                                                             self._out_of_fold(features, X, y, pos_weight))
        self.model_ = _model(policy, pos_weight).fit(X, y)
        self.feature_columns_ = cols
        return self

    def _threshold(self, features: pd.DataFrame, failures: pd.DataFrame,
                   oof: np.ndarray | None) -> tuple[float, dict[str, float]]:
        """The alert threshold and its out-of-fold alert metrics; 0.5 (the classifier's own
        boundary) when the out-of-fold scores hold no failure to set it on."""
        policy = self._policy()
        lead, horizon = pd.Timedelta(policy.lead), pd.Timedelta(policy.horizon)
        if oof is None:
            log.warning("one device cannot be split into device folds; alert threshold defaults to 0.5")
            return 0.5, {}
        scored = features.loc[np.isfinite(oof), ["device_id", "ts"]].assign(score=oof[np.isfinite(oof)])
        catchable = scorable_failures(scored, failures, lead, horizon)
        if catchable.empty:
            log.warning("fault alerts: no out-of-fold model that had a failure to learn from scored one (too "
                        "few training failures, or all in one fold); alert threshold defaults to 0.5")
            return 0.5, {}
        threshold = choose_threshold(scored, failures, lead, horizon, policy.target_precision, policy.cost_ratio)
        period = (scored["ts"].min(), scored["ts"].max())
        devices = sorted(scored["device_id"].astype(str).unique())
        alerts = dedup_alerts(scored, threshold, horizon)
        # alerts are judged against every failure; recall counts only those some score could catch
        # (a failure in an unscored block sits inside the scored span too)
        metrics = score_alerts(alerts, failures, lead, horizon, period, devices)
        caught = score_alerts(alerts, catchable, lead, horizon, period, devices)
        metrics.update({k: caught[k] for k in ("events", "caught", "recall", "median_lead_hours")})
        self._warn_short_of_target(metrics)
        return threshold, metrics

    def _warn_short_of_target(self, m: dict[str, float]) -> None:
        """Say so when the out-of-fold alerts miss the target precision (too few failures to
        learn from, usually): the user asked for alerts that are right that often."""
        target = self._policy().target_precision
        if target is None or not m.get("events"):
            return
        if m["alerts"] == 0:
            log.warning("fault alerts: no threshold reaches precision %.2f on out-of-fold scores (%d failures "
                        "to learn from), nor half of it: the predictor will not alert until it has seen more "
                        "failures", target, m["events"])
        elif m["precision"] < target:
            log.warning("fault alerts: no threshold reaches precision %.2f on out-of-fold scores (%d failures "
                        "to learn from); the most precise one gives %.2f at recall %.2f", target, m["events"],
                        m["precision"], m["recall"])

    def _out_of_fold(self, features: pd.DataFrame, X: np.ndarray, y: np.ndarray,
                     pos_weight: float) -> np.ndarray | None:
        policy = self._policy()
        folds = (_time_folds(features, policy) if policy.threshold_folds == "time"
                 else _device_folds(features, policy))
        if folds is None:
            return None
        oof = np.full(len(y), np.nan)
        for train, test in folds:
            if not test.any():  # a block inside a gap of the telemetry
                continue
            if y[train].sum() == 0:  # a model without a failure to learn from: its block stays unscored
                continue
            m = _model(policy, pos_weight).fit(X[train], y[train])
            oof[test] = m.predict_proba(X[test])[:, 1]
        return oof

    def predict_proba(self, features: pd.DataFrame) -> np.ndarray:
        """Failure probability per feature row."""
        check_fitted(self, "model_")
        missing = [c for c in self.feature_columns_ if c not in features.columns]
        X = features.reindex(columns=self.feature_columns_).to_numpy(dtype=float)
        if missing:
            log.info("feature(s) %s absent at predict time; treated as missing", missing)
        return self.model_.predict_proba(X)[:, 1]

    def predict(self, features: pd.DataFrame) -> pd.DataFrame:
        """``device_id, ts, score, alert`` per feature row (alert = score >= threshold_)."""
        score = self.predict_proba(features)
        return features[["device_id", "ts"]].assign(score=score, alert=score >= self.threshold_)


def time_split(features: pd.DataFrame, test_fraction: float, horizon: pd.Timedelta,
               test_devices: list[str] | None = None) -> tuple[np.ndarray, np.ndarray, pd.Timestamp]:
    """Masks (train, test) and the cutoff: train rows end ``horizon`` before the cutoff so
    no training label looks past it (an embargo); with ``test_devices`` the test set is
    only those devices and training never sees them."""
    if not 0 < test_fraction < 1:
        raise ValueError("test_fraction must be in (0, 1)")
    start, end = features["ts"].min(), features["ts"].max()
    cutoff = start + (end - start) * (1 - test_fraction)
    train = (features["ts"] < cutoff - horizon).to_numpy()
    test = (features["ts"] >= cutoff).to_numpy()
    if test_devices is not None:
        held = features["device_id"].astype(str).isin(test_devices).to_numpy()
        train = train & ~held  # not in place: pandas 3 hands out read-only arrays
        test = test & held
    return train, test, pd.Timestamp(cutoff)


__all__ = ["FaultPolicy", "FaultPredictor", "build_fault_features", "label_failures", "time_split"]
