"""Fixtures for the detection tests; the data builders live in ``synthetic.py``."""
from __future__ import annotations

import pandas as pd
import pytest

from .synthetic import fleet_telemetry, spot_prices, tidal_series


@pytest.fixture()
def tide() -> pd.DataFrame:
    """Four weeks of two tidal series, the second with a +40 burst in its last week."""
    a = tidal_series("c/a/gpu", seed=1)
    b = tidal_series("c/b/gpu", seed=2, shift_at=24 * 24 + 5, shift=40.0)
    return pd.concat([a, b], ignore_index=True)


@pytest.fixture()
def fleet() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Hourly telemetry of six devices, three of which fail twice after a precursor."""
    return fleet_telemetry()


@pytest.fixture()
def prices() -> pd.DataFrame:
    """Forty days of spot prices in three zones with five spike episodes."""
    return spot_prices()
