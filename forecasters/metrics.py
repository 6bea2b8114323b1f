"""Point and interval accuracy metrics (plain numpy; NaN-free inputs expected)."""
from __future__ import annotations

import numpy as np
import pandas as pd


def mae(y: np.ndarray, yhat: np.ndarray) -> float:
    """Mean absolute error."""
    return float(np.mean(np.abs(np.asarray(y) - np.asarray(yhat))))


def rmse(y: np.ndarray, yhat: np.ndarray) -> float:
    """Root mean squared error."""
    return float(np.sqrt(np.mean((np.asarray(y) - np.asarray(yhat)) ** 2)))


def wape(y: np.ndarray, yhat: np.ndarray) -> float:
    """Weighted absolute percentage error: sum |error| / sum |y| (NaN when sum |y| is 0)."""
    denom = float(np.sum(np.abs(y)))
    return float(np.sum(np.abs(np.asarray(y) - np.asarray(yhat))) / denom) if denom > 0 else float("nan")


def smape(y: np.ndarray, yhat: np.ndarray) -> float:
    """M4 symmetric MAPE in percent (0-200); a point where both are 0 counts as 0."""
    y, yhat = np.asarray(y, dtype=float), np.asarray(yhat, dtype=float)
    denom = np.abs(y) + np.abs(yhat)
    ratio = np.divide(2 * np.abs(y - yhat), denom, out=np.zeros_like(denom), where=denom > 0)
    return float(100 * np.mean(ratio))


def seasonal_naive_scale(insample: np.ndarray, season_length: int) -> float:
    """Mean absolute in-sample seasonal-naive error (lag 1 when the series is too short)."""
    x = np.asarray(insample, dtype=float)
    m = season_length if len(x) > season_length else 1
    if len(x) <= m:
        return float("nan")
    return float(np.mean(np.abs(x[m:] - x[:-m])))


def mase(y: np.ndarray, yhat: np.ndarray, insample: np.ndarray, season_length: int) -> float:
    """Mean absolute scaled error (M4): MAE over the in-sample seasonal-naive MAE."""
    scale = seasonal_naive_scale(insample, season_length)
    return mae(y, yhat) / scale if scale > 0 else float("nan")


def coverage(y: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> float:
    """Share of actuals inside [lo, hi]."""
    y = np.asarray(y)
    return float(np.mean((y >= np.asarray(lo)) & (y <= np.asarray(hi))))


def msis(
    y: np.ndarray, lo: np.ndarray, hi: np.ndarray, insample: np.ndarray, season_length: int, alpha: float = 0.05
) -> float:
    """Mean scaled interval score (M4) of a (1 - alpha) interval."""
    y, lo, hi = (np.asarray(a, dtype=float) for a in (y, lo, hi))
    score = (hi - lo) + (2 / alpha) * (lo - y) * (y < lo) + (2 / alpha) * (y - hi) * (y > hi)
    scale = seasonal_naive_scale(insample, season_length)
    return float(np.mean(score) / scale) if scale > 0 else float("nan")


def _nanmean(values: list[float]) -> float:
    finite = [v for v in values if not np.isnan(v)]
    return float(np.mean(finite)) if finite else float("nan")


def evaluate(
    cv: pd.DataFrame, history: pd.DataFrame, season_length: int, level: tuple[int, ...] = (80, 95)
) -> pd.DataFrame:
    """Metrics per model from a :func:`forecasters.backtest.cross_validation` frame.

    MASE and MSIS are averaged over (series, cutoff) with the scale taken from the
    history up to that cutoff; WAPE, sMAPE, MAE, RMSE and coverage pool all points.
    """
    hist = history.sort_values(["unique_id", "ds"])
    groups = {uid: g for uid, g in hist.groupby("unique_id", sort=False)}
    rows = []
    for model, part in cv.groupby("model", sort=False):
        scaled_ae, interval = [], []
        for (uid, cutoff), g in part.groupby(["unique_id", "cutoff"], sort=False):
            series = groups[uid]
            insample = series.loc[series["ds"] <= cutoff, "y"].to_numpy()
            scaled_ae.append(mase(g["y"], g["mean"], insample, season_length))
            if "lo_95" in g:
                interval.append(msis(g["y"], g["lo_95"], g["hi_95"], insample, season_length))
        row = {
            "model": model,
            "mae": mae(part["y"], part["mean"]),
            "rmse": rmse(part["y"], part["mean"]),
            "wape": wape(part["y"], part["mean"]),
            "smape": smape(part["y"], part["mean"]),
            # NaN where no series has a scale (all flat in-sample), without numpy's warning
            "mase": _nanmean(scaled_ae),
            "msis": _nanmean(interval),
        }
        for lv in level:
            if f"lo_{lv}" in part:
                row[f"coverage_{lv}"] = coverage(part["y"], part[f"lo_{lv}"], part[f"hi_{lv}"])
        rows.append(row)
    return pd.DataFrame(rows)
