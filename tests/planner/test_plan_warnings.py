"""What the plan says of the pools it cannot plan: each named once, with why."""
from __future__ import annotations

from dataclasses import replace

import pandas as pd

import planner as P
from tests.planner.test_planner import catalog, steady_pool


def test_a_forecast_pool_without_running_capacity_is_named_not_silently_skipped(caplog) -> None:
    history, forecast, _ = steady_pool("c/gone/cpu", 10.0)
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
    history, forecast, capacity = steady_pool()
    nowhere = replace(P.PlanPolicy(), offers=P.OfferPolicy(regions=("nowhere-1",)))
    with caplog.at_level("WARNING", logger="planner.plan"):
        assert P.make_plan(history, forecast, capacity, catalog(), nowhere)["allocation"].empty
    assert "in the regions the planner config allows (nowhere-1)" in caplog.text
    assert "ingest a catalog" not in caplog.text


def test_the_pools_own_machine_without_a_price_is_not_planned_away(caplog) -> None:
    """Price 0 reads as unknown: the pool's machines cannot be priced, so no split (which would
    move the whole pool to public) is recommended; the warning names the machine."""
    cat = catalog()
    cat.loc[cat["instance_type"] == "h100-4x", "on_demand_price"] = 0.0
    with caplog.at_level("WARNING", logger="planner.plan"):
        plan = P.make_plan(*steady_pool(), cat)
    assert plan["allocation"].empty and plan["reservation"].empty and not plan["prescale"].empty
    assert "c/h100/gpu: the pool's own machine h100-4x has no price" in caplog.text


def test_a_catalog_without_the_pools_machine_says_what_it_prices_instead(caplog) -> None:
    cat = catalog()
    cat = cat[cat["instance_type"] != "h100-4x"]
    with caplog.at_level("WARNING", logger="planner.plan"):
        plan = P.make_plan(*steady_pool(), cat)
    assert "names no private machine for pool 'h100'" in caplog.text and "onprem/dc/a100-4x" in caplog.text
    assert not plan["allocation"].empty
    caplog.clear()
    with caplog.at_level("WARNING", logger="planner.plan"):
        P.make_plan(*steady_pool(), catalog())
    assert "names no private machine" not in caplog.text and "hour(s) of demand history" not in caplog.text


def test_a_kept_split_the_config_no_longer_allows_is_retuned(caplog) -> None:
    kept = {"c/h100/gpu": P.Split(1.0, 0.0, 0.0)}  # tuned earlier this month under wider bounds
    with caplog.at_level("WARNING", logger="planner.plan"):
        alloc = P.make_plan(*steady_pool(), catalog(), splits=kept)["allocation"].set_index("plan")
    assert "this month's split 10-0-0 is not one the plan allows now" in caplog.text
    assert bool(alloc.loc["tuned", "tuned_this_run"]) and alloc.loc["tuned", "private"] <= 0.7
    # the default is what the tuner keeps when nothing saves enough, in the bounds or not, but
    # only where it can be bought: no edge GPU fits an H100 pool, so a kept 3-5-2 is re-tuned
    # (it was kept, and recommended whenever its edge share, spilled to public, priced lowest)
    caplog.clear()
    with caplog.at_level("WARNING", logger="planner.plan"):
        alloc = P.make_plan(*steady_pool(), catalog(), splits={"c/h100/gpu": P.Split(0.3, 0.5, 0.2)})["allocation"]
    assert "this month's split 3-5-2 is not one the plan allows now" in caplog.text
    assert alloc.set_index("plan").loc["tuned", "edge"] == 0
    allowed = {"c/h100/gpu": P.Split(0.7, 0.3, 0.0)}  # no edge GPU fits an H100 pool
    alloc = P.make_plan(*steady_pool(), catalog(), splits=allowed)["allocation"].set_index("plan")
    assert not bool(alloc.loc["tuned", "tuned_this_run"]) and alloc.loc["tuned", "private"] == 0.7


