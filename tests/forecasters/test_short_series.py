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


def test_the_lstm_minimum_is_the_shortest_series_its_fit_takes() -> None:
    """min_points (what backtests and the train flow check) counts the shorter validation
    stretch fit falls back to: it refused 250 hourly points that fit takes, asking for 264."""
    from tests.forecasters.conftest import make_panel

    def lstm() -> forecasters.BaseForecaster:
        return forecasters.create("lstm").set_params(max_epochs=1, n_networks=1, hidden_size=8,
                                                     samples_per_epoch=128)

    n = lstm().min_points()
    assert n < 264
    with pytest.raises(forecasters.HistoryError, match=f"need at least {n}"):
        lstm().fit(make_panel(2, n - 1))
    assert len(forecasters.cross_validation(lstm(), make_panel(2, n + 24), h=24, n_windows=1)) == 48


def test_an_untrained_lstm_on_the_last_season_anchor_is_seasonal_naive() -> None:
    """``anchor="last"``: the network corrects the value one season back, so with no epoch
    trained (the head starts at zero) its forecast is exactly seasonal naive's, one and two
    seasons ahead; the median anchor is not."""
    from tests.forecasters.conftest import make_panel

    panel = make_panel(n_series=2, length=24 * 20)
    kw = {"max_epochs": 0, "n_networks": 1, "hidden_size": 8, "input_length": 24, "val_points": 24}
    naive = forecasters.create("seasonal_naive", horizon=48).fit(panel).predict()
    last = forecasters.create("lstm", horizon=48).set_params(anchor="last", **kw).fit(panel).predict()
    median = forecasters.create("lstm", horizon=48).set_params(anchor="median", **kw).fit(panel).predict()
    np.testing.assert_allclose(last["mean"], naive["mean"], rtol=1e-5)
    assert not np.allclose(median["mean"], naive["mean"], rtol=1e-3)
    with pytest.raises(ValueError, match="anchor"):
        forecasters.create("lstm").set_params(anchor="mean", **kw).fit(panel)


def test_the_automatic_anchor_is_each_series_own_better_one() -> None:
    """``anchor="auto"``: per series, the anchor that forecasts its validation stretch better:
    a series that repeats its day takes seasonal naive (the last cycle), one whose cycles are
    drowned in spikes the median of the last seven; the choice is kept in the artifact."""
    rng = np.random.default_rng(1)
    t = np.arange(24 * 20)
    ds = pd.date_range("2026-01-01", periods=len(t), freq="h")
    day = 50 + 20 * np.sin(2 * np.pi * t / 24) + 0.01 * t
    spiky = day + rng.normal(0, 1, len(t)) + (rng.random(len(t)) < 0.15) * rng.uniform(40, 120, len(t))
    frame = pd.concat([pd.DataFrame({"unique_id": u, "ds": ds, "y": y}) for u, y in (("a", day), ("b", spiky))])
    kw = {"max_epochs": 0, "n_networks": 1, "hidden_size": 8, "input_length": 24, "val_points": 48}
    model = forecasters.create("lstm", horizon=24).set_params(**kw).fit(frame)
    assert model.anchors_ == {"a": "last", "b": "median"}
    copy = forecasters.loads(forecasters.dumps(model))
    assert copy.anchors_ == model.anchors_
    pd.testing.assert_frame_equal(copy.predict(), model.predict())
    naive = forecasters.create("seasonal_naive", horizon=24).fit(frame).predict()
    a = model.predict()["unique_id"] == "a"
    np.testing.assert_allclose(model.predict()["mean"][a], naive["mean"][a], rtol=1e-5)  # untrained: the anchor


def test_ets_warns_of_fewer_seasons_only_when_the_model_itself_has_them(caplog: pytest.LogCaptureFixture) -> None:
    """Three weeks hold two weekly cycles: the fit is quiet, though the copy that calibrates
    the intervals (fit on less) drops the weekly season; ten days warn once."""
    from tests.forecasters.conftest import make_panel

    with caplog.at_level(logging.WARNING, logger="forecasters.baselines"):
        forecasters.create("ets").fit(make_panel(2, 504))
        assert "shorter than two cycles" not in caplog.text
        forecasters.create("ets").fit(make_panel(2, 240))
    assert caplog.text.count("shorter than two cycles") == 1
