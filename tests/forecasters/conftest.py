"""Tiny synthetic panels and fast model settings for the forecaster tests."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

import forecasters
from forecasters.base import BaseForecaster

H = 12
SEASON = 24

# Fast settings per model: the contract does not need good forecasts, only real ones. A dict
# changes those fields of a parameter group (``lgbm``, ``prophet``) and keeps the model's others.
FAST: dict[str, dict[str, object]] = {
    "seasonal_naive": {},
    "ets": {"window_cycles": 4},
    "prophet": {"prophet": {"n_changepoints": 3}, "n_jobs": 1},
    "lgbm": {"lgbm": {"n_estimators": 20, "num_leaves": 7}},
    "prophet_lgbm": {"prophet": {"n_changepoints": 3}, "prophet_jobs": 1,
                     "lgbm": {"n_estimators": 20, "num_leaves": 7}},
    "lstm": {"max_epochs": 2, "hidden_size": 8, "samples_per_epoch": 256, "input_length": 24, "val_points": 24},
    "ensemble": {"members": "seasonal_naive,lgbm", "drop_ratio": 10.0},
}
SLOW = {"prophet", "prophet_lgbm", "lstm"}


def make_model(name: str, horizon: int = H, freq: str | None = "h", season_length: int = SEASON) -> BaseForecaster:
    """A model from the registry with fast test settings."""
    base = forecasters.get(name)(horizon=horizon, freq=freq, season_length=season_length, calibration_origins=8)
    fast = {k: replace(getattr(base, k), **v) if isinstance(v, dict) else v for k, v in FAST[name].items()}
    return base.set_params(**fast)


def make_panel(
    n_series: int = 2, length: int = 24 * 10, seed: int = 0, freq: str | None = "h", prefix: str = "s"
) -> pd.DataFrame:
    """Daily-seasonal positive series with a little trend and noise."""
    rng = np.random.default_rng(seed)
    frames = []
    for i in range(n_series):
        t = np.arange(length)
        y = (20 + 10 * i) * (1 + 0.3 * np.sin(2 * np.pi * t / 24)) + 0.02 * t + rng.normal(0, 0.5, length)
        ds = pd.date_range("2024-01-01", periods=length, freq=freq) if freq else np.arange(length, dtype=np.int64)
        frames.append(pd.DataFrame({"unique_id": f"{prefix}{i}", "ds": ds, "y": y}))
    return pd.concat(frames, ignore_index=True)


def model_params() -> list[object]:
    """Every registered forecaster, the slow ones marked."""
    return [
        pytest.param(n, marks=pytest.mark.slow) if n in SLOW else pytest.param(n)
        for n in forecasters.available()
    ]


@pytest.fixture(scope="session")
def panel() -> pd.DataFrame:
    return make_panel()
