"""Metrics against values worked out by hand."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasters import metrics

Y = np.array([10.0, 20.0, 30.0, 40.0])
F = np.array([12.0, 18.0, 30.0, 36.0])  # errors 2, -2, 0, -4


def test_point_metrics() -> None:
    assert metrics.mae(Y, F) == pytest.approx(2.0)  # (2+2+0+4)/4
    assert metrics.rmse(Y, F) == pytest.approx(np.sqrt(6.0))  # (4+4+0+16)/4
    assert metrics.wape(Y, F) == pytest.approx(8 / 100)
    # 200/4 * (2/22 + 2/38 + 0 + 4/76)
    assert metrics.smape(Y, F) == pytest.approx(50 * (2 / 22 + 2 / 38 + 4 / 76))


def test_smape_bounds_and_zeros() -> None:
    assert metrics.smape([0.0, 0.0], [0.0, 0.0]) == 0.0
    assert metrics.smape([0.0], [5.0]) == pytest.approx(200.0)
    assert np.isnan(metrics.wape([0.0], [1.0]))


def test_mase_uses_in_sample_seasonal_naive() -> None:
    insample = np.array([1.0, 2.0, 4.0, 3.0, 5.0, 8.0])  # season 3: |3-1|,|5-2|,|8-4| -> mean 3
    assert metrics.seasonal_naive_scale(insample, 3) == pytest.approx(3.0)
    assert metrics.mase(Y, F, insample, 3) == pytest.approx(2.0 / 3.0)


def test_coverage_and_msis() -> None:
    lo = np.array([9.0, 21.0, 25.0, 30.0])
    hi = np.array([11.0, 25.0, 35.0, 39.0])
    assert metrics.coverage(Y, lo, hi) == pytest.approx(0.5)  # 10 in, 20 below, 30 in, 40 above
    insample = np.array([1.0, 2.0, 4.0, 3.0, 5.0, 8.0])
    # widths 2,4,10,9 = 25; penalties 2/0.05*(21-20)=40 and 2/0.05*(40-39)=40 -> (25+80)/4 / 3
    assert metrics.msis(Y, lo, hi, insample, 3) == pytest.approx((25 + 80) / 4 / 3)


def test_evaluate_per_model() -> None:
    ds = pd.date_range("2024-01-01", periods=8, freq="h")
    history = pd.DataFrame({"unique_id": "a", "ds": ds, "y": [1.0, 2, 4, 3, 5, 8, 10, 20]})
    cv = pd.DataFrame({
        "unique_id": "a", "ds": ds[6:], "cutoff": ds[5], "model": "m", "y": [10.0, 20.0],
        "mean": [12.0, 18.0], "lo_80": [9.0, 21.0], "hi_80": [11.0, 25.0], "lo_95": [9.0, 21.0], "hi_95": [11.0, 25.0],
    })
    row = metrics.evaluate(cv, history, season_length=3).iloc[0]
    assert row["model"] == "m"
    assert row["wape"] == pytest.approx(4 / 30)
    assert row["mase"] == pytest.approx(2.0 / 3.0)  # scale from the 6 points up to the cutoff
    assert row["coverage_80"] == pytest.approx(0.5)


def test_per_series_metrics_equal_utilsforecast() -> None:
    """The hand-written metrics agree with utilsforecast's (statsforecast's own metrics library)
    on every (series, cutoff): sMAPE (ours in M4's 0-200 scale, theirs 0-1), MASE, MAE and
    coverage. Kept as plain numpy because the backtest pools WAPE and coverage over points."""
    from utilsforecast import losses

    rng = np.random.default_rng(3)
    hist = pd.DataFrame({"unique_id": np.repeat(["a", "b"], 60),
                         "ds": np.tile(pd.date_range("2026-01-01", periods=60, freq="h"), 2),
                         "y": rng.gamma(2.0, 10.0, 120)})
    rows = []
    for _uid, g in hist.groupby("unique_id"):
        for cutoff in (g["ds"].iloc[39], g["ds"].iloc[47]):
            fut = g[(g["ds"] > cutoff)].head(12)
            fc = fut["y"].to_numpy() + rng.normal(0, 5, len(fut))
            rows.append(fut.assign(cutoff=cutoff, f=fc, **{"f-lo-80": fc - 6, "f-hi-80": fc + 6}))
    cv = pd.concat(rows, ignore_index=True)
    theirs = {
        "smape": losses.smape(cv, ["f"]), "mae": losses.mae(cv, ["f"]),
        "mase": losses.mase(cv, ["f"], 24, hist), "coverage": losses.coverage(cv, ["f"], 80),
    }
    for (uid, cutoff), g in cv.groupby(["unique_id", "cutoff"]):
        insample = hist.loc[(hist["unique_id"] == uid) & (hist["ds"] <= cutoff), "y"].to_numpy()
        ours = {
            "smape": metrics.smape(g["y"], g["f"]) / 200, "mae": metrics.mae(g["y"], g["f"]),
            "mase": metrics.mase(g["y"], g["f"], insample, 24),
            "coverage": metrics.coverage(g["y"], g["f-lo-80"], g["f-hi-80"]),
        }
        for name, table in theirs.items():
            row = table[(table["unique_id"] == uid) & (table["cutoff"] == cutoff)]
            assert ours[name] == pytest.approx(float(row["f"].iloc[0])), (name, uid, cutoff)
