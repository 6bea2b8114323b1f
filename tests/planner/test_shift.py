"""Level shifts: a month is priced on the days since demand moved, commitments wait for a week
of it, and the pre-scale schedule does not plan below a level demand has just risen to."""
from __future__ import annotations

import numpy as np
import pandas as pd

import planner as P
from planner.shift import level_shift
from tests.planner.test_planner import catalog

UID = "c/cpu/cpu"


def _tidal(days: int = 28, weekend: float = 0.5) -> tuple[pd.DatetimeIndex, np.ndarray]:
    """Hourly demand with a 3x day/night tide and quiet weekends."""
    ds = pd.date_range("2026-01-05", periods=24 * days, freq="h")
    tide = 200 + 100 * np.sin(2 * np.pi * np.arange(len(ds)) / 24)
    return ds, tide * np.where(ds.dayofweek >= 5, weekend, 1.0)


def test_a_shift_is_days_that_all_left_every_day_of_the_week_before() -> None:
    ds, y = _tidal()
    assert level_shift(ds, y) is None  # the tide and the weekends are no shift
    fell = y.copy()
    fell[-48:] *= 0.03
    found = level_shift(ds, fell)
    assert found is not None and found.days == 2 and found.after < 10 < 150 < found.before
    assert found.cut == ds[-1] - pd.Timedelta(days=2)
    rose = y.copy()
    rose[-24 * 5:] *= 5  # (its weekend days too must stand 2x above the weekdays before)
    assert level_shift(ds, rose).days == 5 and level_shift(ds, rose).after > level_shift(ds, rose).before
    rose[-24 * 2:] *= 10  # and again two days ago: the most recent level is the one
    assert level_shift(ds, rose).days == 2
    odd = y.copy()
    odd[-24:] *= 3.5
    assert level_shift(ds, odd) is None  # one odd day is not a new level
    holiday = y.copy()
    holiday[-48:] *= 0.45
    assert level_shift(ds, holiday) is None  # nor two days at under half: a holiday
    gone = y.copy()
    gone[-48:] = 0.0
    assert level_shift(ds, gone) is None  # two idle days (a holiday) need a third to be a level
    idle = np.zeros(len(ds))
    idle[-72:] = 64.0
    assert level_shift(ds, idle) is None  # a pool idle between jobs has no level to rise from
    assert level_shift(ds[:24 * 8], fell[-24 * 8:]) is None  # no whole week before it to measure against
    assert level_shift(*_tidal(weekend=0.3)) is None  # a deep weekend is no collapse either


def _plan(y: np.ndarray, ds: pd.DatetimeIndex, mean: float, capacity: float = 16 * 64.0) -> dict[str, pd.DataFrame]:
    history = pd.DataFrame({"unique_id": UID, "ds": ds, "y": y})
    forecast = pd.DataFrame({"unique_id": UID, "ds": pd.date_range(ds[-1], periods=25, freq="h")[1:], "mean": mean})
    capacity = pd.DataFrame({"unique_id": [UID], "capacity": [capacity], "units_per_node": [64.0]})
    return P.make_plan(history, forecast, capacity, catalog())


def _recommended(plan: dict[str, pd.DataFrame]) -> pd.Series:
    alloc = plan["allocation"]
    return alloc.loc[alloc["recommended"]].iloc[0]


def test_a_pool_whose_demand_collapsed_is_planned_on_the_days_since() -> None:
    ds, y = _tidal()
    fell = y.copy()
    fell[-48:] = 9.6
    plan = _plan(fell, ds, 9.6)
    control = _plan(np.full(len(ds), 9.6), ds, 9.6)  # the pool at its new level all along
    best, flat = _recommended(plan), _recommended(control)
    # before: priced on four weeks at the old level, and 1y/3y reservations for it
    assert abs(best["monthly_cost"] - flat["monthly_cost"]) < 0.02 * flat["monthly_cost"]
    assert plan["reservation"].empty
    assert "sized on the 2 day(s) since demand fell from" in best["headline"]
    assert "no reservation until it has held 7 days" in best["headline"]
    assert "sized on" not in flat["headline"]
    # the days priced, in the rows (lookback_days: the export's field); a lagging forecast is not priced
    assert (plan["allocation"][["lookback_days", "shift_days"]] == 2).all().all()
    lagging = _recommended(_plan(fell, ds, 200.0))
    assert abs(lagging["monthly_cost"] - best["monthly_cost"]) < 0.02 * best["monthly_cost"]


