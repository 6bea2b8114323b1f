"""The pure planner: cost model, offer selection, split simulator, reservations, pre-scaling."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import planner as P
from planner.cost import LocationCost, Offer

FREE = P.CostPolicy(private=LocationCost(), public=LocationCost(), edge=LocationCost(), hours_per_month=730.0)


def steady_pool(uid: str = "c/h100/gpu", y: float = 40.0, capacity: float = 64.0, units_per_node: float = 4.0,
                days: int = 14, mean: float | None = None, hi_80: float | None = None
                ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """``make_plan``'s history, forecast and capacity of one pool at a steady ``y``: ``days``
    of hourly history, the next 24 hours forecast at ``mean`` (default ``y``), with ``hi_80``
    when given."""
    ds = pd.date_range("2026-01-01", periods=24 * days, freq="h")
    history = pd.DataFrame({"unique_id": uid, "ds": ds, "y": y})
    forecast = pd.DataFrame({"unique_id": uid, "ds": pd.date_range(ds[-1], periods=25, freq="h")[1:],
                             "mean": y if mean is None else mean, **({} if hi_80 is None else {"hi_80": hi_80})})
    return history, forecast, pd.DataFrame({"unique_id": [uid], "capacity": [capacity],
                                            "units_per_node": [units_per_node]})


def catalog() -> pd.DataFrame:
    rows = [
        ("onprem", "dc", "h100-4x", "private", "gpu", 4, 8.0, 6.0, 5.0, 4 * 989.0),
        ("onprem", "dc", "a100-4x", "private", "gpu", 4, 4.0, 3.0, 2.5, 4 * 312.0),
        ("onprem", "dc", "cpu-64c", "private", "cpu", 64, 1.0, 0.8, 0.7, 4.0),
        ("cloud", "r1", "h100-8x", "public", "gpu", 8, 96.0, 60.0, 40.0, 8 * 989.0),
        ("cloud", "r1", "a100-8x", "public", "gpu", 8, 32.0, 20.0, 14.0, 8 * 312.0),
        ("cloud", "r1", "l4-4x", "public", "gpu", 4, 4.0, 2.5, 1.7, 4 * 121.0),
        ("cloud", "r1", "cpu-64", "public", "cpu", 64, 3.2, 2.0, 1.3, 4.0),
        ("edge", "e1", "l4-1x", "edge", "gpu", 1, 0.9, 0.7, 0.5, 121.0),
        ("edge", "e1", "cpu-16c", "edge", "cpu", 16, 0.8, 0.6, 0.5, 1.0),
    ]
    cols = ["provider", "region", "instance_type", "location", "resource", "units", "on_demand_price",
            "reserved_1y_price", "reserved_3y_price", "tflops"]
    return pd.DataFrame(rows, columns=cols)


def test_cpu_offers_must_have_the_pool_machines_memory_per_vcpu() -> None:
    """Cheapest per vCPU is not enough: a shared-core 1-vCPU, 0.6 GB machine cannot run the
    work of 64-core, 256 GB nodes; a machine with as much memory per vCPU can."""
    cols = ["provider", "region", "instance_type", "location", "resource", "units", "vcpus", "memory_gb",
            "on_demand_price"]
    cat = pd.DataFrame([
        ("onprem", "dc", "batch-64c", "private", "cpu", 64, 64, 256.0, 1.0),
        ("gcp", "r1", "f1-micro", "public", "cpu", 1, 1, 0.6, 0.0076),
        ("gcp", "r1", "c2-8", "public", "cpu", 8, 8, 16.0, 0.30),
        ("gcp", "r1", "n2-8", "public", "cpu", 8, 8, 32.0, 0.39),
        ("gcp", "r1", "mystery-8", "public", "cpu", 8, 8, None, 0.10),
    ], columns=cols)
    assert P.select_offers(cat, "cpu", "batch")["public"].instance_type == "n2-8"
    assert P.select_offers(cat, "cpu", "batch", min_memory_ratio=0.1)["public"].instance_type == "f1-micro"
    # only the regions the buyer allows (n2-8 elsewhere, c2-8 too lean: no public offer is left)
    cat.loc[cat["instance_type"] == "n2-8", "region"] = "r2"
    assert P.select_offers(cat, "cpu", "batch", regions=("r2",))["public"].region == "r2"
    assert "public" not in P.select_offers(cat, "cpu", "batch", regions=("r1",))
    cat.loc[cat["instance_type"] == "n2-8", "region"] = "r1"
    # without the pool machine's memory nothing can be compared: price per vCPU decides
    assert P.select_offers(cat.drop(columns="memory_gb"), "cpu", "batch")["public"].instance_type == "f1-micro"
    # ... unless the pool's own nodes report it: 3 GiB per vCPU, also with no machine of its own listed
    public = cat[cat["location"] == "public"]
    assert P.select_offers(public, "cpu", "batch")["public"].instance_type == "f1-micro"
    assert P.select_offers(public, "cpu", "batch", memory_per_unit=3.0)["public"].instance_type == "n2-8"
    assert P.select_offers(public, "cpu", "batch", memory_per_unit=1.5)["public"].instance_type == "c2-8"


def test_cost_model_formula() -> None:
    lc = LocationCost(storage_surcharge=0.1, network_amplification=1.2, idle_penalty=0.5)
    assert lc.effective(10.0) == pytest.approx(10 * 1.1 * 1.2)
    offer = Offer("private", "p", "r", "t", units=4.0, price=8.0)
    cost = P.cost.provisioned_cost(np.array([2, 2]), np.array([8.0, 5.0]), offer, lc)
    unit = 2.0 * 1.1 * 1.2
    assert cost["compute"] == pytest.approx(16 * unit)
    assert cost["idle_penalty"] == pytest.approx(3 * unit * 0.5)  # 3 idle unit-hours in the second hour
    with pytest.raises(ValueError, match="network_amplification"):
        LocationCost(network_amplification=0.9)


def test_offers_convert_gpus_by_tflops_and_never_downgrade() -> None:
    h100 = P.select_offers(catalog(), "gpu", "h100")
    assert h100["private"].instance_type == "h100-4x"  # the pool's own machine
    assert h100["public"].instance_type == "h100-8x"  # the L4s are cheaper per TFLOP but too small
    assert "edge" not in h100
    a100 = P.select_offers(catalog(), "gpu", "a100")
    assert a100["private"].instance_type == "a100-4x"
    # an H100 does 3.2 A100s of work for 3 times the price: the cost-aware pick for an A100 pool
    assert a100["public"].instance_type == "h100-8x"
    assert a100["public"].units == pytest.approx(8 * 989 / 312)
    anything = P.select_offers(catalog(), "gpu", "h100", min_tflops_ratio=0.0)
    assert anything["public"].instance_type == "l4-4x"
    assert anything["public"].units == pytest.approx(4 * 121 / 989)
    # without TFLOPS nothing can stand in for the pool's own machine
    blind = P.select_offers(catalog().drop(columns="tflops"), "gpu", "h100")
    assert {k: v.instance_type for k, v in blind.items()} == {"private": "h100-4x"}
    # an unpriced machine is no offer, but it still says what the pool runs on
    unpriced = catalog()
    unpriced.loc[unpriced["instance_type"] == "h100-4x", "on_demand_price"] = np.nan
    offers = P.select_offers(unpriced, "gpu", "h100")
    assert "private" not in offers and offers["public"].instance_type == "h100-8x"
    cpu = P.select_offers(catalog(), "cpu", "cpu")
    assert {k: v.units for k, v in cpu.items()} == {"private": 64, "public": 64, "edge": 16}


def test_simulate_prices_fixed_and_elastic_capacity_by_hand() -> None:
    offers = {"private": Offer("private", "p", "r", "own", 4.0, 4.0), "public": Offer("public", "c", "r", "od", 1.0, 3.0)}
    demand = np.array([8.0, 4.0])  # two hours
    share = P.AllocationPolicy(fill="proportional")
    out = P.simulate(demand, P.Split(0.5, 0.5, 0.0), offers, FREE, share)
    # private: 0.5 x peak 8 = 4 units = 1 instance at 1/unit-hour for 2 hours = 8; public: 4 + 2 units at 3
    assert out["private_cost"] * 2 / 730 == pytest.approx(8.0)
    assert out["public_cost"] * 2 / 730 == pytest.approx(18.0)
    assert out["spill_units"] == 0
    # an edge share with nothing to buy at the edge spills to public
    spilled = P.simulate(demand, P.Split(0.5, 0.3, 0.2), offers, FREE, share)
    assert spilled["spill_units"] == pytest.approx(0.2 * 12 * 730 / 2)  # unit-hours per month
    # layered (the default): private carries the bottom of the curve, half the 12 unit-hours:
    # min(d, 3) = 3 + 3, so one 4-unit machine (8 unit-hours, 8); public only the peak's 4 units: 12
    out = P.simulate(demand, P.Split(0.5, 0.5, 0.0), offers, FREE)
    assert out["private_cost"] * 2 / 730 == pytest.approx(8.0)
    assert out["public_cost"] * 2 / 730 == pytest.approx(12.0)
    # what each location really carries: the whole machine takes 8 of the 12 unit-hours, not 6
    assert (out["carried_private"], out["carried_public"], out["carried_edge"]) == pytest.approx((8 / 12, 4 / 12, 0))
    assert P.recommend._carried_note({"private": 0.5, "public": 0.5, "edge": 0.0, **{
        k: out[k] for k in P.allocation.CARRIED}}) == (
        " (as bought, private carries 67%, public 33%, edge 0% of the unit-hours)")
    assert P.layers.layer_top(demand, 6.0) == pytest.approx(3.0)
    assert P.layers.layer_top(demand, 12.0) == 8.0 and P.layers.layer_top(demand, 0.0) == 0.0
    # the edge share has nothing to buy: it goes to public (20% of the 12 unit-hours), priced as
    # the same split with that share on public; private's machine stays at the bottom
    spilled = P.simulate(demand, P.Split(0.5, 0.3, 0.2), offers, FREE)
    assert spilled["spill_units"] == pytest.approx(0.2 * 12 * 730 / 2)
    assert spilled["monthly_cost"] == pytest.approx(P.simulate(demand, P.Split(0.5, 0.5, 0.0), offers, FREE)[
        "monthly_cost"])
    # nor does a missing private offer lift the edge layer off the bottom: 3-5-2 there prices as 0-8-2
    edge_only = {"public": offers["public"], "edge": Offer("edge", "e", "r", "box", 1.0, 1.5)}
    bumpy = np.array([1.0, 1.0, 1.0, 1.0, 10.0])
    assert P.simulate(bumpy, P.DEFAULT_SPLIT, edge_only, FREE)["monthly_cost"] == pytest.approx(
        P.simulate(bumpy, P.Split(0.0, 0.8, 0.2), edge_only, FREE)["monthly_cost"])
    # a layer of all the demand is the peak, even where the sums differ in the last bits
    big = np.random.default_rng(4).uniform(2000, 10000, 1344).round(3) * 0.85
    assert P.layers.layer_top(big, float(np.sort(big).sum())) == big.max()
    assert np.isfinite(P.simulate(big, P.Split(1.0, 0.0, 0.0), offers, FREE)["monthly_cost"])
    # no demand: nothing carried, and no note about it
    assert P.recommend._carried_note({"private": 0.3, "public": 0.5, "edge": 0.2, **{
        k: 0.0 for k in P.allocation.CARRIED}}) == ""


def test_tuner_follows_the_prices() -> None:
    t = np.arange(24 * 14)
    flat = np.full(t.size, 40.0)
    offers = P.select_offers(catalog(), "cpu", "cpu")
    tuned = P.tune_split(flat * 64, offers, P.CostPolicy()).set_index("plan")
    # steady load and a private cloud three times cheaper: as much private as the bounds allow
    assert tuned.loc["tuned", "private"] == pytest.approx(0.70)
    assert tuned.loc["tuned", "savings_vs_default"] > 0
    assert tuned.loc["default_3_5_2", ["private", "public", "edge"]].tolist() == [0.3, 0.5, 0.2]
    # a load that idles most of the day makes owned capacity expensive: less private
    spiky = np.where(t % 24 < 2, 4000.0, 40.0)
    costly = P.CostPolicy(private=LocationCost(0.05, 1.0, 2.0))
    spiky_split = P.tune_split(spiky, offers, costly).set_index("plan").loc["tuned"]
    assert spiky_split["private"] < 0.70
    # nothing to buy at the edge: the tuned split gives the edge no share
    gpu = P.select_offers(catalog(), "gpu", "h100")
    no_edge = P.tune_split(np.full(t.size, 40.0), gpu, P.CostPolicy()).set_index("plan")
    assert no_edge.loc["tuned", "edge"] == 0 and no_edge.loc["tuned", "spill_units"] == 0
    assert no_edge.loc["default_3_5_2", "spill_units"] > 0
    # only public to buy: everything runs there, no crash for want of a split
    only_public = {"public": gpu["public"]}
    alone = P.tune_split(np.full(t.size, 40.0), only_public, P.CostPolicy()).set_index("plan")
    assert alone.loc["tuned", ["private", "public", "edge"]].tolist() == [0.0, 1.0, 0.0]
    # no edge offer: the edge share goes, but public keeps its own upper bound (private can grow);
    # here private's 30% floor binds first
    no_edge_splits = P.candidate_splits(P.AllocationPolicy(), ("private", "public"))
    assert max(sp.public for sp in no_edge_splits) == pytest.approx(0.7)
    assert all(sp.edge == 0 for sp in no_edge_splits)
    for split in P.candidate_splits(P.AllocationPolicy()):
        assert 0.30 - 1e-9 <= split.private <= 0.70 + 1e-9 and abs(split.private + split.public + split.edge - 1) < 1e-9


def test_reservations_follow_the_newsvendor_rule() -> None:
    offer = Offer("public", "c", "r", "od", units=1.0, price=1.0, reserved_1y=0.4, reserved_3y=0.7)
    busy_60 = np.tile(np.r_[np.full(6, 10.0), np.zeros(4)], 50)  # 10 units in 60% of hours
    rec = P.recommend_reservations(busy_60, offer, FREE).set_index("term")
    assert rec.loc["1y", "reserved_units"] == 10  # 0.4 < 0.6: worth it
    assert "3y" not in rec.index  # 0.7 > 0.6: idle too often to pay off
    assert rec.loc["1y", "monthly_savings"] == pytest.approx((0.6 * 10 * 1.0 - 10 * 0.4) * 730)
    assert rec.loc["1y", "expected_utilization"] == pytest.approx(0.6)
    assert rec.loc["1y", "break_even_utilization"] == pytest.approx(0.4)  # used above it, or not recommended
    assert rec.loc["1y", "break_even_months"] == pytest.approx(12 * 0.4 / 0.6)
    assert rec.loc["1y", "savings_pct"] == pytest.approx((6 - 4) / 6)
    assert rec.loc["1y", ["min_units_used", "max_units_used"]].tolist() == [0.0, 10.0]
    assert P.recommend_reservations(np.zeros(10), offer, FREE).empty


def test_reservations_count_whole_instances() -> None:
    """3 GPUs then 11.1 GPUs on 4-GPU instances: one instance runs every hour and three
    run half of them (on demand is billed per instance, as the allocation bills it). At a
    reserved price of a quarter of on demand all three are worth reserving; the sizing on
    fractional units reserved two and left savings behind."""
    offer = Offer("public", "c", "r", "pub-4x", units=4.0, price=8.0, reserved_1y=4.0, reserved_3y=2.0)
    load = np.r_[np.full(72, 3.0), np.full(72, 11.1)]
    rec = P.recommend_reservations(load, offer, FREE).set_index("term")
    assert rec.loc["3y", "instances"] == 3 and rec.loc["1y", "instances"] == 1
    hours = 730 / load.size
    on_demand = (72 * 1 + 72 * 3) * 8.0 * hours  # instance-hours x price
    assert rec.loc["3y", "monthly_cost_on_demand"] == pytest.approx(on_demand)
    assert rec.loc["3y", "monthly_cost_reserved"] == pytest.approx(3 * 2.0 * load.size * hours)
    # the chosen count is the cheapest one
    for k in range(0, 5):
        cost = (k * 2.0 * load.size + np.clip(np.ceil(load / 4) - k, 0, None).sum() * 8.0) * hours
        assert cost >= rec.loc["3y", "monthly_cost_reserved"] - 1e-6


def test_prescale_acts_ahead_and_does_not_flap() -> None:
    ds = pd.date_range("2026-01-01", periods=10, freq="h")
    upper = np.array([10, 10, 10, 30, 30, 10, 30, 10, 10, 10], dtype=float)
    # without recent demand the margin is a quarter of the forecast's peak: need = mean + 6
    fc = pd.DataFrame({"unique_id": "c/p/gpu", "ds": ds, "mean": upper - 6.0, "hi_80": upper})
    policy = P.PrescalePolicy(lead="1h", stabilization="3h")
    s = P.prescale_schedule(fc, capacity=12.0, units_per_instance=4.0, policy=policy)
    assert s.loc[2, "action"] == "scale_up" and s.loc[2, "target_capacity"] == 32  # one step before 03:00
    assert (s.loc[3:8, "action"] == "hold").all()  # the dip at 05:00 is shorter than the window
    assert s.loc[9, "action"] == "scale_down" and s.loc[9, "target_capacity"] == 12
    assert s["instances_delta"].sum() == 0
    assert (s["target_capacity"] % 4 == 0).all()
    # a dip in the last hour alone is no evidence for scaling down
    tail = fc.assign(mean=np.r_[np.full(9, 24.0), 0.0])
    end = P.prescale_schedule(tail, capacity=32.0, units_per_instance=4.0, policy=policy)
    assert (end["action"] == "hold").all()
    with pytest.raises(ValueError, match="one series"):
        P.prescale_schedule(pd.concat([fc, fc.assign(unique_id="x")]), 12.0, 4.0)


def test_make_plan_uses_future_hours_and_reserves_for_the_spill() -> None:
    ds = pd.date_range("2026-01-01", periods=24 * 14, freq="h")
    y = 40 + 20 * np.sin(2 * np.pi * np.arange(len(ds)) / 24)
    history = pd.DataFrame({"unique_id": "c/h100/gpu", "ds": ds, "y": y})
    # a forecast made 20 hours before the cutoff: only its last 4 hours are still ahead
    fds = pd.date_range(ds[-20], periods=24, freq="h")
    forecast = pd.DataFrame({"unique_id": "c/h100/gpu", "ds": fds, "mean": 40.0, "hi_80": 50.0, "model_id": "m1"})
    capacity = pd.DataFrame({"unique_id": ["c/h100/gpu", "c/h100/mem", "junk"], "capacity": [64.0, 1.0, 1.0],
                             "units_per_node": [4.0, 1.0, 1.0]})
    plan = P.make_plan(history, forecast, capacity, catalog())
    pre = plan["prescale"]
    assert len(pre) == 4 and (pd.to_datetime(pre["ts"]) > ds[-1]).all() and (pre["model_id"] == "m1").all()
    tuned = plan["allocation"].set_index("plan").loc["tuned"]
    assert tuned["edge"] == 0  # no H100-class GPU at the edge
    assert plan["allocation"].set_index("plan").loc["tuned", "expected_savings"] >= 0
    split = P.Split(tuned["private"], tuned["public"], tuned["edge"])
    offers = P.select_offers(catalog(), "gpu", "h100")
    load = P.allocation.public_load(np.r_[y, np.full(4, 40.0)], split, offers)
    path = np.r_[y, np.full(4, 40.0)]
    assert load[np.argmin(path)] == 0 and load[np.argmax(path)] > 0  # public carries the peaks, not the base
    assert P.make_plan(history, forecast, capacity.iloc[0:0], catalog())["allocation"].empty
    assert (plan["allocation"]["current_fleet_cost"] > 0).all()  # the running fleet, for reference


def _spot_prices() -> pd.DataFrame:
    """Two zones of the public a100-8x (on-demand 32/h): zone a is cheaper in calm hours
    but spikes past on-demand for 20 of the last 7 days' hours; zone b is steady."""
    ts = pd.date_range("2026-01-01", periods=24 * 10, freq="h")
    a = np.full(len(ts), 8.0)
    a[-100:-80] = 40.0
    b = np.full(len(ts), 11.0)
    rows = [pd.DataFrame({"ts": ts, "provider": "cloud", "region": "r1", "zone": z, "instance_type": "a100-8x",
                          "product": "Linux", "price": p}) for z, p in (("r1a", a), ("r1b", b))]
    return pd.concat(rows, ignore_index=True)


