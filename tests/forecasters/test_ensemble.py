"""The ensemble weighs its members by their backtest error and calibrates its own intervals."""
from __future__ import annotations

import numpy as np
import pytest

import forecasters
from forecasters.ensemble import EnsembleForecaster

from .conftest import make_panel


def test_the_better_member_weighs_more_and_a_far_worse_one_nothing() -> None:
    panel = make_panel(n_series=3, length=24 * 12)
    both = EnsembleForecaster(horizon=12, calibration_origins=8, members="seasonal_naive,lgbm", drop_ratio=100.0)
    both.fit(panel)
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
    ("lgbm", "median", "weights must be one of"),
])
def test_bad_ensembles_are_refused(members: str, weights: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        EnsembleForecaster(horizon=12, members=members, weights=weights).fit(make_panel())
