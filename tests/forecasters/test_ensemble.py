"""The ensemble weighs its members by their backtest error and calibrates its own intervals."""
from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest

import forecasters
from forecasters.ensemble import EnsembleForecaster

from .conftest import make_panel


def test_the_better_member_weighs_more_and_a_far_worse_one_nothing() -> None:
    panel = make_panel(n_series=3, length=24 * 12)
    both = EnsembleForecaster(horizon=12, calibration_origins=8, members="seasonal_naive,lgbm", drop_ratio=100.0)
    both.fit(panel)
    assert len(both.group_weights_) == 1  # three series: too few for more than one group
    w = both.member_weights_
    assert set(w) == {"seasonal_naive", "lgbm"} and sum(w.values()) == pytest.approx(1.0)
    strict = EnsembleForecaster(horizon=12, calibration_origins=8, members="seasonal_naive,lgbm", drop_ratio=1.0)
    strict.fit(panel)
    assert sorted(strict.member_weights_.values()) == [0.0, 1.0]  # only the best member is kept
    best = max(w, key=w.get)
    alone = forecasters.get(best)(horizon=12, calibration_origins=8).fit(panel).predict()
    np.testing.assert_allclose(strict.predict()["mean"], alone["mean"], rtol=1e-9)
    mean = EnsembleForecaster(horizon=12, calibration_origins=8, members="seasonal_naive,lgbm", weights="mean")
    assert mean.fit(panel).member_weights_ == {"seasonal_naive": 0.5, "lgbm": 0.5}
    fc = both.predict(level=(80, 95))
    assert (fc["lo_95"] <= fc["lo_80"]).all() and (fc["hi_80"] <= fc["hi_95"]).all()  # its own intervals


@pytest.mark.parametrize(("members", "weights", "match"), [
    ("", "mean", "members must name"), ("lgbm,ensemble", "mean", "members must name"),
    ("lgbm", "median", "weights must be one of"), ("lgbm", "inverse_error:0", "groups must be at least 1"),
])
def test_bad_ensembles_are_refused(members: str, weights: str, match: str) -> None:
    weights, _, groups = weights.partition(":")
    with pytest.raises(ValueError, match=match):
        EnsembleForecaster(horizon=12, members=members, weights=weights, groups=int(groups or 8)).fit(make_panel())


def _regular_and_noisy(n_each: int = 20, length: int = 24 * 12) -> pd.DataFrame:
    """Series that repeat one day exactly, and series with noise on the same shape."""
    rng = np.random.default_rng(1)
    t = np.arange(length)
    ds = pd.date_range("2024-01-01", periods=length, freq="h")
    frames = []
    for i in range(2 * n_each):
        shape = (20 + i) * (1 + 0.3 * np.sin(2 * np.pi * t / 24))
        y = shape if i < n_each else shape + rng.normal(0, 0.15 * (20 + i), length)
        frames.append(pd.DataFrame({"unique_id": f"{'r' if i < n_each else 'n'}{i:02d}", "ds": ds, "y": y}))
    return pd.concat(frames, ignore_index=True)


def test_each_group_of_alike_series_gets_its_own_weights() -> None:
    panel = _regular_and_noisy()
    model = EnsembleForecaster(horizon=12, calibration_origins=8, members="seasonal_naive,lgbm", groups=2)
    model.fit(panel)
    assert len(model.group_weights_) == 2 and len(model.edges_) == 1
    regular, noisy = model.group_weights_  # groups in order of regularity: the exact series first
    names = [m.name for m in model.members_]
    assert regular[names.index("seasonal_naive")] == 1.0  # exact there: the booster is dropped
    assert noisy[names.index("lgbm")] > noisy[names.index("seasonal_naive")]
    fc = model.predict()
    naive = forecasters.get("seasonal_naive")(horizon=12, calibration_origins=8).fit(panel).predict()
    exact = fc["unique_id"].str.startswith("r")
    np.testing.assert_allclose(fc.loc[exact, "mean"], naive.loc[exact.to_numpy(), "mean"], rtol=1e-9)
    assert not np.allclose(fc.loc[~exact, "mean"], naive.loc[~exact.to_numpy(), "mean"])
    one = EnsembleForecaster(horizon=12, calibration_origins=8, members="seasonal_naive,lgbm", groups=1).fit(panel)
    assert len(one.group_weights_) == 1 and len(one.edges_) == 0


def test_an_ensemble_saved_before_groups_still_forecasts() -> None:
    panel = make_panel(n_series=3, length=24 * 12)
    model = EnsembleForecaster(horizon=12, calibration_origins=8, members="seasonal_naive,lgbm", groups=1).fit(panel)
    expected = model.predict()["mean"].to_numpy()
    state = model.__getstate__()
    del state["groups"], state["group_weights_"], state["edges_"]  # what an older release pickled
    legacy = EnsembleForecaster.__new__(EnsembleForecaster)
    legacy.__setstate__(state)
    assert legacy.groups == 1 and list(legacy.get_params()) == list(EnsembleForecaster().get_params())
    np.testing.assert_allclose(pickle.loads(pickle.dumps(legacy)).predict()["mean"], expected, rtol=1e-9)