def test_spot_market_stats_price_the_spikes_in() -> None:
    od = catalog()[["provider", "region", "instance_type", "on_demand_price"]]
    m = P.market_stats(_spot_prices(), "7D", on_demand=od).set_index("zone")
    assert m.loc["r1a", "price_now"] == 8.0 and m.loc["r1a", "hours_above_on_demand"] == 20
    assert m.loc["r1a", "price_expected"] == pytest.approx((8.0 * 148 + 40.0 * 20) / 168)
    assert m.loc["r1b", "price_expected"] == pytest.approx(11.0) and m.loc["r1b", "hours_above_on_demand"] == 0


def test_spot_picks_the_cheapest_expected_market_and_skips_predicted_spikes() -> None:
    cat = catalog()
    public = P.cost.qualifying_offers(cat, "gpu", "a100")
    public = public[public["location"] == "public"]
    markets = P.market_stats(_spot_prices(), "7D", on_demand=cat)
    od = P.select_offers(cat, "gpu", "a100")["public"]
    # public on-demand is cheapest per A100-unit of work on the H100s (96/h for 25.4 units)
    assert od.instance_type == "h100-8x" and od.unit_price == pytest.approx(96.0 / (8 * 989.0 / 312.0))
    load = np.full(24 * 30, 128.0)  # 128 A100-units on public, 32 of them interruptible
    policy = P.SpotPolicy(interruptible_share=0.25)
    row = P.recommend_spot("c/a100/gpu", "gpu", load, public, markets, None, FREE, policy, od)
    # zone a is cheaper in calm hours (8 vs 11) but its spikes make it dearer on average
    assert row["action"] == "use_spot" and row["zone"] == "r1b" and row["spot_instances"] == 4.0
    assert row["discount"] == pytest.approx(1 - (11.0 / 8) / od.unit_price)
    # whole instances: 6 H100 boxes for 128 units, or 4 for the other 96 plus 4 spot A100 boxes
    assert row["expected_monthly_saving"] == pytest.approx(730 * (6 * 96.0 - 4 * 96.0 - 4 * 11.0))
    probs = pd.DataFrame({"provider": "cloud", "zone": ["r1a", "r1b"], "instance_type": "a100-8x",
                          "product": "Linux", "p_spike": [0.1, 0.9]})
    row = P.recommend_spot("c/a100/gpu", "gpu", load, public, markets, probs, FREE, policy, od)
    assert row["zone"] == "r1a" and row["p_spike"] == 0.1 and "1 market(s) skipped" in row["reason"]
    # the spike model's own alert threshold (0.05 here) is the limit when it is lower
    row = P.recommend_spot("c/a100/gpu", "gpu", load, public, markets, probs.assign(threshold=0.05), FREE,
                           policy, od)
    assert row["action"] == "on_demand" and "expected to spike" in row["reason"]
    strict = P.SpotPolicy(interruptible_share=0.25, min_discount=0.7)
    row = P.recommend_spot("c/a100/gpu", "gpu", load, public, markets, None, FREE, strict, od)
    assert row["action"] == "on_demand" and "saves only" in row["reason"]
    off = P.recommend_spot("c/a100/gpu", "gpu", load, public, markets, None, FREE, P.SpotPolicy(0.0), od)
    assert off["action"] == "on_demand" and off["expected_monthly_saving"] == 0.0
    assert off["reason"] == "spot is off (interruptible_share 0)"
    # interruptible load that never fills a spot machine stays on on-demand: 0.25 x 20 units = 5 of 8
    small = P.recommend_spot("c/a100/gpu", "gpu", np.full(48, 20.0), public, markets, None, FREE, policy, od)
    assert small["action"] == "on_demand" and "never fills one 8-unit machine" in small["reason"]