def test_reservations_cover_the_recommended_plans_public_load(caplog) -> None:
    """A pool that keeps a running fleet big enough for its demand buys nothing on public: no
    reservation is offered for a split it does not take. One whose fleet is too small reserves
    for the excess, and each row names the plan it serves."""
    plan = P.make_plan(*steady_pool(y=40.0, capacity=64.0), catalog())
    assert plan["allocation"].set_index("plan").loc["running_fleet", "recommended"]
    assert plan["reservation"].empty
    short = P.make_plan(*steady_pool(y=40.0, capacity=16.0), catalog())
    best = short["allocation"].loc[short["allocation"]["recommended"], "plan"].iloc[0]
    assert not short["reservation"].empty and set(short["reservation"]["plan"]) == {best}
    with caplog.at_level("WARNING", logger="planner.plan"):
        P.make_plan(*steady_pool(days=2), catalog())
    assert "c/h100/gpu: 48 hour(s) of demand history" in caplog.text


def test_a_fleet_of_no_known_continent_is_told_public_offers_come_from_anywhere(caplog) -> None:
    history, forecast, capacity = steady_pool(y=10.0, capacity=16.0)
    with caplog.at_level("WARNING", logger="planner.plan"):
        P.make_plan(history, forecast, capacity, catalog())  # its own machines are in "dc"
    assert "the fleet's own gpu machines are in dc, of no continent headroom knows" in caplog.text
    caplog.clear()
    us = catalog().assign(region=lambda c: c["region"].replace({"dc": "us-west-dc"}))
    with caplog.at_level("WARNING", logger="planner.plan"):
        P.make_plan(history, forecast, capacity, us)
    assert "of no continent" not in caplog.text
    # CPU machines in a known region say nothing of where the GPU pools' offers may come from
    cpu_us = catalog().assign(region=lambda c: c["region"].where(c["instance_type"] != "cpu-64c", "us-west-2"))
    with caplog.at_level("WARNING", logger="planner.plan"):
        P.make_plan(history, forecast, capacity, cpu_us)
    assert "the fleet's own gpu machines are in dc" in caplog.text
    caplog.clear()  # no private gpu machine at all: nothing says where the fleet is either
    public_only = catalog().loc[lambda c: ~((c["location"] == "private") & (c["resource"] == "gpu"))]
    with caplog.at_level("WARNING", logger="planner.plan"):
        P.make_plan(history, forecast, capacity, public_only)
    assert "the catalog has no private gpu machine to say where the fleet is: public offers" in caplog.text


def test_each_row_says_the_days_and_the_forecast_it_was_priced_on() -> None:
    # a 5-day pool's rows said lookback_days 28 (the run's window) beside a headline "on 5.0
    # day(s) of demand"; a pool with no forecast was still said to be priced on one
    from pipelines.report.data import _model_note

    for days, with_forecast in ((5, True), (14, False)):
        history, forecast, capacity = steady_pool(days=days)
        plan = P.make_plan(history, forecast if with_forecast else forecast.iloc[0:0], capacity, catalog())
        alloc = plan["allocation"]
        assert (alloc["lookback_days"] == days).all()
        if with_forecast:  # the schedule's rows too (they said the run's window)
            assert (plan["prescale"]["lookback_days"] == days).all()
        assert (alloc["forecast_hours"] == (24 if with_forecast else 0)).all()
        note = _model_note("allocation", alloc.iloc[0].to_dict())
        assert ("forecast mean after it" in note) == with_forecast
        assert ("alone (no forecast beyond the data cutoff)" in note) != with_forecast


def test_a_left_out_gpu_pool_is_named_by_its_gpu_series() -> None:
    # a drained pool reporting gpu and cpu was named by its cpu series, under which it was never planned
    history, forecast, _ = steady_pool("c/gone/gpu", 10.0)
    history = pd.concat([history, history.assign(unique_id="c/gone/cpu")], ignore_index=True)
    empty = pd.DataFrame({"unique_id": pd.Series(dtype=str), "capacity": pd.Series(dtype=float),
                          "units_per_node": pd.Series(dtype=float)})
    left = P.make_plan(history, forecast, empty, catalog())["unplanned"]
    assert left[["unique_id", "not_planned"]].values.tolist() == [["c/gone/gpu", "all"]]
