"""Capacity rules at the data's resolution: reactive autoscalers, the predictive + reactive rule, replay."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from planner.prescale import PrescalePolicy, newsvendor_instances, planned_capacity, predicted, prescale_schedule
from planner.replay import ReplaySpan, frontier_verdict, replay_table
from planner.scaling import ReactivePolicy, reactive_capacity, score, stabilized, whole_instances

STEP = pd.Timedelta("5min")


def tidal(days: int = 10, seed: int = 0) -> np.ndarray:
    """5-minute demand with a 3x day-night swing and noise."""
    t = np.arange(days * 288)
    rng = np.random.default_rng(seed)
    return 100 + 50 * np.sin(2 * np.pi * t / 288) + rng.normal(0, 4, len(t))


def test_reactive_scales_out_a_lag_late_and_in_only_after_the_window() -> None:
    d = np.array([10.0] * 5 + [30.0] * 5 + [10.0] * 10)
    cap = reactive_capacity(d, ReactivePolicy(target_utilization=1.0, lag_steps=1, stabilization_steps=3), 10.0)
    assert cap[5] == 10 and cap[6] == 30  # the rise is seen one step late
    assert (cap[10:13] == 30).all() and cap[13] == 10  # in only once 3 lower recommendations held


def test_whole_instances_and_stabilized() -> None:
    assert whole_instances(np.array([0.0, 7.9, 8.0, 8.1]), 8.0).tolist() == [8, 8, 8, 16]
    assert stabilized(np.array([1.0, 3.0, 2.0, 1.0, 1.0]), 2).tolist() == [1, 3, 3, 2, 1]
    with pytest.raises(ValueError, match="instance_units must be > 0"):
        whole_instances(np.array([1.0]), 0.0)


def test_score_counts_shortfalls_idle_and_actions() -> None:
    s = score(np.array([10.0, 10.0, 20.0]), np.array([12.0, 8.0, 20.0]), step_hours=1.0)
    assert s == {"cost": 40.0, "avg_utilization": 38 / 40, "underprovisioned_pct": pytest.approx(100 / 3),
                 "unit_hours_short": 2.0, "idle_unit_hours": 2.0, "scale_actions": 1}


def test_the_quantile_follows_the_cost_ratio() -> None:
    assert PrescalePolicy().quantile == pytest.approx(0.99)
    assert PrescalePolicy(shortage_cost=9, idle_cost=1).quantile == pytest.approx(0.9)
    with pytest.raises(ValueError, match="positive duration"):
        PrescalePolicy(lead="0min")
    # a refresh that does not divide a day left each day's tail without a forecast (2D: all of it)
    for bad in ("7h", "5h", "2D", "25h"):
        with pytest.raises(ValueError, match="refresh must divide a day"):
            PrescalePolicy(refresh=bad)
    assert PrescalePolicy(refresh="6h").refresh == "6h" and PrescalePolicy(refresh="1D").refresh == "1D"


def test_the_forecast_moves_the_seen_demand_ahead_of_a_ramp() -> None:
    d = np.array([10.0, 10.0, 10.0, 10.0])
    f = np.array([10.0, 10.0, 20.0, np.nan])
    got = predicted(d, f, 1)
    assert got[2] == 20.0 and got[3] == 10.0 and np.isnan(got[0])  # no forecast: demand as seen


def test_planned_capacity_ignores_everything_after_its_decision() -> None:
    d, f = tidal(), tidal(seed=1)
    cut = 6 * 288 + 17
    base = planned_capacity(d, f, PrescalePolicy(), STEP, 8.0, start=2 * 288)
    d2, f2 = d.copy(), f.copy()
    d2[cut:] *= 5  # everything from the decision at ``cut`` on changes
    f2[cut + 1:] = 0.0  # forecasts for later steps too (the one for ``cut`` was made before it)
    moved = planned_capacity(d2, f2, PrescalePolicy(), STEP, 8.0, start=2 * 288)
    assert np.array_equal(base[: cut + 1], moved[: cut + 1])


def test_replay_scores_every_strategy_on_the_same_demand_and_planned_beats_reactive_on_tides() -> None:
    d = tidal(days=14)
    hours = pd.Series(d).groupby(np.arange(len(d)) // 12).transform("mean").to_numpy()
    f = np.roll(hours, 288)  # a day-old seasonal forecast: known tides, not the noise
    f[:288] = np.nan
    span = ReplaySpan(d, f, STEP, 7 * 288, 4.0)
    table, caps = replay_table(span, PrescalePolicy(), unit_price=0.5)
    assert set(caps) == {"oracle", "static_peak", "reactive_80", "reactive_70", "reactive_60", "reactive_50",
                         "reactive_80_30m", "planned"}
    assert all(len(c) == len(d) - 7 * 288 for c in caps.values())
    oracle = table.set_index("strategy").loc["oracle"]
    assert oracle["cost_vs_oracle"] == 1.0 and oracle["underprovisioned_pct"] == 0.0
    assert (table["cost_usd"] == table["cost"] * 0.5).all()
    planned = table.set_index("strategy").loc["planned"]
    assert planned["underprovisioned_pct"] <= 1.0
    assert frontier_verdict(table) == []


def test_a_replay_span_without_history_or_with_no_instance_size_is_refused() -> None:
    with pytest.raises(ValueError, match="leave history"):
        ReplaySpan(np.ones(10), np.ones(10), STEP, 0, 1.0)
    with pytest.raises(ValueError, match="instance size must be > 0"):
        ReplaySpan(np.ones(10), np.ones(10), STEP, 5, 0.0)


def test_the_schedule_holds_the_forecast_plus_the_learnt_margin_in_whole_instances() -> None:
    ds = pd.date_range("2026-01-05", periods=6, freq="h")
    fc = pd.DataFrame({"unique_id": "c/p/cpu", "ds": ds, "mean": [10.0, 10, 40, 40, 10, 10]})
    recent = pd.DataFrame({"ds": pd.date_range("2026-01-01", periods=500, freq="5min"), "y": 10.0})
    out = prescale_schedule(fc, capacity=16.0, units_per_instance=8.0, recent=recent)
    assert out["reactive_margin"].iloc[0] == 0.0  # flat recent demand: nothing to add
    # 40 needs 5 instances from the hour before it (lead); at hourly steps the 30-minute
    # stabilization holds nothing longer
    assert out["target_capacity"].tolist() == [16.0, 40.0, 40.0, 40.0, 16.0, 16.0]
    assert out["action"].tolist()[:2] == ["hold", "scale_up"]
    assert "forecast 40.0 + 0.0" in out["reason"].iloc[2]
    # each reason's arithmetic is the one that set its row: the scale-up is for the next hour
    assert out["reason"].iloc[1].startswith("the forecast at 02:00, 40.0 + 0.0, needs 5 instance(s), raised 60 min "
                                            "ahead of it")
    assert out["reason"].iloc[0].startswith("forecast 10.0 + 0.0 needs 2 instance(s)")
    held = prescale_schedule(fc, capacity=16.0, units_per_instance=8.0, recent=recent,
                             policy=PrescalePolicy(stabilization="2h"))
    assert held["target_capacity"].tolist()[4] == 40.0
    assert held["reason"].iloc[4].startswith("holds 5 instance(s) until the forecast stays lower for 2h (here 10.0 "
                                             "+ 0.0 needs 2)")


def test_a_need_just_over_an_instance_rounds_down_when_the_misses_say_so() -> None:
    """4.0011 GPUs on 4-GPU machines: a second machine idles 3.999 GPUs to save a miss that
    recent demand shows rarely (1 in 200, 0.5 GPU): one machine; where misses are frequent and
    large, two."""
    policy = PrescalePolicy()  # shortage 99x idle
    rare = np.r_[np.zeros(199), 0.5]
    assert newsvendor_instances(np.array([4.0]), 0.0011, rare, 4.0, policy).tolist() == [4.0]
    often = np.r_[np.zeros(150), np.full(50, 2.0)]
    assert newsvendor_instances(np.array([4.0]), 0.0011, often, 4.0, policy).tolist() == [8.0]
    assert newsvendor_instances(np.array([4.0]), 0.0011, None, 4.0, policy).tolist() == [8.0]  # no misses: up
    assert newsvendor_instances(np.array([0.5]), 0.0, rare, 4.0, policy).tolist() == [4.0]  # min_instances holds
    # the plan's schedule says where it took the lower count
    ds = pd.date_range("2026-01-05", periods=2, freq="h")
    fc = pd.DataFrame({"unique_id": "c/p/gpu", "ds": ds, "mean": [4.0011, 4.0011]})
    t = pd.date_range("2026-01-01", periods=500, freq="5min")
    recent = pd.DataFrame({"ds": t, "y": 4.0 + (np.arange(500) % 250 == 0) * 0.5, "forecast": 4.0})
    out = prescale_schedule(fc, capacity=8.0, units_per_instance=4.0, recent=recent)
    assert out["target_capacity"].tolist() == [4.0, 4.0]
    assert "rounded down" in out["reason"].iloc[0]