def test_make_plan_reserves_only_what_stays_off_spot() -> None:
    ds = pd.date_range("2026-01-01", periods=24 * 28, freq="h")
    history = pd.DataFrame({"unique_id": "c/a100/gpu", "ds": ds, "y": 400.0})
    forecast = pd.DataFrame({"unique_id": "c/a100/gpu", "ds": pd.date_range(ds[-1], periods=25, freq="h")[1:],
                             "mean": 400.0, "hi_80": 420.0})
    # the running fleet carries half the demand: public carries the rest, whichever plan is recommended
    capacity = pd.DataFrame({"unique_id": ["c/a100/gpu"], "capacity": [200.0], "units_per_node": [4.0]})
    cat = catalog()
    markets = P.market_stats(_spot_prices(), "7D", on_demand=cat)
    without = P.make_plan(history, forecast, capacity, cat)
    with_spot = P.make_plan(history, forecast, capacity, cat, spot_markets=markets)
    assert "spot" not in without and with_spot["spot"]["action"].tolist() == ["use_spot"]
    res0, res1 = without["reservation"], with_spot["reservation"]
    assert not res0.empty
    res0 = res0.groupby("term")["reserved_units"].first()
    res1 = res1.groupby("term")["reserved_units"].first() if not res1.empty else res0 * 0
    assert (res1 < res0).all()  # a quarter of the public load went to spot