def test_three_days_of_history_buy_no_commitment_and_the_headline_says_so() -> None:
    def gpu_plan(days: int) -> dict[str, pd.DataFrame]:  # the running fleet carries half: public the rest
        ds = pd.date_range("2026-01-05", periods=24 * days, freq="h")
        history = pd.DataFrame({"unique_id": "c/a100/gpu", "ds": ds, "y": 400.0})
        forecast = pd.DataFrame({"unique_id": "c/a100/gpu", "ds": pd.date_range(ds[-1], periods=25, freq="h")[1:],
                                 "mean": 400.0})
        capacity = pd.DataFrame({"unique_id": ["c/a100/gpu"], "capacity": [200.0], "units_per_node": [4.0]})
        return P.make_plan(history, forecast, capacity, catalog())

    assert not gpu_plan(28)["reservation"].empty  # four weeks of it: reserved
    plan = gpu_plan(3)
    assert plan["reservation"].empty and "on 3.0 day(s) of demand, extrapolated" in _recommended(plan)["headline"]


def test_every_row_of_a_shifted_pool_says_the_days_it_was_priced_on() -> None:
    ds = pd.date_range("2026-01-05", periods=24 * 28, freq="h")
    y = np.where(np.arange(len(ds)) < len(ds) - 240, 100.0, 400.0)  # rose 10 days ago; half runs on public
    history = pd.DataFrame({"unique_id": "c/a100/gpu", "ds": ds, "y": y})
    forecast = pd.DataFrame({"unique_id": "c/a100/gpu", "ds": pd.date_range(ds[-1], periods=25, freq="h")[1:],
                             "mean": 400.0})
    capacity = pd.DataFrame({"unique_id": ["c/a100/gpu"], "capacity": [200.0], "units_per_node": [4.0]})
    plan = P.make_plan(history, forecast, capacity, catalog())
    assert not plan["reservation"].empty
    assert (plan["allocation"]["lookback_days"] == 10).all() and (plan["reservation"]["lookback_days"] == 10).all()


def test_after_a_step_up_the_schedule_holds_the_new_level_a_lagging_forecast_misses() -> None:
    ds, y = _tidal(weekend=1.0)
    y = y / 4  # ~50 cores, then 3.5x: 2 of 64 cores' worth more than the forecast sees
    y[-48:] *= 3.5
    lagging = _plan(y, ds, float(np.median(y[-48:])) * 0.7, capacity=4 * 64.0)["prescale"]
    since = pd.Series(y[-48:]).groupby(ds[-48:].hour).median()
    level = pd.to_datetime(lagging["ts"]).dt.hour.map(since).to_numpy()
    assert (lagging["target_capacity"] >= level).all()
    assert lagging["reason"].str.contains("the level demand rose to; the forecast says").any()


