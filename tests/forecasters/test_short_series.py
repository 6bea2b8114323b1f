"""The LSTM runs on short series (a shorter validation stretch, said) instead of refusing."""
from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

import forecasters


def _ten_minute(days: int) -> pd.DataFrame:
    """Host CPU at 10 minutes, as the Alibaba exports come: ``days`` days of three hosts."""
    rng = np.random.default_rng(0)
    n = days * 144
    ds = pd.date_range("2026-01-01", periods=n, freq="10min")
    return pd.concat([pd.DataFrame({"unique_id": f"h{i}", "ds": ds,
                                    "y": 50 + 20 * np.sin(2 * np.pi * np.arange(n) / 144 + i) + rng.normal(0, 2, n)})
                      for i in range(3)], ignore_index=True)


def _lstm() -> forecasters.BaseForecaster:
    return forecasters.create("lstm", horizon=144, freq="10min", season_length=144).set_params(
        max_epochs=2, n_networks=1, hidden_size=8, samples_per_epoch=256)


def test_eight_days_of_ten_minute_data_validate_on_a_shorter_stretch(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="forecasters.lstm"):
        model = _lstm().fit(_ten_minute(8))  # a week of seasons to validate on would need 1,344+ points
    assert "early stopping validates on the last 384" in caplog.text
    fc = model.predict()
    assert len(fc) == 3 * 144 and np.isfinite(fc["mean"]).all()
    assert (fc["lo_80"] <= fc["mean"]).all() and (fc["mean"] <= fc["hi_80"]).all()
    copy = forecasters.loads(forecasters.dumps(model))
    pd.testing.assert_frame_equal(copy.predict(), fc)


def test_a_series_too_short_even_for_that_is_still_refused() -> None:
    with pytest.raises(forecasters.HistoryError, match="points"):
        _lstm().fit(_ten_minute(2))