def test_a_zero_price_is_no_offer() -> None:
    """Price lists carry 0 as a placeholder (GCP does): never a free machine to plan on."""
    cat = catalog()
    free = cat[cat["instance_type"] == "a100-8x"].assign(instance_type="free-8x", on_demand_price=0.0)
    cat = pd.concat([cat, free], ignore_index=True)
    assert P.select_offers(cat, "gpu", "a100")["public"].instance_type != "free-8x"
    spot = _spot_prices().assign(instance_type="free-8x", price=0.0)
    markets = P.market_stats(pd.concat([_spot_prices(), spot]), "7D", on_demand=cat)
    public = P.cost.qualifying_offers(cat, "gpu", "a100")
    row = P.recommend_spot("c/a100/gpu", "gpu", np.full(48, 128.0), public[public["location"] == "public"],
                           markets, None, FREE, P.SpotPolicy(), P.select_offers(cat, "gpu", "a100")["public"])
    assert row["instance_type"] == "a100-8x" and row["action"] == "use_spot"
    # a placeholder 0 inside a real series does not pull its mean down, nor a 0 on-demand price
    # make every hour "above on-demand"
    holes = _spot_prices()
    holes.loc[(holes["zone"] == "r1b") & (holes.index % 24 < 12), "price"] = 0.0
    od0 = cat.assign(on_demand_price=cat["on_demand_price"].where(cat["instance_type"] != "a100-8x", 0.0))
    m = P.market_stats(holes, "7D", on_demand=od0).set_index("zone")
    assert m.loc["r1b", "price_expected"] == pytest.approx(11.0) and pd.isna(m.loc["r1b", "hours_above_on_demand"])