def test_a_steady_trend_is_said_and_a_fall_reserves_nothing() -> None:
    """A pool shrinking 2% a day had 2 machines reserved for 3 years "that still pay at demand
    x 0.85" when they were needed 58% of today's hours, and nothing said of the fall."""
    from planner.shift import trend

    ds, tidal = _tidal(weekend=0.6)
    day = np.arange(len(ds)) / 24
    assert trend(ds, tidal) is None  # a weekly tide is no trend
    noisy = tidal * np.random.default_rng(0).lognormal(0, 0.15, len(ds))
    assert trend(ds, noisy) is None
    dip = tidal.copy()
    dip[-24 * 12:-24 * 5] *= 0.6
    assert trend(ds, dip) is None  # nor a holiday week, back since
    grow = tidal * 1.02 ** day
    assert trend(ds, grow).factor > 1.1 and trend(ds, tidal * 0.98 ** day).factor < 0.9

    def gpu_plan(y: np.ndarray) -> dict[str, pd.DataFrame]:  # the running fleet carries half: public the rest
        history = pd.DataFrame({"unique_id": "c/a100/gpu", "ds": ds, "y": y})
        forecast = pd.DataFrame({"unique_id": "c/a100/gpu", "ds": pd.date_range(ds[-1], periods=25, freq="h")[1:],
                                 "mean": float(y[-24:].mean())})
        capacity = pd.DataFrame({"unique_id": ["c/a100/gpu"], "capacity": [200.0], "units_per_node": [4.0]})
        return P.make_plan(history, forecast, capacity, catalog())

    shrinking = gpu_plan(400.0 * 0.98 ** (day - day[-1]))  # ending at 400 after 4 weeks from 700
    assert not gpu_plan(np.full(len(ds), 400.0))["reservation"].empty and shrinking["reservation"].empty
    best = _recommended(shrinking)
    assert "demand fell steadily" in best["headline"] and "no reservation while it falls" in best["headline"]
    rising = _recommended(gpu_plan(400.0 * 1.02 ** (day - day[-1])))
    assert "demand rose steadily" in rising["headline"] and "no reservation" not in rising["headline"]


def test_a_pool_with_no_demand_in_its_last_day_nor_ahead_reserves_nothing(caplog) -> None:
    """Four weeks at 400 GPUs, half on public, then nothing for the last day: with a forecast of
    nothing ahead, no one- or three-year commitment (the level shift needs two days to tell);
    with a forecast that brings the load back, reserved as before."""
    ds = pd.date_range("2026-01-05", periods=24 * 28, freq="h")
    y = np.where(np.arange(len(ds)) < len(ds) - 24, 400.0, 0.0)
    history = pd.DataFrame({"unique_id": "c/a100/gpu", "ds": ds, "y": y})
    capacity = pd.DataFrame({"unique_id": ["c/a100/gpu"], "capacity": [200.0], "units_per_node": [4.0]})

    def plan(ahead: float) -> dict[str, pd.DataFrame]:
        forecast = pd.DataFrame({"unique_id": "c/a100/gpu", "ds": pd.date_range(ds[-1], periods=25, freq="h")[1:],
                                 "mean": ahead})
        return P.make_plan(history, forecast, capacity, catalog())
    with caplog.at_level("WARNING", logger="planner.plan"):
        assert plan(0.0)["reservation"].empty
    assert "no demand in its last day nor in the forecast ahead: no reservation" in caplog.text
    assert not plan(400.0)["reservation"].empty


def test_a_pool_with_no_demand_at_all_is_not_planned() -> None:
    """Four weeks of zeros and a forecast of zeros: no split "at $0/month" beside a schedule
    that keeps an instance, but one unplanned row that says why."""
    ds = pd.date_range("2026-01-05", periods=24 * 28, freq="h")
    history = pd.DataFrame({"unique_id": "c/a100/gpu", "ds": ds, "y": 0.0})
    forecast = pd.DataFrame({"unique_id": "c/a100/gpu", "ds": pd.date_range(ds[-1], periods=25, freq="h")[1:],
                             "mean": 0.0})
    capacity = pd.DataFrame({"unique_id": ["c/a100/gpu"], "capacity": [200.0], "units_per_node": [4.0]})
    plan = P.make_plan(history, forecast, capacity, catalog())
    assert plan["unplanned"].to_dict("records") == [{"unique_id": "c/a100/gpu", "resource": "gpu", "not_planned": "all",
                                                     "reason": "no demand in the lookback nor in the forecast ahead"}]
    assert all(frame.empty for name, frame in plan.items() if name != "unplanned")
