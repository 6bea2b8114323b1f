"""Hardware-fault predictor: LightGBM on telemetry-window features, "fails within H"."""
from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import lightgbm as lgb
import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.metrics import average_precision_score

from anomaly.base import check_fitted, require_columns
from anomaly.event_sets import HAZARD, SET, SET_HOURS, SetHazard
from anomaly.fault_eval import (
    ThresholdChoice,
    chance_precision,
    dedup_alerts,
    scorable_failures,
    score_alerts,
    threshold_choice,
)
from anomaly.fault_features import (
    FaultPolicy,
    build_fault_features,
    feature_columns,
    feature_span,
    label_failures,
)

log = logging.getLogger(__name__)


def _model(policy: FaultPolicy, pos_weight: float, params: dict[str, int] | None = None) -> lgb.LGBMClassifier:
    p = params or policy.settings()[0]
    return lgb.LGBMClassifier(
        n_estimators=p["n_estimators"], learning_rate=policy.learning_rate,
        num_leaves=p["num_leaves"], min_child_samples=p["min_child_samples"],
        subsample=0.8, subsample_freq=1, colsample_bytree=0.8, scale_pos_weight=pos_weight,
        random_state=policy.seed, n_jobs=1, verbose=-1,
    )


def _matrix(features: pd.DataFrame, cols: list[str], hazard: np.ndarray | None) -> np.ndarray:
    """The model's input matrix, a column at a time (no second copy of a large frame); the
    event set's encoding where ``hazard`` is given, a column absent from ``features`` missing."""
    X = np.empty((len(features), len(cols)), dtype=float)
    for j, c in enumerate(cols):
        X[:, j] = (hazard if c == HAZARD and hazard is not None else
                   features[c].to_numpy(dtype=float) if c in features else np.nan)
    return X


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


def known_failures(features: pd.DataFrame, failures: pd.DataFrame, horizon: pd.Timedelta) -> pd.DataFrame:
    """The failures a fit on ``features`` may know: of its devices, up to one horizon after its
    last row (what its labels can reach). Later ones, or other devices', belong to a span or a
    device the fit must not see (a test split): they would move the censoring of alerts near
    the end of the span, and so the threshold."""
    require_columns(failures, ["ts", "device_id"], "failures")
    devices = set(features["device_id"].astype(str))
    keep = failures["device_id"].astype(str).isin(devices) & (failures["ts"] <= features["ts"].max() + horizon)
    return failures[keep.to_numpy()]


@dataclass(frozen=True)
class FoldMean:
    """The mean probability of the out-of-fold models: the very models whose scores set the
    alert threshold, so the threshold means on new rows what it meant on those scores. A
    model refit on all rows scores on a scale of its own, higher on devices it never saw
    (docs/detection.md has the figures)."""

    models: tuple[lgb.LGBMClassifier, ...]

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        return np.mean([m.predict_proba(X) for m in self.models], axis=0)

    @property
    def feature_importances_(self) -> np.ndarray:
        return np.mean([m.feature_importances_ for m in self.models], axis=0)


