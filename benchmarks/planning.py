"""Planning benchmark: do the planner's decisions pay off on demand they have not seen?

    python benchmarks/planning.py [--nodes 24] [--days 56] [--seed 0] [--out bench-out/planning]

On a synthetic fleet (``pipelines.synth.fleet.generate_fleet``; hourly demand per planned pool
through ``pipelines.store.demand``) the first half is "last month" and the second "this month":

* allocation: the 3-5-2 split, the split tuned on last month (what ``headroom plan`` would
  recommend), the same tuned on exactly last month's demand (no demand scenarios and no
  minimum saving), and
  the cheapest split for this month itself (an oracle, the best any monthly re-tune could
  do), all priced on this month's demand;
* reservations: the levels recommended from last month's public demand, priced on this
  month's against all on-demand;
Pre-scaling is measured by ``benchmarks/decisions.py`` (``headroom plan replay`` against
reactive autoscalers and static provisioning at the data's own resolution).

There is no open-source peer for these decisions; the baselines are what operators do
without a forecast.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import planner as P
from planner.plan import cheapest_public, primary_series


def fleet_demand(nodes: int, days: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(hourly demand, capacity per series at the end, catalog) of a synthetic fleet."""
    from pipelines.plan.planning import CAPACITY_SQL
    from pipelines.store import demand, warehouse
    from pipelines.synth.fleet import generate_fleet

    fleet = generate_fleet(nodes=nodes, days=days, seed=seed)
    con = warehouse.connect(":memory:")
    try:
        con.register("_util", fleet["utilization"])
        con.execute("INSERT INTO utilization SELECT ts, cluster, pool, node_id, resource, used, capacity FROM _util")
        return demand.load_demand(con), warehouse.query(con, CAPACITY_SQL), fleet["catalog"]
    finally:
        con.close()


def allocation_rows(uid: str, last: np.ndarray, this: np.ndarray, offers: dict, costs: P.CostPolicy) -> list[dict]:
    exact = P.AllocationPolicy(scenarios=(1.0,), min_savings=0.0)

    def tuned(demand: np.ndarray, policy: P.AllocationPolicy) -> P.Split:
        r = P.tune_split(demand, offers, costs, policy).set_index("plan").loc["tuned"]
        return P.Split(r["private"], r["public"], r["edge"])

    plans = {
        "default_3_5_2": P.DEFAULT_SPLIT,
        "tuned_last_month": tuned(last, P.AllocationPolicy()),  # what headroom plan recommends
        "tuned_last_month_exact": tuned(last, exact),  # no demand scenarios, no minimum saving
        "oracle_this_month": tuned(this, exact),  # the cheapest split for this month's demand
    }
    priced = P.price_plans(this, plans, offers, costs)
    base = float(priced.loc[priced["plan"] == "default_3_5_2", "monthly_cost"].iloc[0])
    return [{"suite": "allocation", "unique_id": uid, "plan": r["plan"], "split": P.Split(
        r["private"], r["public"], r["edge"]).label(), "monthly_cost": r["monthly_cost"],
        "cost_vs_default": r["monthly_cost"] / base} for r in priced.to_dict("records")]


def reservation_rows(uid: str, last: np.ndarray, this: np.ndarray, offers: dict, costs: P.CostPolicy) -> list[dict]:
    t = P.tune_split(last, offers, costs).set_index("plan").loc["tuned"]
    split = P.Split(t["private"], t["public"], t["edge"])
    public_last = P.allocation.public_load(last, split, offers)
    low = min(P.AllocationPolicy().scenarios)  # as headroom plan: no more than still pay at demand x low
    rec = P.recommend_reservations(public_last, offers["public"], costs, downside=(
        low, P.allocation.public_load(last, split, offers, at=low)))
    rows = []
    public_this = P.allocation.public_load(this, split, offers)
    od = float(costs.public.effective(offers["public"].unit_price))
    units = offers["public"].units  # whole instances, as the planner and the allocation bill them
    all_od = P.reservations.plan_cost(public_this, 0.0, od, 0.0, units) * costs.hours_per_month / this.size
    for r in rec.to_dict("records"):
        price = offers["public"].reserved_1y if r["term"] == "1y" else offers["public"].reserved_3y
        reserved = float(costs.public.effective(price / offers["public"].units))
        cost = (P.reservations.plan_cost(public_this, r["reserved_units"], od, reserved, units)
                * costs.hours_per_month / this.size)
        rows.append({"suite": "reservation", "unique_id": uid, "plan": f"reserve_{r['term']}",
                     "reserved_units": r["reserved_units"], "monthly_cost": cost, "cost_vs_default": cost / all_od,
                     "expected_savings": r["monthly_savings"], "realised_savings": all_od - cost})
    return rows


def public_machine(last: np.ndarray, offers: dict, catalog: pd.DataFrame, resource: str, pool: str,
                   costs: P.CostPolicy) -> P.cost.Offer:
    """Public's machine as ``headroom plan`` picks it on last month: the cheapest in whole
    instances for the default split's public load, then for the tuned split's."""
    choices = P.cost.public_choices(P.cost.qualifying_offers(catalog, resource, pool))
    pick = cheapest_public(P.allocation.public_load(last, P.DEFAULT_SPLIT, offers), choices, costs, offers["public"])
    t = P.tune_split(last, {**offers, "public": pick}, costs).set_index("plan").loc["tuned"]
    split = P.Split(t["private"], t["public"], t["edge"])
    return cheapest_public(P.allocation.public_load(last, split, offers), choices, costs, pick)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=24)
    ap.add_argument("--days", type=int, default=56)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out" / "planning")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    demand, capacity, catalog = fleet_demand(args.nodes, args.days, args.seed)
    costs = P.CostPolicy()
    rows: list[dict] = []
    for row in primary_series(capacity).itertuples(index=False):
        history = demand[demand["unique_id"] == row.unique_id].sort_values("ds").reset_index(drop=True)
        y = history["y"].to_numpy()
        half = len(y) // 2
        last, this = y[:half], y[half:]
        offers = P.select_offers(catalog, row.resource, row.pool_id.split("/")[-1])
        if "public" in offers:
            offers["public"] = public_machine(last, offers, catalog, row.resource, row.pool_id.split("/")[-1], costs)
            rows += allocation_rows(row.unique_id, last, this, offers, costs)
            rows += reservation_rows(row.unique_id, last, this, offers, costs)
    table = pd.DataFrame(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    for suite, part in table.groupby("suite", sort=False):
        part = part.dropna(axis=1, how="all")
        part.to_csv(args.out / f"planning_{suite}.csv", index=False)
        with pd.option_context("display.width", 200, "display.max_columns", 20):
            print(f"== {suite}")
            print(part.drop(columns="suite").to_string(index=False, float_format=lambda v: f"{v:,.3f}"))
    print(f"({time.perf_counter() - t0:.0f} s; fleet {args.nodes} nodes x {args.days} days, seed {args.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