def test_a_memory_heavy_pool_is_planned_when_the_policy_allows_leaner_machines() -> None:
    """8 GiB per vCPU nodes; the public cloud sells 4 GiB per vCPU at most: by default nothing
    public can run the pool (a warning, no allocation); offers.min_memory_ratio 0.5 lets it."""
    from dataclasses import replace

    cols = ["provider", "region", "instance_type", "location", "resource", "units", "vcpus", "memory_gb",
            "on_demand_price", "reserved_1y_price", "reserved_3y_price"]
    cat = pd.DataFrame([
        ("onprem", "dc", "mem-64c", "private", "cpu", 64, 64, 512.0, 2.0, None, None),
        ("cloud", "r1", "m-64", "public", "cpu", 64, 64, 256.0, 3.2, 2.0, 1.3),
    ], columns=cols)
    history, forecast, capacity = steady_pool("c/mem/cpu", 100.0, 192.0, 64.0, hi_80=110.0)
    assert P.make_plan(history, forecast, capacity, cat)["allocation"].empty
    lean = replace(P.PlanPolicy(), offers=P.OfferPolicy(min_memory_ratio=0.5))
    alloc = P.make_plan(history, forecast, capacity, cat, lean)["allocation"]
    assert set(alloc["offers"]) == {"private: onprem/dc/mem-64c; public: cloud/r1/m-64"}  # named in the plan
    # the nodes' own memory (their mem capacity over their cpu capacity) is what the work needs:
    # 4 GiB per vCPU reported, so the public 4 GiB machine fits even under the default policy
    with_mem = pd.concat([capacity, pd.DataFrame({"unique_id": ["c/mem/mem"], "capacity": [768.0],
                                                  "units_per_node": [256.0]})], ignore_index=True)
    assert not P.make_plan(history, forecast, with_mem, cat)["allocation"].empty


