"""Baselines for the burst detector, on the very same residuals as the CUSUM.

* :class:`ThresholdDetector`: a burst starts when |z| first exceeds ``sigma`` (3-sigma rule).
* :class:`PeltDetector`: ruptures' Pelt change points on z, its penalty calibrated on
  history to the same false-alarm target as the CUSUM. Pelt is offline: it sees the
  whole batch, so its "detection time" is the change point itself (an optimistic delay).
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pandas as pd
import ruptures as rpt
from sklearn.base import BaseEstimator

from anomaly.base import check_fitted, require_columns
from anomaly.cusum import CusumPolicy, CusumState, events_frame, fit_state, residuals


def _fit_states(history: pd.DataFrame, season_length: int, n_seasons: int) -> dict[str, CusumState]:
    """Baseline memory and MAD scale per series (no k/h calibration needed)."""
    require_columns(history, ["unique_id", "ds", "y"], "burst history")
    policy = CusumPolicy(season_length=season_length, n_seasons=n_seasons, k=0.0, h=0.0)
    return {
        str(uid): fit_state(str(uid), g["ds"], g["y"], policy)
        for uid, g in history.sort_values(["unique_id", "ds"]).groupby("unique_id", sort=True)
    }


def _batch_residuals(
    states: dict[str, CusumState], frame: pd.DataFrame, clip: bool = True
) -> Iterator[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
    """(unique_id, index, residual, z) per known series of a batch, in id order."""
    require_columns(frame, ["unique_id", "ds", "y"], "burst frame")
    for uid, g in frame.sort_values(["unique_id", "ds"]).groupby("unique_id", sort=True):
        st = states.get(str(uid))
        if st is None:
            continue
        index, _v, resid, z, _m = residuals(st if clip else replace(st, clip_sigma=np.inf), g["ds"], g["y"])
        yield str(uid), index, resid, z


class ThresholdDetector(BaseEstimator):
    """The 3-sigma rule on seasonal, MAD-standardised residuals."""

    def __init__(self, sigma: float = 3.0, season_length: int = 24, n_seasons: int = 4) -> None:
        self.sigma = sigma
        self.season_length = season_length
        self.n_seasons = n_seasons

    def fit(self, history: pd.DataFrame) -> ThresholdDetector:
        """Learn each series' scale and baseline memory."""
        self.states_ = _fit_states(history, self.season_length, self.n_seasons)
        return self

    def predict(self, frame: pd.DataFrame) -> pd.DataFrame:
        """One event per run of consecutive points beyond ``sigma`` in the same direction."""
        check_fitted(self, "states_")
        events: list[dict[str, object]] = []
        for uid, index, resid, z in _batch_residuals(self.states_, frame, clip=False):
            side = np.where(z > self.sigma, 1, np.where(z < -self.sigma, -1, 0))
            starts = np.nonzero((side != 0) & (side != np.concatenate([[0], side[:-1]])))[0]
            for i in starts:
                events.append({
                    "unique_id": uid, "direction": "up" if side[i] > 0 else "down",
                    "onset": index[i], "detected_at": index[i], "peak_z": abs(float(z[i])),
                    "peak_residual": float(resid[i]), "detector": "threshold_3sigma",
                })
        return events_frame(events)


class PeltDetector(BaseEstimator):
    """ruptures Pelt (l2 cost) on the residual z-scores; penalty calibrated on history."""

    def __init__(self, season_length: int = 24, n_seasons: int = 4, penalty: float | None = None,
                 target_arl: str = "7D", min_size: int = 3, jump: int = 1) -> None:
        self.season_length = season_length
        self.n_seasons = n_seasons
        self.penalty = penalty
        self.target_arl = target_arl
        self.min_size = min_size
        self.jump = jump

    def _breaks(self, z: np.ndarray, pen: float) -> list[int]:
        signal = np.nan_to_num(z, nan=0.0).reshape(-1, 1)
        if len(signal) < 2 * self.min_size:
            return []
        algo = rpt.Pelt(model="l2", min_size=self.min_size, jump=self.jump).fit(signal)
        return [b for b in algo.predict(pen=pen) if b < len(signal)]

    def fit(self, history: pd.DataFrame) -> PeltDetector:
        """Scale, memory and (unless given) a penalty per series from ``history``."""
        states = _fit_states(history, self.season_length, self.n_seasons)
        penalties: dict[str, float] = {}
        for uid, g in history.sort_values(["unique_id", "ds"]).groupby("unique_id", sort=True):
            st = states[str(uid)]
            if self.penalty is not None:
                penalties[str(uid)] = float(self.penalty)
                continue
            blank = replace(st, last_ts=None, memory=tuple([np.nan] * len(st.memory)))
            _i, _v, _r, z, _m = residuals(blank, g["ds"], g["y"])
            allowed = len(z) * st.freq_s / pd.Timedelta(self.target_arl).total_seconds()
            penalties[str(uid)] = self._calibrate(z, allowed)
        self.states_ = states
        self.penalties_ = penalties
        return self

    def _calibrate(self, z: np.ndarray, allowed: float) -> float:
        """Smallest penalty (bisection in log space) giving at most ``allowed`` change points."""
        lo, hi = 1.0, 1e5
        if len(self._breaks(z, lo)) <= allowed:
            return lo
        for _ in range(14):
            mid = float(np.sqrt(lo * hi))
            if len(self._breaks(z, mid)) <= allowed:
                hi = mid
            else:
                lo = mid
        return hi

    def predict(self, frame: pd.DataFrame) -> pd.DataFrame:
        """One event per change point in the batch."""
        check_fitted(self, "states_")
        events: list[dict[str, object]] = []
        for uid, index, resid, z in _batch_residuals(self.states_, frame):
            breaks = self._breaks(z, self.penalties_[uid])
            bounds = [0, *breaks, len(z)]
            for j, b in enumerate(breaks):
                before = np.nanmean(z[bounds[j]:b]) if b > bounds[j] else 0.0
                after_seg = z[b:bounds[j + 2]]
                after = np.nanmean(after_seg) if after_seg.size else 0.0
                events.append({
                    "unique_id": uid, "direction": "up" if after >= before else "down",
                    "onset": index[b], "detected_at": index[b],
                    "peak_z": float(np.nanmax(np.abs(after_seg))) if after_seg.size else 0.0,
                    "peak_residual": float(np.nanmean(resid[b:bounds[j + 2]])),
                    "detector": "pelt",
                })
        return events_frame(events)
