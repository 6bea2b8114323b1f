"""Which machine each location is priced on: public's is the cheapest in whole instances for the
load public carries, not per unit; shared-core fractions of a vCPU and spot markets silent for a
year do not qualify."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import planner as P
from planner.cost import LocationCost
from planner.plan import cheapest_public
from tests.planner.test_planner import steady_pool

FREE = P.CostPolicy(private=LocationCost(), public=LocationCost(), edge=LocationCost(), hours_per_month=730.0)
COLS = ["provider", "region", "instance_type", "location", "resource", "units", "vcpus", "memory_gb",
        "on_demand_price", "reserved_1y_price", "reserved_3y_price", "tflops"]


def _gpu_catalog() -> pd.DataFrame:
    """An A100 pool; public sells an 8-H100 box (25.4 A100s of work, 3.55/unit) and a 1-A100
    machine (3.80/unit): cheaper per unit is the H100 box, for a small load by far not."""
    return pd.DataFrame([
        ("onprem", "dc", "a100-4x", "private", "gpu", 4, 48, 340.0, 4.0, None, None, 4 * 312.0),
        ("cloud", "r1", "h100-8x", "public", "gpu", 8, 208, 1872.0, 90.0, None, None, 8 * 989.0),
        ("cloud", "r1", "a100-1x", "public", "gpu", 1, 12, 85.0, 3.8, None, None, 312.0),
    ], columns=COLS)


def test_public_is_priced_on_the_machine_cheapest_for_its_load() -> None:
    ds = pd.date_range("2026-03-02", periods=24 * 28, freq="h")
    y = np.where(ds.hour.isin([14, 15]), 14.0, 10.0)  # a two-hour peak of 4 A100s a day
    history = pd.DataFrame({"unique_id": "c/a100/gpu", "ds": ds, "y": y})
    fds = pd.date_range(ds[-1] + pd.Timedelta("1h"), periods=24, freq="h")
    forecast = pd.DataFrame({"unique_id": "c/a100/gpu", "ds": fds, "mean": np.where(fds.hour.isin([14, 15]), 14., 10.)})
    capacity = pd.DataFrame({"unique_id": ["c/a100/gpu"], "capacity": [12.0], "units_per_node": [4.0]})
    cat = _gpu_catalog()
    assert P.select_offers(cat, "gpu", "a100")["public"].instance_type == "h100-8x"  # per unit
    alloc = P.make_plan(history, forecast, capacity, cat, P.PlanPolicy(costs=FREE))["allocation"]
    assert alloc["offers"].str.contains("public: cloud/r1/a100-1x").all()
    best = alloc.loc[alloc["recommended"]].iloc[0]
    # the running fleet (3 machines) and 2 A100s on public for the peak hours: 12 x 1 + 2/24 x 2 x 3.8 an hour
    assert best["plan"] == "running_fleet"
    assert abs(best["monthly_cost"] - 730 * (3 * 4.0 + 2 * 2 * 3.8 / 24)) < 1e-6
    # with a load that fills the box, the box: 26 units an hour
    offers = P.select_offers(cat, "gpu", "a100")
    choices = P.cost.public_choices(P.cost.qualifying_offers(cat, "gpu", "a100"))
    assert {o.instance_type for o in choices} == {"h100-8x", "a100-1x"}
    assert cheapest_public(np.full(48, 25.0), choices, FREE, offers["public"]).instance_type == "h100-8x"
    assert cheapest_public(np.full(48, 2.0), choices, FREE, offers["public"]).instance_type == "a100-1x"
    assert cheapest_public(np.zeros(48), choices, FREE, offers["public"]).instance_type == "a100-1x"  # a tie: smaller


def test_a_fraction_of_a_vcpu_is_no_machine_for_a_pool() -> None:
    cat = pd.DataFrame([
        ("onprem", "dc", "batch-64c", "private", "cpu", 64, 64, 256.0, 1.0, None, None, None),
        ("gcp", "r1", "e2-micro", "public", "cpu", 0.25, 0.25, 1.0, 0.0084, None, None, None),  # 4 GB/vCPU
        ("gcp", "r1", "n2-standard-8", "public", "cpu", 8, 8, 32.0, 0.39, None, None, None),
    ], columns=COLS)
    q = P.cost.qualifying_offers(cat, "cpu", "batch")
    assert "e2-micro" not in set(q["instance_type"]) and "n2-standard-8" in set(q["instance_type"])
    # nor the machine that sets a pool's memory per vCPU when it has none of its own
    public = pd.concat([cat.iloc[1:], pd.DataFrame([("gcp", "r1", "n2-highcpu-8", "public", "cpu", 8, 8, 8.0, 0.28,
                                                     None, None, None)], columns=COLS)], ignore_index=True)
    assert P.cost.reference_offer(public, "cpu", "batch")["instance_type"] == "n2-highcpu-8"
    assert set(P.cost.qualifying_offers(public, "cpu", "batch")["instance_type"]) == {"n2-highcpu-8", "n2-standard-8"}


def test_a_spot_market_silent_for_a_year_is_gone() -> None:
    ts = pd.date_range("2026-01-01", periods=24 * 10, freq="h")
    live = pd.DataFrame({"ts": ts, "provider": "gcp", "region": "r1", "zone": "r1", "instance_type": "a2-1g",
                         "product": "Linux", "price": 1.5})
    gone = pd.DataFrame({"ts": [pd.Timestamp("2024-05-08")], "provider": "gcp", "region": "r2", "zone": "r2",
                         "instance_type": "a2-1g", "product": "Linux", "price": 0.24})
    m = P.market_stats(pd.concat([live, gone]), "7D").set_index("zone")
    assert m.loc["r1", "days_since_change"] == 0 and m.loc["r2", "days_since_change"] > 600
    assert m.loc["r2", "hours"] == 168  # the price it held, carried over the whole window
    public = pd.DataFrame({"provider": "gcp", "region": ["r1", "r2"], "instance_type": "a2-1g", "pool_units": 1.0})
    od = P.cost.Offer("public", "gcp", "r1", "a2-1g", 1.0, 3.67)
    row = P.recommend_spot("c/a100/gpu", "gpu", np.full(24 * 7, 8.0), public, m.reset_index(), None, FREE,
                           P.SpotPolicy(interruptible_share=0.5), od)
    assert row["action"] == "use_spot" and row["zone"] == "r1"  # not 2024's 0.24 in r2
    row = P.recommend_spot("c/a100/gpu", "gpu", np.full(24 * 7, 8.0), public[public["region"] == "r2"],
                           m.reset_index(), None, FREE, P.SpotPolicy(interruptible_share=0.5), od)
    assert row["action"] == "on_demand" and "changed within 365 days" in row["reason"]


def test_reservations_only_as_many_as_still_pay_if_demand_falls() -> None:
    offer = P.cost.Offer("public", "cloud", "r1", "m-1", 1.0, 1.0, reserved_1y=0.6)
    load = np.full(720, 10.0)
    policy = P.ReservationPolicy(terms=("1y",))
    full = P.recommend_reservations(load, offer, FREE, policy)
    assert full["instances"].tolist() == [10]
    hedged = P.recommend_reservations(load, offer, FREE, policy, downside=(0.85, load * 0.85))
    assert hedged["instances"].tolist() == [9] and "still pay with demand x 0.85" in hedged["reason"].iloc[0]
    # a level that pays only on this exact path is not recommended at all
    thin = np.where(np.arange(720) % 10 < 7, 1.0, 0.0)  # one instance running 70% of hours, break-even 60%
    assert P.recommend_reservations(thin, offer, FREE, policy)["instances"].tolist() == [1]
    assert P.recommend_reservations(thin, offer, FREE, policy, downside=(0.85, np.clip(thin - 0.15 * 1, 0, None) * (
        np.arange(720) % 10 < 5))).empty


def test_the_plan_is_priced_again_when_its_own_public_load_prefers_another_machine() -> None:
    """The default split leaves public 6-10 A100s, which the 8-H100 box (at 20/h) carries for
    least; the plan it recommends, the running fleet, leaves public 2 A100s for 2 hours a day,
    which 1-A100 machines carry for least: the plan is priced on those."""
    cat = _gpu_catalog()
    cat.loc[cat["instance_type"] == "h100-8x", "on_demand_price"] = 20.0
    ds = pd.date_range("2026-03-02", periods=24 * 28, freq="h")
    y = np.where(ds.hour.isin([14, 15]), 14.0, 10.0)
    history = pd.DataFrame({"unique_id": "c/a100/gpu", "ds": ds, "y": y})
    fds = pd.date_range(ds[-1] + pd.Timedelta("1h"), periods=24, freq="h")
    forecast = pd.DataFrame({"unique_id": "c/a100/gpu", "ds": fds, "mean": np.where(fds.hour.isin([14, 15]), 14., 10.)})
    capacity = pd.DataFrame({"unique_id": ["c/a100/gpu"], "capacity": [12.0], "units_per_node": [4.0]})
    offers = P.select_offers(cat, "gpu", "a100")
    choices = P.cost.public_choices(P.cost.qualifying_offers(cat, "gpu", "a100"))
    first = P.allocation.public_load(np.r_[y, forecast["mean"]], P.DEFAULT_SPLIT, offers)
    assert cheapest_public(first, choices, FREE, offers["public"]).instance_type == "h100-8x"
    alloc = P.make_plan(history, forecast, capacity, cat, P.PlanPolicy(costs=FREE))["allocation"]
    best = alloc.loc[alloc["recommended"]].iloc[0]
    assert best["plan"] == "running_fleet" and alloc["offers"].str.contains("public: cloud/r1/a100-1x").all()
    assert abs(best["monthly_cost"] - 730 * (12.0 + 2 * 2 * 3.8 / 24)) < 1e-6


def test_the_downside_public_load_is_on_the_machines_bought_for_the_path() -> None:
    one = {loc: P.cost.Offer(loc, "x", "r", f"{loc}-1", 1.0, 1.0) for loc in ("private", "public", "edge")}
    path = np.full(48, 10.0)
    for fill, public, downside in (("layered", 5.0, 8.5 - 5.0), ("proportional", 5.0, 8.5 * 0.5)):
        policy = P.AllocationPolicy(fill=fill)
        assert np.allclose(P.allocation.public_load(path, P.DEFAULT_SPLIT, one, policy), public)
        # private and edge keep the machines bought for 10: layered, they serve 5 of 8.5 units; in
        # proportion, each its share of the 8.5 (2.55 and 1.7), and public the other half
        assert np.allclose(P.allocation.public_load(path, P.DEFAULT_SPLIT, one, policy, at=0.85), downside)


def test_sizes_of_one_price_per_unit_leave_spot_the_share_it_fills() -> None:
    """Cloud families price their sizes alike per vCPU: the tie went to the biggest by name
    (m7i.16xlarge), so 16 interruptible cores of a 64-core load 'never filled one 64-unit
    machine' and spot, 70% cheaper on the 8-core size, was not used."""
    cat = pd.DataFrame([
        ("aws", "us-east-1", "m7i.16xlarge", "public", "cpu", 64, 64, 256.0, 3.2256, None, None, None),
        ("aws", "us-east-1", "m7i.2xlarge", "public", "cpu", 8, 8, 32.0, 0.4032, None, None, None),
    ], columns=COLS)
    history, forecast, capacity = steady_pool("c1/full/cpu", 64.0, 64.0, 64.0, hi_80=64.0)
    ds = history["ds"]
    spot = pd.concat([pd.DataFrame({"ts": ds, "provider": "aws", "region": "us-east-1", "zone": "us-east-1a",
                                    "instance_type": t, "product": "Linux/UNIX", "price": p})
                      for t, p in (("m7i.2xlarge", 0.12), ("m7i.16xlarge", 0.96))], ignore_index=True)
    markets = P.market_stats(spot, "7D", on_demand=cat)
    plan = P.make_plan(history, forecast, capacity, cat, P.PlanPolicy(costs=FREE), spot_markets=markets)
    row = plan["spot"].iloc[0]
    assert row["action"] == "use_spot" and row["instance_type"] == "m7i.2xlarge" and row["spot_instances"] == 2.0
    # 8 on-demand 2xlarge for 64 cores, or 6 of them and 2 spot ones: 2 x (0.4032 - 0.12) an hour
    assert row["expected_monthly_saving"] == pytest.approx(730 * 2 * (0.4032 - 0.12))