def test_a_gpu_pool_whose_machine_has_no_tflops_is_told_why_it_has_no_public_offer(caplog) -> None:
    cols = ["provider", "region", "instance_type", "location", "resource", "units", "on_demand_price", "tflops"]
    cat = pd.DataFrame([("fleet", "private", "a100-8g", "private", "gpu", 8, 10.0, None),
                        ("gcp", "r1", "a2-highgpu-8g", "public", "gpu", 8, 29.0, 8 * 312.0)], columns=cols)
    history, forecast, capacity = steady_pool("c/a100/gpu", 10.0, 16.0, 8.0, hi_80=11.0)
    with caplog.at_level("WARNING", logger="planner.plan"):
        assert P.make_plan(history, forecast, capacity, cat)["allocation"].empty
    assert "the pool's machine a100-8g has no TFLOPS in the catalog" in caplog.text


def test_a_market_under_the_discount_floor_does_not_hide_one_above_it() -> None:
    """The market that would save most (9% off) is under a 10% floor; one that saves less
    per month but is 12% off qualifies, and is recommended: adding a worse market never
    removes a valid recommendation."""
    od = Offer("public", "aws", "us-east-1", "od-1", units=1.0, price=1.0)
    offers = pd.DataFrame({"provider": "aws", "region": "us-east-1", "instance_type": ["od-1", "a-1", "b-5"],
                           "pool_units": [1.0, 1.0, 5.0]})

    def market(it: str, price: float) -> dict:
        return {"provider": "aws", "zone": "us-east-1a", "instance_type": it, "product": "Linux",
                "region": "us-east-1", "price_now": price, "price_expected": price, "price_max": price,
                "hours": 168, "hours_above_on_demand": 0}

    both = pd.DataFrame([market("a-1", 0.91), market("b-5", 5 * 0.88)])
    policy = P.SpotPolicy(interruptible_share=0.5, min_discount=0.10)
    load = np.full(100, 16.0)
    alone = P.recommend_spot("c/p/cpu", "cpu", load, offers, both.iloc[[1]], None, FREE, policy, od)
    row = P.recommend_spot("c/p/cpu", "cpu", load, offers, both, None, FREE, policy, od)
    assert alone["action"] == row["action"] == "use_spot" and row["instance_type"] == "b-5"
    assert row["expected_monthly_saving"] == pytest.approx(alone["expected_monthly_saving"])
    only_low = P.recommend_spot("c/p/cpu", "cpu", load, offers, both.iloc[[0]], None, FREE, policy, od)
    assert only_low["action"] == "on_demand" and "saves only 9%" in only_low["reason"]


