"""The global LightGBM learns a small, regular series as closely as a big, noisy one."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasters.lgbm import LGBMForecaster, LGBMParams


def _panel() -> pd.DataFrame:
    """One small series with an exact daily shape (as M4's H-series at levels of 15-25) beside
    big noisy ones a thousand times its size."""
    rng = np.random.default_rng(0)
    ds = pd.date_range("2026-01-01", periods=24 * 30, freq="h")
    hours = np.arange(len(ds))
    shape = np.r_[np.full(8, 12.0), np.linspace(12, 25, 8), np.full(8, 18.0)]
    frames = [pd.DataFrame({"unique_id": "small", "ds": ds, "y": np.tile(shape, 30) + rng.normal(0, 0.05, len(ds))})]
    for i in range(6):
        big = 20_000 * (1 + 0.4 * np.sin(2 * np.pi * (hours + 5 * i) / 24)) * rng.lognormal(0, 0.25, len(ds))
        frames.append(pd.DataFrame({"unique_id": f"big{i}", "ds": ds, "y": big}))
    return pd.concat(frames, ignore_index=True)


def _small_error(weighting: str) -> float:
    data = _panel()
    train = data.groupby("unique_id").head(24 * 28)
    test = data.drop(train.index)
    model = LGBMForecaster(horizon=48, calibration_origins=24, lgbm=LGBMParams(weighting=weighting, n_estimators=150))
    fc = model.fit(train).predict(48)
    f = fc.loc[fc["unique_id"] == "small", "mean"].to_numpy()
    return float(np.mean(np.abs(test.loc[test["unique_id"] == "small", "y"].to_numpy() - f)))


def test_equal_weights_learn_the_small_series_that_scale_weights_neglect() -> None:
    equal, scaled = _small_error("equal"), _small_error("scale")
    assert equal < scaled
    assert equal < 0.5  # within a few percent of a level of 12-25


def test_an_unknown_weighting_is_refused() -> None:
    with pytest.raises(ValueError, match="weighting must be 'equal' or 'scale'"):
        LGBMForecaster(horizon=24, calibration_origins=24, lgbm=LGBMParams(weighting="wape")).fit(
            _panel().groupby("unique_id").head(24 * 10))


def test_the_row_median_is_numpys_nanmedian() -> None:
    """The fast median of the seasonal features equals np.nanmedian, NaN rows included."""
    from forecasters.features import row_nanmedian

    rng = np.random.default_rng(0)
    for width in (1, 2, 7, 24):
        a = rng.normal(size=(2000, width))
        a[rng.random(a.shape) < 0.3] = np.nan
        some = ~np.isnan(a).all(axis=1)
        expected = np.full(len(a), np.nan)
        expected[some] = np.nanmedian(a[some], axis=1)
        np.testing.assert_array_equal(row_nanmedian(a), expected)


@pytest.mark.parametrize("name", ["seasonal_naive", "lgbm"])
def test_one_odd_series_leaves_the_other_series_bands_alone(name: str) -> None:
    """The conformal quantiles are pooled over the series: a series idle until its last day
    (its volatility unmeasurable before), one in other units (x 1e10) or one at its minimum
    length must not widen the bands of the others (was 3.4e8 instead of 2.6 for the idle one)."""
    import forecasters
    from tests.forecasters.conftest import make_panel

    n = 504
    base = make_panel(2, n, seed=1)
    late = make_panel(1, n, seed=7)["y"].to_numpy()
    odd = {
        "idle": pd.DataFrame({"unique_id": "x", "ds": base["ds"][:n].to_numpy(),
                              "y": np.r_[np.zeros(n - 24), late[-24:]]}),
        "bytes": base[base["unique_id"] == "s0"].assign(unique_id="x", y=lambda d: d["y"] * 1e10),
        "short": make_panel(1, 49, seed=3).assign(unique_id="x"),
    }

    def widths(frame: pd.DataFrame) -> pd.Series:
        f = forecasters.create(name).fit(frame).predict()
        return (f["hi_95"] - f["lo_95"]).groupby(f["unique_id"]).mean()

    alone = widths(base)
    for what, extra in odd.items():
        if what == "short" and name != "seasonal_naive":
            continue  # below lgbm's minimum
        got = widths(pd.concat([base, extra], ignore_index=True)).drop("x")
        assert (got / alone).between(0.8, 1.3).all(), (what, got.to_dict(), alone.to_dict())
