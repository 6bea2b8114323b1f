"""The estimator conventions the core shares: scikit-learn's parameters, one not-fitted
error, hyperparameter groups declared once, artifacts that keep their bytes."""
from __future__ import annotations

import dataclasses
import pickle

import pandas as pd
import pytest
import sklearn.exceptions
from sklearn.base import clone

import anomaly.base
import forecasters
from anomaly.cusum import CusumDetector
from forecasters import LGBMParams, ProphetParams, dumps, loads
from forecasters.hybrid import ProphetLGBM
from forecasters.lgbm import LGBMForecaster

# what the model registry stores and hashes for each model's defaults (seed 3): a changed
# default, or a changed spelling of one, changes every model id
FLAT_DEFAULTS = {
    "lgbm": {"horizon": 24, "freq": "h", "season_length": 24, "calibration_origins": 336, "n_estimators": 150,
             "learning_rate": 0.1, "num_leaves": 31, "min_child_samples": 20, "objective": "l1",
             "max_train_points": 1344, "max_rows": 60000, "weighting": "equal", "n_jobs": 1, "seed": 3},
    "prophet": {"horizon": 24, "freq": "h", "season_length": 24, "calibration_origins": 336, "n_changepoints": 10,
                "changepoint_prior_scale": 0.003, "max_fit_points": 672, "max_fourier_order": 80,
                "fourier_divisor": 2, "n_jobs": 2},
    "prophet_lgbm": {"horizon": 24, "freq": "h", "season_length": 24, "calibration_origins": 336,
                     "n_changepoints": 10, "changepoint_prior_scale": 0.05, "max_fit_points": 672,
                     "max_fourier_order": 10, "fourier_divisor": 4, "prophet_jobs": 2,
                     "n_estimators": 150, "learning_rate": 0.1, "num_leaves": 31, "min_child_samples": 20,
                     "objective": "l1", "max_train_points": 1008, "max_rows": 60000, "weighting": "equal",
                     "boost_target": "anchor", "feature_holdout": 336, "plain_share": 0.5,
                     "plain_train_points": 1344, "lgbm_jobs": 1, "seed": 3},
}


def test_not_fitted_is_one_class_with_clear_messages() -> None:
    assert forecasters.NotFittedError is anomaly.base.NotFittedError is sklearn.exceptions.NotFittedError
    with pytest.raises(forecasters.NotFittedError, match=r"^lgbm is not fitted yet: call fit\(history\) before predict"):
        forecasters.create("lgbm").predict()
    frame = pd.DataFrame({"unique_id": ["a"], "ds": [pd.Timestamp("2024-01-01")], "y": [1.0]})
    with pytest.raises(forecasters.NotFittedError, match=r"^CusumDetector is not fitted yet: call fit\(\)"):
        CusumDetector().predict(frame)


@pytest.mark.parametrize("group", [LGBMParams(), ProphetParams()])
def test_parameter_groups_are_frozen(group: object) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        group.learning_rate = 1.0  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", sorted(FLAT_DEFAULTS))
def test_flat_params_spell_out_the_groups(name: str) -> None:
    model = forecasters.create(name, seed=3)
    assert model.flat_params() == FLAT_DEFAULTS[name]
    assert all(isinstance(v, int | float | str) for v in model.flat_params().values())


@pytest.mark.parametrize("name", forecasters.available())
def test_sklearn_clone_and_set_params_round_trip(name: str) -> None:
    model = forecasters.create(name, horizon=6, seed=2)
    copy = clone(model)
    assert type(copy) is type(model) and copy is not model
    assert copy.get_params() == model.get_params() and copy.flat_params() == model.flat_params()
    assert copy.set_params(horizon=12) is copy and copy.horizon == 12 and model.horizon == 6


def test_a_group_is_replaced_whole() -> None:
    model = ProphetLGBM().set_params(lgbm=dataclasses.replace(ProphetLGBM().lgbm, n_estimators=5))
    assert model.lgbm == LGBMParams(n_estimators=5, max_train_points=24 * 42)  # the hybrid's default kept
    assert model.flat_params()["n_estimators"] == 5
    assert "n_estimators=5" in repr(model)


def test_artifacts_are_flat_and_flat_artifacts_load() -> None:
    model = LGBMForecaster(horizon=6, lgbm=LGBMParams(num_leaves=7), seed=4)
    data = dumps(model)
    assert b"LGBMParams" not in data  # one plain entry per hyperparameter
    back = loads(data)
    assert back.get_params() == model.get_params() and list(vars(back)) == list(vars(model))
    # a state with some fields of a group missing: each takes the model's default
    legacy = ProphetLGBM.__new__(ProphetLGBM)
    legacy.__setstate__({"horizon": 6, "freq": "h", "season_length": 24, "calibration_origins": 8,
                         "n_changepoints": 3, "prophet_jobs": 1, "n_estimators": 20, "boost_target": "anchor",
                         "lgbm_jobs": 1, "seed": 0})
    assert legacy.prophet == ProphetParams(n_changepoints=3)
    assert legacy.lgbm == LGBMParams(n_estimators=20, max_train_points=24 * 42)
    assert list(vars(legacy)) == list(vars(ProphetLGBM()))
    assert legacy.feature_holdout == 0  # fit before out-of-sample features: in-sample, as it was
    assert legacy.plain_share == 0.0  # and before the plain booster: Prophet-fed booster alone
    assert legacy.plain_train_points == 24 * 42  # a plain booster then trained as the hybrid's own
    assert pickle.loads(pickle.dumps(legacy)).get_params() == legacy.get_params()
