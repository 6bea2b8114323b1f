"""Spot-price-spike predictor (LightGBM) and the persistence baseline."""
from __future__ import annotations

import lightgbm as lgb
import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.metrics import precision_recall_curve

from anomaly.base import check_fitted, require_columns
from anomaly.spike_features import SERIES_KEY, SpikePolicy, build_spike_frame, spike_feature_columns


def f1_threshold(y: np.ndarray, score: np.ndarray) -> float:
    """The score threshold with the best F1 (0.5 when y has one class)."""
    if y.sum() == 0 or y.sum() == len(y):
        return 0.5
    p, r, t = precision_recall_curve(y, score)
    f1 = 2 * p[:-1] * r[:-1] / np.maximum(p[:-1] + r[:-1], 1e-12)
    return float(t[int(np.argmax(f1))])


class SpikePredictor(BaseEstimator):
    """P(spike within the horizon) per grid row of :func:`build_spike_frame`."""

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
        """Train on labelled rows; the alert threshold maximises F1 on the time tail."""
        require_columns(frame, ["ts", "label"], "spike frame")
        p = self.policy or SpikePolicy()
        rows = frame[frame["label"].notna()]
        if rows["label"].nunique() < 2:
            every = "a spike ahead" if rows["label"].iloc[0] == 1 else "no spike ahead"
            raise ValueError(f"spike labels have a single class: every training hour has {every} (price >= "
                             f"{p.k:g} x its trailing median, or >= the on-demand price): nothing to learn")
        cols = spike_feature_columns(rows)
        X, y = rows[cols].to_numpy(dtype=float), rows["label"].to_numpy(dtype=int)
        start, end = rows["ts"].min(), rows["ts"].max()
        cut = start + (end - start) * (1 - p.validation_fraction)
        embargo = cut - pd.Timedelta(p.horizon)
        early, late = (rows["ts"] < embargo).to_numpy(), (rows["ts"] >= cut).to_numpy()
        if y[early].min() != y[early].max() and late.any():
            val = self._model().fit(X[early], y[early]).predict_proba(X[late])[:, 1]
            self.threshold_ = f1_threshold(y[late], val)
        else:
            self.threshold_ = 0.5
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
    ``max(ratio / k, price / on-demand)``, and the alert is "spiking now" (score >= 1)."""

    def __init__(self, k: float = 2.0) -> None:
        self.k = k

    def fit(self, frame: pd.DataFrame) -> PersistenceSpikeBaseline:
        """Nothing to learn; checks the frame and marks the baseline fitted."""
        require_columns(frame, ["ratio", "od_ratio"], "spike frame")
        self.threshold_ = 1.0
        return self

    def predict_proba(self, frame: pd.DataFrame) -> np.ndarray:
        """Current severity (not a probability; only its ranking matters for AUC)."""
        check_fitted(self, "threshold_")
        sev = np.fmax(frame["ratio"].to_numpy(dtype=float) / self.k, frame["od_ratio"].to_numpy(dtype=float))
        return np.nan_to_num(sev, nan=0.0)

    def predict(self, frame: pd.DataFrame) -> np.ndarray:
        """1 where the series is spiking now."""
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