def test_a_pool_without_a_node_size_is_not_prescaled_and_the_others_are_planned(caplog) -> None:
    ds = pd.date_range("2026-01-01", periods=24 * 7, freq="h")
    history = pd.concat([pd.DataFrame({"unique_id": u, "ds": ds, "y": 10.0}) for u in ("c/a/cpu", "c/b/cpu")])
    fc = pd.concat([pd.DataFrame({"unique_id": u, "ds": pd.date_range(ds[-1], periods=5, freq="h")[1:],
                                  "mean": 10.0, "hi_80": 12.0}) for u in ("c/a/cpu", "c/b/cpu")])
    capacity = pd.DataFrame({"unique_id": ["c/a/cpu", "c/b/cpu"], "capacity": [64.0, 0.0],
                             "units_per_node": [32.0, 0.0]})
    plan = P.make_plan(history, fc, capacity, catalog())
    assert set(plan["prescale"]["unique_id"]) == {"c/a/cpu"}
    assert "c/b/cpu: no instance size" in caplog.text


def test_the_running_fleet_is_priced_as_private_machines_with_the_excess_on_public() -> None:
    """10 units running (2.5 private 4-unit machines: the fleet as it runs, not rounded up to
    catalog machines) serve demand 6 and 14: 10 units of private machines all month, idle 4
    then 0 units at 30% of their unit price, and 4 units over them on one public 8-unit
    machine in the second hour."""
    costs = P.CostPolicy(private=LocationCost(idle_penalty=0.3), public=LocationCost(), edge=LocationCost(),
                         hours_per_month=730.0)
    offers = {"private": Offer("private", "onprem", "dc", "p4", units=4.0, price=8.0),
              "public": Offer("public", "cloud", "r1", "g8", units=8.0, price=40.0)}
    got = P.current_fleet_cost(np.array([6.0, 14.0]), 10.0, offers, costs)
    private = 2 * 10 * 2.0 + (4 + 0) * 2.0 * 0.3
    public = 8 * 5.0
    assert got == pytest.approx((private + public) * 730 / 2)
    # by part, as a split's row: the idle penalty apart from the compute, the excess on public
    parts = P.current_fleet_parts(np.array([6.0, 14.0]), 10.0, offers, costs)
    assert parts == pytest.approx({"private_cost": 2 * 10 * 2.0 * 730 / 2, "public_cost": public * 730 / 2,
                                   "edge_cost": 0.0, "idle_penalty": 4 * 2.0 * 0.3 * 730 / 2, "monthly_cost": got})
    assert P.current_fleet_cost(np.array([6.0]), 10.0, {"public": offers["public"]}, costs) is None
    assert P.current_fleet_cost(np.array([6.0]), 0.0, offers, costs) is None


