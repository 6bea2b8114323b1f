"""What the plan says of the pools it cannot plan: each named once, with why."""
from __future__ import annotations

from dataclasses import replace

import pandas as pd

import planner as P
from tests.planner.test_planner import catalog


def test_a_forecast_pool_without_running_capacity_is_named_not_silently_skipped(caplog) -> None:
    ds = pd.date_range("2026-01-01", periods=24 * 14, freq="h")
    history = pd.DataFrame({"unique_id": "c/gone/cpu", "ds": ds, "y": 10.0})
    forecast = pd.DataFrame({"unique_id": "c/gone/cpu", "ds": pd.date_range(ds[-1], periods=25, freq="h")[1:],
                             "mean": 10.0})
    capacity = pd.DataFrame({"unique_id": pd.Series(dtype=str), "capacity": pd.Series(dtype=float),
                             "units_per_node": pd.Series(dtype=float)})
    with caplog.at_level("WARNING", logger="planner.plan"):
        plan = P.make_plan(history, forecast, capacity, catalog())
    assert plan["allocation"].empty and plan["prescale"].empty
    assert "c/gone/cpu: forecast, but no running capacity" in caplog.text


def test_a_pool_with_only_memory_or_drained_capacity_is_named(caplog) -> None:
    """A pool that reports only mem has nothing to plan on, and one whose capacity is 0
    (drained, so no capacity row) has demand but no fleet: each is named once, not dropped."""
    ds = pd.date_range("2026-01-01", periods=24 * 14, freq="h")
    history = pd.concat([pd.DataFrame({"unique_id": uid, "ds": ds, "y": 10.0})
                         for uid in ("c/memonly/mem", "c/drained/gpu")], ignore_index=True)
    forecast = pd.DataFrame({"unique_id": pd.Series(dtype=str), "ds": pd.Series(dtype="datetime64[ns]"),
                             "mean": pd.Series(dtype=float)})
    capacity = pd.DataFrame({"unique_id": ["c/memonly/mem"], "capacity": [512.0], "units_per_node": [256.0]})
    with caplog.at_level("WARNING", logger="planner.plan"):
        plan = P.make_plan(history, forecast, capacity, catalog())
    assert plan["allocation"].empty
    assert "c/memonly: reports only mem, no gpu or cpu series to plan on: not planned" in caplog.text
    assert "c/drained/gpu: demand, but no running capacity" in caplog.text


def test_a_region_filter_that_leaves_no_offer_is_named_as_the_cause(caplog) -> None:
    ds = pd.date_range("2026-01-01", periods=24 * 14, freq="h")
    history = pd.DataFrame({"unique_id": "c/h100/gpu", "ds": ds, "y": 40.0})
    forecast = pd.DataFrame({"unique_id": "c/h100/gpu", "ds": pd.date_range(ds[-1], periods=25, freq="h")[1:],
                             "mean": 40.0})
    capacity = pd.DataFrame({"unique_id": ["c/h100/gpu"], "capacity": [64.0], "units_per_node": [4.0]})
    nowhere = replace(P.PlanPolicy(), offers=P.OfferPolicy(regions=("nowhere-1",)))
    with caplog.at_level("WARNING", logger="planner.plan"):
        assert P.make_plan(history, forecast, capacity, catalog(), nowhere)["allocation"].empty
    assert "in the regions the planner config allows (nowhere-1)" in caplog.text
    assert "ingest a catalog" not in caplog.text