class FaultPredictor(BaseEstimator):
    """P(device fails within [t + lead, t + horizon]) from its telemetry up to t.

    ``fit`` trains on feature rows (see :func:`build_fault_features`) and failures. Inside
    those rows only, it scores each tree setting of ``FaultPolicy.settings()`` out of fold
    (purged time blocks, or groups of devices: ``FaultPolicy.threshold_folds``), sets each
    one's threshold on its out-of-fold scores and keeps the best (``params_``). It then scores
    with the mean of that setting's fold models (``FaultPolicy.final_model="folds"``, whose
    scores set the threshold), or with the setting trained on all the rows (``"refit"``, also
    used when the out-of-fold scores set no threshold): the threshold is never tuned on rows
    the model has seen, and a split's scored span or devices (not given to ``fit``) touch no
    choice. ``threshold_rule_`` says which rule set the threshold
    (:data:`anomaly.fault_eval.THRESHOLD_RULES`; under ``max_f1_fallback`` the target
    precision was out of reach), ``oof_metrics_`` are the out-of-fold alert metrics at it
    (what to expect of the alerts), ``search_`` each setting's. Under ``threshold_folds="auto"``
    (the default: time folds) ``new_devices_`` is a second predictor, chosen on device folds,
    that scores the devices ``fit`` never saw (``devices_``), at its own threshold.
    """

    def __init__(self, policy: FaultPolicy | None = None, n_jobs: int = 1) -> None:
        self.policy = policy
        self.n_jobs = n_jobs  # fold models fitted at once (each on one thread: the same models)

    def _policy(self) -> FaultPolicy:
        return self.policy or FaultPolicy()

    def fit(self, features: pd.DataFrame, failures: pd.DataFrame) -> FaultPredictor:
        """Train on ``features`` (one row per device and time) labelled by ``failures``."""
        require_columns(features, ["device_id", "ts"], "fault features")
        policy = self._policy()
        failures = known_failures(features, failures, pd.Timedelta(policy.horizon))
        y = label_failures(features, failures, policy)
        if y.sum() == 0:
            raise ValueError("no failure falls within the horizon of any feature row: nothing to learn")
        # the newest event set, encoded by how often a failure followed such sets, as known by each row
        self.set_hazard_ = None if SET not in features else SetHazard().fit(
            features["device_id"].to_numpy(), features["ts"], features[SET].to_numpy(), features[SET_HOURS].to_numpy(),
            y, pd.Timedelta(policy.horizon))
        hazard = None if self.set_hazard_ is None else self.set_hazard_.encode(features[SET].to_numpy(), features["ts"])
        cols = feature_columns(features) + ([HAZARD] if hazard is not None else [])
        X = _matrix(features, cols, hazard)
        pos_weight = float(max((len(y) - y.sum()) / max(y.sum(), 1), 1.0)) ** 0.5
        folds = (_device_folds(features, policy) if policy.threshold_folds == "device"
                 else _time_folds(features, policy))
        settings = policy.settings() if folds is not None else policy.settings()[:1]
        best, search = None, []
        for params in settings:
            oof, fold_models = self._out_of_fold(X, y, folds, pos_weight, params)
            choice, metrics = self._threshold(features, failures, oof)
            finite = np.isfinite(oof) if oof is not None else np.zeros(len(y), dtype=bool)
            ap = (float(average_precision_score(y[finite], oof[finite]))
                  if 0 < y[finite].sum() < finite.sum() else float("nan"))
            # the threshold rule's own ranking first (target reached, by recall; else F1), then
            # the row-level average precision; the policy's own setting wins a full tie
            rank = (choice.key if choice is not None else (-np.inf,), -np.inf if np.isnan(ap) else ap)
            search.append({**params, "rule": choice.rule if choice else "default", "threshold": choice.threshold
                           if choice else 0.5, "oof_precision": metrics.get("precision", float("nan")),
                           "oof_recall": metrics.get("recall", float("nan")), "oof_ap": ap})
            if best is None or rank > best[0]:
                best = (rank, params, choice, metrics, fold_models)
            if choice is None:  # no out-of-fold failure to rank the settings on: the policy's own
                break
        _rank, params, choice, metrics, fold_models = best
        self.params_ = dict(params)
        self.search_ = search
        self.threshold_ = choice.threshold if choice is not None else 0.5
        self.threshold_rule_ = choice.rule if choice is not None else "default"
        self.oof_metrics_ = metrics
        self._warn_short_of_target(metrics)
        if policy.final_model == "folds" and fold_models and choice is not None:
            self.model_ = FoldMean(tuple(fold_models))
        else:
            self.model_ = _model(policy, pos_weight, params).fit(X, y)
        self.feature_columns_ = cols
        del X, hazard  # the new-device predictor builds its own: one matrix alive at a time
        self.devices_ = frozenset(features["device_id"].astype(str))
        # "auto": a device the fit never saw is scored as on inner device folds, where the
        # scoring models had not seen it either, at the threshold set there
        self.new_devices_ = None
        if policy.threshold_folds == "auto" and len(self.devices_) >= 2:
            self.new_devices_ = FaultPredictor(replace(policy, threshold_folds="device"), self.n_jobs)
            self.new_devices_.scope_ = "on devices new to the model"
            self.new_devices_.fit(features, failures)
            if self.new_devices_.threshold_rule_ == "default":  # no device fold scored a failure: no evidence
                log.info("fault alerts: no device fold scored a failure; devices new to the model are scored "
                         "as the known ones")
                self.new_devices_ = None
        return self

    def _threshold(self, features: pd.DataFrame, failures: pd.DataFrame,
                   oof: np.ndarray | None) -> tuple[ThresholdChoice | None, dict[str, float]]:
        """The alert threshold choice and its out-of-fold alert metrics; None (the classifier's
        own 0.5) when the out-of-fold scores hold no failure to set it on."""
        policy = self._policy()
        lead, horizon = pd.Timedelta(policy.lead), pd.Timedelta(policy.horizon)
        # a predictor of devices new to another one: that one says what it falls back to
        warn = log.info if getattr(self, "scope_", "") else log.warning
        if oof is None:
            warn("one device cannot be split into device folds; alert threshold defaults to 0.5")
            return None, {}
        scored = features.loc[np.isfinite(oof), ["device_id", "ts"]].assign(score=oof[np.isfinite(oof)])
        catchable = scorable_failures(scored, failures, lead, horizon)
        if catchable.empty:
            warn("fault alerts: no out-of-fold model that had a failure to learn from scored one (too "
                        "few training failures, or all in one fold); alert threshold defaults to 0.5")
            return None, {}
        choice = threshold_choice(scored, failures, lead, horizon, policy.target_precision, policy.cost_ratio)
        period = (scored["ts"].min(), scored["ts"].max())
        devices = sorted(scored["device_id"].astype(str).unique())
        alerts = dedup_alerts(scored, choice.threshold, horizon)
        # alerts are judged against every failure; recall counts only those some score could catch
        # (a failure in an unscored block sits inside the scored span too)
        metrics = score_alerts(alerts, failures, lead, horizon, period, devices)
        caught = score_alerts(alerts, catchable, lead, horizon, period, devices)
        metrics.update({k: caught[k] for k in ("events", "caught", "recall", "median_lead_hours")},
                       chance_precision=chance_precision(scored, failures, lead, horizon))
        return choice, metrics

    def _warn_short_of_target(self, m: dict[str, float]) -> None:
        """Say so when the out-of-fold alerts miss the target precision (too few failures to
        learn from, usually): the user asked for alerts that are right that often."""
        target = self._policy().target_precision
        if target is None or not m.get("events"):
            return
        scope = getattr(self, "scope_", "")
        alerts = f"fault alerts {scope}" if scope else "fault alerts"
        if self.threshold_rule_ == "none":
            log.warning("%s: no threshold catches a failure on out-of-fold scores (%d failures to "
                        "learn from): the predictor will not alert until it has seen more failures", alerts, m["events"])
        elif self.threshold_rule_ == "no_skill":
            log.warning("%s: on out-of-fold scores, no threshold that catches a failure is right more "
                        "often than alerts at random times would be by luck (chance precision %.2f, %d failures): "
                        "the telemetry does not tell the failing devices apart yet, so the predictor will not "
                        "alert", alerts, m["chance_precision"], m["events"])
        elif self.threshold_rule_ == "max_f1_fallback":
            log.warning("%s: no threshold reaches precision %.2f on out-of-fold scores (%d failures "
                        "to learn from); alerting at the best-F1 one (precision %.2f, recall %.2f), as warnings",
                        alerts, target, m["events"], m["precision"], m["recall"])

    def _out_of_fold(self, X: np.ndarray, y: np.ndarray, folds: list[tuple[np.ndarray, np.ndarray]] | None,
                     pos_weight: float, params: dict[str, int]
                     ) -> tuple[np.ndarray | None, list[lgb.LGBMClassifier]]:
        if folds is None:
            return None, []
        policy = self._policy()
        oof = np.full(len(y), np.nan)
        # a block inside a gap of the telemetry, or a model without a failure to learn from:
        # the block stays unscored
        used = [(train, test) for train, test in folds if test.any() and y[train].sum() > 0]

        def fit(train: np.ndarray, test: np.ndarray) -> tuple[lgb.LGBMClassifier, np.ndarray]:
            m = _model(policy, pos_weight, params).fit(X[train], y[train])
            return m, m.predict_proba(X[test])[:, 1]

        # each model is single-threaded and seeded, so fitting several at once changes nothing
        with ThreadPoolExecutor(max(1, min(self.n_jobs, len(used)))) as pool:
            done = list(pool.map(lambda fold: fit(*fold), used))
        for (_train, test), (_m, score) in zip(used, done):
            oof[test] = score
        return oof, [m for m, _score in done]

    def new_rows(self, features: pd.DataFrame) -> np.ndarray:
        """Rows of devices the fit never saw, which its device-fold predictor scores ("auto")."""
        check_fitted(self, "model_")
        if getattr(self, "new_devices_", None) is None:  # (a model from before "auto" has none)
            return np.zeros(len(features), dtype=bool)
        return ~features["device_id"].astype(str).isin(self.devices_).to_numpy()

    def predict_proba(self, features: pd.DataFrame) -> np.ndarray:
        """Failure probability per feature row."""
        check_fitted(self, "model_")
        new = self.new_rows(features)
        score = self.model_.predict_proba(self.design(features[~new]))[:, 1] if (~new).any() else np.empty(0)
        if not new.any():
            return score
        out = np.empty(len(features))
        out[~new] = score
        out[new] = self.new_devices_.predict_proba(features[new])
        return out

    def design(self, features: pd.DataFrame) -> np.ndarray:
        """The model's input matrix of ``features`` (the event set encoded by the fitted table)."""
        check_fitted(self, "model_")
        encoder = getattr(self, "set_hazard_", None)  # (a model from before event sets has none)
        hazard = (encoder.encode(features[SET].to_numpy(), features["ts"]) if encoder is not None and SET in features
                  else None)
        missing = [c for c in self.feature_columns_ if c not in features.columns and not (c == HAZARD and
                                                                                            hazard is not None)]
        if missing:
            log.info("feature(s) %s absent at predict time; treated as missing", missing)
        return _matrix(features, self.feature_columns_, hazard)

    def predict(self, features: pd.DataFrame) -> pd.DataFrame:
        """``device_id, ts, score, threshold, rule, new_device, alert`` per feature row (alert =
        score >= threshold: ``threshold_``, or for a device new to the model its predictor's)."""
        score = self.predict_proba(features)
        new = self.new_rows(features)
        other = self.new_devices_ if new.any() else self
        threshold = np.where(new, other.threshold_, self.threshold_)
        rule = np.where(new, other.threshold_rule_, self.threshold_rule_)
        return features[["device_id", "ts"]].assign(score=score, threshold=threshold, rule=rule, new_device=new,
                                                    alert=score >= threshold)


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