def test_a_tie_with_the_default_saves_exactly_zero_not_minus_zero() -> None:
    """No edge offer: the default's edge share spills to public, costing the same as the split
    that plans it on public. The saving is 0, never a tiny negative that rounds to -0.0 (the
    tuner compared the rounded cost with the unrounded default's)."""
    for price in (0.123456789, 2 / 3, 1.1, 7.77):
        offers = {"private": Offer("private", "o", "dc", "m", 1.0, price),
                  "public": Offer("public", "c", "r1", "m", 1.0, price)}
        plans = P.tune_split(np.full(48, 10.0), offers, FREE).set_index("plan")
        tuned = plans.loc["tuned"]
        assert (tuned["private"], tuned["public"], tuned["edge"]) == (0.3, 0.7, 0.0)
        for col in ("expected_savings", "savings_vs_default"):
            assert plans[col].tolist() == [0.0, 0.0] and not np.signbit(plans[col]).any(), (price, col)
        kept = P.allocation.kept_plans(np.full(48, 10.0), P.DEFAULT_SPLIT, P.Split(0.3, 0.7, 0.0), offers, FREE)
        assert not np.signbit(kept[["expected_savings", "savings_vs_default"]].to_numpy()).any()


def _one_pool_plan(policy: P.PlanPolicy | None = None, splits: dict | None = None) -> dict[str, pd.DataFrame]:
    """A steady CPU pool (every location has an offer), 14 days of history and 24 hours ahead."""
    history, forecast, capacity = steady_pool("c/cpu/cpu", 40 * 64.0, 48 * 64.0, 64.0, mean=2600.0, hi_80=2900.0)
    return P.make_plan(history, forecast, capacity, catalog(), policy or P.PlanPolicy(), splits=splits)


def test_retuned_means_the_split_left_the_default() -> None:
    """retuned: the row's split is not the default; tuned_this_run: this run chose it. The
    default row, and a tuned row that kept the default, are not re-tuned."""
    moved = _one_pool_plan()["allocation"].set_index("plan")  # private 3x cheaper: the tuner moves
    assert moved.loc["tuned", "private"] != 0.3
    assert moved["retuned"].to_dict() == {"default_3_5_2": False, "tuned": True, "running_fleet": False}
    assert moved["tuned_this_run"].all()
    stay = P.PlanPolicy(allocation=P.AllocationPolicy(min_savings=0.99))  # nothing saves 99%: default kept
    kept_default = _one_pool_plan(stay)["allocation"].set_index("plan")
    assert kept_default.loc["tuned", ["private", "public", "edge"]].tolist() == [0.3, 0.5, 0.2]
    assert not kept_default["retuned"].any() and kept_default["tuned_this_run"].all()
    earlier = _one_pool_plan(splits={"c/cpu/cpu": P.Split(0.4, 0.4, 0.2)})["allocation"].set_index("plan")
    assert earlier["retuned"].to_dict() == {"default_3_5_2": False, "tuned": True, "running_fleet": False}
    assert not earlier["tuned_this_run"].any()  # this month's split, kept


def test_prescale_rows_say_what_they_scale() -> None:
    """The schedule moves the pool's running capacity, for its whole demand (not a share of the
    split), in steps of one instance: every row says so and gives the instance size."""
    plan = _one_pool_plan()
    pre = plan["prescale"]
    assert (pre["applies_to"] == "pool nodes (whole demand, not split)").all()
    assert (pre["units_per_instance"] == 64.0).all()
    assert (pre["target_capacity"] - pre["capacity"] == pre["instances_delta"] * 64.0).all()
    # sized for the whole forecast, not the public share: mean 2600 + 650 (a quarter of it,
    # without recent demand) -> 51 nodes of 64
    assert pre["target_capacity"].max() == 51 * 64.0
    tuned = plan["allocation"].set_index("plan").loc["tuned"]
    assert tuned["public"] < 1.0
