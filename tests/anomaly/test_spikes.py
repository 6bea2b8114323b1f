"""Spike predictor: the grid, the labels, a model that sees the climb coming."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from anomaly.evaluate import evaluate_spikes
from anomaly.spike_features import SpikePolicy, build_spike_frame, resample_prices
from anomaly.spikes import PersistenceSpikeBaseline, SpikePredictor, choose_threshold, spike_time_folds

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
    assert list(out.columns) == ["auc", "base_rate", "threshold", "precision", "recall", "f1", "alerts",
                                 "positives", "n", "threshold_rule"]
    assert out.loc["headroom", "positives"] > 0
    assert out.loc["headroom", "auc"] > out.loc["persistence", "auc"]
    assert set(out["threshold_rule"]) <= {"target_precision", "max_f1"}
    assert out.loc["headroom", "base_rate"] == out.loc["headroom", "positives"] / out.loc["headroom", "n"]


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


def test_the_threshold_reaching_the_target_precision_with_the_most_recall_is_chosen():
    # scores 0.1 .. 0.9: from 0.6 up all 4 are spikes (recall 0.8); from 0.4 up 5 of 6 (recall 1)
    # (each hour 20 times: alerts must beat chance, which a handful of rows cannot show)
    y = np.tile([0, 0, 0, 1, 0, 1, 1, 1, 1], 20)
    score = np.tile([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9], 20)
    c = choose_threshold(y, score, 0.9)
    assert (c.rule, c.threshold, c.precision, c.recall, c.alerts) == ("target_precision", 0.6, 1.0, 0.8, 80)
    lower = choose_threshold(y, score, 0.8)  # 5/6 = 0.83 reaches it, with all the recall
    assert (lower.rule, lower.threshold, lower.recall, lower.alerts) == ("target_precision", 0.4, 1.0, 120)


def test_an_unreachable_target_precision_falls_back_to_the_best_f1_and_says_so():
    rng = np.random.default_rng(0)
    score = rng.random(400)
    y = (rng.random(400) < 0.1 + 0.5 * score).astype(int)  # informative, but no threshold is 0.95 precise
    c = choose_threshold(y, score, 0.95)
    assert c.rule == "max_f1"
    p = np.array([y[score >= t].mean() for t in score])
    r = np.array([y[score >= t].sum() / y.sum() for t in score])
    f1 = 2 * p * r / np.maximum(p + r, 1e-12)
    assert c.f1 == pytest.approx(f1.max()) and c.precision > y.mean() and p.max() < 0.95


def test_alerts_no_better_than_random_hours_are_not_raised():
    """Prices that are noise: the best F1 was alerting on every hour, at the base rate's
    precision (420 of 420 test hours, "spike predicted (p=0.00)" on every market)."""
    rng = np.random.default_rng(1)
    y = (rng.random(2000) < 0.13).astype(int)
    for seed in range(20):  # nor one alert that was right by luck (precision 1: it met the target)
        noise = np.random.default_rng(seed)
        c = choose_threshold((noise.random(2000) < 0.13).astype(int), noise.random(2000), 0.8)
        assert (c.rule, c.alerts, c.threshold > 1) == ("no_skill", 0, True), seed
    assert np.isinf(choose_threshold(y, rng.random(2000), 0.8, never=np.inf).threshold)


def test_unscored_rows_are_left_out_and_one_class_gives_the_default():
    y = np.tile([0, 1, 1, 0], 30)
    assert choose_threshold(y, np.tile([np.nan, 0.9, 0.8, 0.1], 30), 0.8).threshold == 0.8
    assert choose_threshold(np.array([0, 0]), np.array([0.2, 0.3]), 0.8, default=1.0).rule == "default"


def test_the_out_of_fold_blocks_are_purged_of_labels_and_features_that_reach_into_them():
    ts = pd.Series(pd.date_range("2026-01-01", periods=24 * 50, freq="1h"))
    policy = SpikePolicy(horizon="6h", median_window="3D", windows=("6h", "24h"), folds=5)
    folds = spike_time_folds(ts, policy)
    assert len(folds) == 5 and sum(test.sum() for _, test in folds) == len(ts)
    for train, test in folds[1:-1]:
        first, last = ts[test].min(), ts[test].max()
        before, after = ts[train & (ts < first).to_numpy()], ts[train & (ts > last).to_numpy()]
        assert first - before.max() > pd.Timedelta("6h")  # no training label reaches into the block
        assert after.min() - last >= pd.Timedelta("3D")  # no training feature reaches back into it


def test_predictor_and_persistence_set_their_thresholds_on_the_training_rows_only(prices):
    frame = build_spike_frame(prices, POLICY)
    train = frame[frame["label"].notna() & (frame["ts"] < frame["ts"].quantile(0.6))]
    model = SpikePredictor(POLICY).fit(train)
    assert model.threshold_rule_ in ("target_precision", "max_f1")
    assert model.oof_metrics_["rule"] == model.threshold_rule_ and model.oof_metrics_["alerts"] > 0
    base = PersistenceSpikeBaseline(POLICY.k, POLICY.target_precision).fit(train)
    again = PersistenceSpikeBaseline(POLICY.k, POLICY.target_precision).fit(
        pd.concat([train, frame[frame["ts"] >= frame["ts"].quantile(0.6)].assign(label=1.0)]))
    assert base.threshold_ != again.threshold_ or base.threshold_rule_ != again.threshold_rule_  # labels matter
    assert PersistenceSpikeBaseline(POLICY.k).fit(train.drop(columns="label")).threshold_ == 1.0
