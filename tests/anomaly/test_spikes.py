"""Spike predictor: the grid, the labels, a model that sees the climb coming."""
from __future__ import annotations

import pandas as pd

from anomaly.evaluate import evaluate_spikes
from anomaly.spike_features import SpikePolicy, build_spike_frame, resample_prices

POLICY = SpikePolicy(horizon="3h", median_window="3D", n_estimators=60, min_child_samples=10)


def one_series(prices: list[tuple[str, float]]) -> pd.DataFrame:
    return pd.DataFrame({
        "ts": pd.to_datetime([t for t, _ in prices]), "provider": "aws", "region": "r", "zone": "z",
        "instance_type": "t", "product": "Linux", "price": [p for _, p in prices],
    })


def test_resample_carries_last_price_forward():
    grid = resample_prices(one_series([("2026-01-01 00:10", 1.0), ("2026-01-01 02:30", 2.0),
                                       ("2026-01-01 04:00", 3.0)]), "1h")
    assert list(grid["ts"].dt.hour) == [1, 2, 3, 4]
    assert list(grid["price"]) == [1.0, 1.0, 2.0, 3.0]


def test_spike_labels_look_only_ahead():
    hours = [(f"2026-01-01 {h:02d}:00", 1.0) for h in range(20)]
    hours[12] = ("2026-01-01 12:00", 2.5)  # a spike: >= 2 x trailing median
    frame = build_spike_frame(one_series(hours), POLICY)
    by_hour = frame.set_index(frame["ts"].dt.hour)
    assert by_hour.loc[12, "spiking"] == 1.0
    assert by_hour.loc[11, "spiking"] == 0.0
    # spike within (t, t + 3h]: rows 09, 10, 11; not 12 itself (nothing after), not 08
    assert list(by_hour.loc[8:13, "label"]) == [0.0, 1.0, 1.0, 1.0, 0.0, 0.0]
    assert pd.isna(by_hour.loc[19, "label"])  # the horizon runs past the data


def test_on_demand_price_counts_as_spike():
    hours = [(f"2026-01-01 {h:02d}:00", 1.0) for h in range(10)]
    od = pd.DataFrame({"provider": ["aws"], "region": ["r"], "instance_type": ["t"], "on_demand_price": [0.9]})
    frame = build_spike_frame(one_series(hours), POLICY, od)
    assert (frame["spiking"] == 1.0).all()


def test_cross_zone_features(prices):
    frame = build_spike_frame(prices, POLICY)
    assert {"peer_spiking_frac", "peer_mean_ratio", "hours_since_spike", "vol_24h", "hour"} <= set(frame.columns)
    assert frame["peer_spiking_frac"].between(0, 1).all()


def test_predictor_beats_persistence(prices):
    out = evaluate_spikes(prices, POLICY, test_fraction=0.4).set_index("model")
    assert list(out.columns) == ["auc", "precision", "recall", "f1", "positives", "n"]
    assert out.loc["lightgbm", "positives"] > 0
    assert out.loc["lightgbm", "auc"] > out.loc["persistence", "auc"]


def test_a_grid_too_large_for_memory_is_refused_with_the_way_out(monkeypatch):
    """A year of weekly price lists for thousands of series on an hourly grid runs out of
    memory: refuse it up front and say to use a coarser grid."""
    import pytest

    import anomaly.spike_features as sf

    ts = pd.date_range("2026-01-01", periods=53, freq="7D")
    prices = pd.concat([pd.DataFrame({"ts": ts, "provider": "gcp", "region": "r", "zone": f"z{i}",
                                      "instance_type": "n2", "product": "Linux", "price": 1.0}) for i in range(4)])
    monkeypatch.setattr(sf, "MAX_GRID_ROWS", 10_000)
    with pytest.raises(sf.SpikeGridTooLarge, match=r"4 series over 364 days on a 1h grid is 34,948 rows.*--freq 1d"):
        resample_prices(prices, "1h")
    assert len(resample_prices(prices, "1d")) == 4 * 365
