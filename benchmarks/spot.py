"""Spot benchmark: what the planner's spot rule would have paid, against simpler rules.

    python benchmarks/spot.py [--datasets ../shared/datasets] [--suites aws,synthetic]
                              [--decide-every 24h] [--out bench-out/spot]

For each instance type sold in two or more zones, the last 30% of the price history is
replayed hour by hour; each choice for an hour uses only what was known when it started
(the grid row of the hour before), and pays that hour's price. Every ``--decide-every``
hours (the daily plan run) each rule picks one zone. Rules:

  * on_demand: the on-demand price (the reference);
  * fixed: the zone with the least mean price over the 7 days before the replay, kept;
  * cheapest_now: the zone with the least price at decision time (price chasing);
  * expected: the zone with the least mean price over the last 7 days (the planner's
    rule without the spike model), kept until the next run;
  * expected_leave_spiking: as ``expected``, among zones not spiking now, and between runs
    it leaves a zone as soon as it spikes (to the next such zone, or on-demand): a
    reactive rule without a model;
  * headroom: as ``expected``, among zones the spike model (trained on the first 70%
    only) rates below its alert threshold (at most 0.5), and between runs it leaves a zone
    as soon as the model rates it at or above (a price_spike alert): the planner's rule
    plus acting on its alerts.

Reported per data set: the mean price paid as a share of on-demand, and the hours paid
at or above on-demand (when a spot bid capped at on-demand is interrupted) or in a
spike (price >= 2x its trailing 7-day median), per 1,000 hours replayed.
AWS: ``aws-spot-us-east-1-2015`` (prices and on-demand); synthetic: ``generate_fleet``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from anomaly.spike_features import SERIES_KEY, SpikePolicy, build_spike_frame  # noqa: E402
from anomaly.spikes import SpikePredictor  # noqa: E402
from benchmarks.public_files import aws_spot  # noqa: E402

GROUP = ["provider", "instance_type", "product"]
RULES = ["on_demand", "fixed", "cheapest_now", "expected", "expected_leave_spiking", "headroom"]


def aws(datasets: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    return aws_spot(datasets / "aws-spot-us-east-1-2015")


def synthetic(nodes: int, days: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    from pipelines.synth.fleet import generate_fleet

    fleet = generate_fleet(nodes=nodes, days=days, seed=seed)
    cat = fleet["catalog"].dropna(subset=["on_demand_price"])
    return fleet["spot_prices"], cat[["provider", "region", "instance_type", "on_demand_price"]]


def replay(prices: pd.DataFrame, on_demand: pd.DataFrame, decide_every: str, p_max: float = 0.5) -> pd.DataFrame:
    """One row per rule: share of on-demand paid, hours at/above on-demand and in a spike.

    Every choice for hour h uses only the grid row of hour h - 1 (what is known when the
    hour starts); the price paid is hour h's.
    """
    policy = SpikePolicy()
    frame = build_spike_frame(prices, policy, on_demand)
    frame = frame[frame["on_demand_price"] > 0]
    start, end = frame["ts"].min(), frame["ts"].max()
    cut = start + (end - start) * 0.7
    train = frame[(frame["ts"] < cut - pd.Timedelta(policy.horizon)) & frame["label"].notna()]
    model = SpikePredictor(policy).fit(train)
    limit = min(p_max, float(model.threshold_))  # the planner's rule: its limit or the alert threshold
    frame = frame.assign(p_spike=model.predict_proba(frame))
    frame["mean_7d"] = frame.groupby(SERIES_KEY)["price"].transform(lambda s: s.rolling(24 * 7, min_periods=1).mean())
    step = pd.Timedelta(decide_every)
    totals = {r: {"paid": 0.0, "od": 0.0, "above": 0, "spike": 0, "hours": 0} for r in RULES}
    for _key, g in frame[frame["ts"] >= cut - pd.Timedelta("1h")].groupby(GROUP, sort=True):
        wide = {c: g.pivot_table(index="ts", columns="zone", values=c) for c in
                ("price", "mean_7d", "p_spike", "on_demand_price", "spiking")}
        zones = [z for z in wide["price"].columns if wide["price"][z].notna().all()]
        if len(zones) < 2:
            continue
        price, od = wide["price"][zones], wide["on_demand_price"][zones].mean(axis=1)
        p_spike, mean_7d, spiking = wide["p_spike"][zones], wide["mean_7d"][zones], wide["spiking"][zones]
        held: dict[str, str | None] = {}
        last_decision = None
        for prev, h in zip(price.index[:-1], price.index[1:]):
            calm = [z for z in zones if p_spike.at[prev, z] < limit]
            quiet = [z for z in zones if spiking.at[prev, z] == 0]
            if last_decision is None or h - last_decision >= step:  # the daily plan run
                last_decision = h
                held = {
                    "on_demand": None,
                    "fixed": held.get("fixed", mean_7d.loc[prev].idxmin()),
                    "cheapest_now": price.loc[prev].idxmin(),
                    "expected": mean_7d.loc[prev].idxmin(),
                    "expected_leave_spiking": mean_7d.loc[prev, quiet].idxmin() if quiet else None,
                    "headroom": mean_7d.loc[prev, calm].idxmin() if calm else None,
                }
            else:  # between runs, the reactive rules move on what the last hour showed
                z = held["expected_leave_spiking"]
                if (z is not None and spiking.at[prev, z] > 0) or (z is None and quiet):
                    held["expected_leave_spiking"] = mean_7d.loc[prev, quiet].idxmin() if quiet else None
                z = held["headroom"]  # a price_spike alert on the held market, or its end
                if (z is not None and p_spike.at[prev, z] >= limit) or (z is None and calm):
                    held["headroom"] = mean_7d.loc[prev, calm].idxmin() if calm else None
            o = float(od.at[h])
            for rule, zone in held.items():
                t = totals[rule]
                paid = o if zone is None else float(price.at[h, zone])
                t["paid"] += paid
                t["od"] += o
                t["hours"] += 1
                if zone is not None:
                    t["above"] += int(paid >= o)
                    t["spike"] += int(spiking.at[h, zone])
    rows = []
    for rule, t in totals.items():
        per_k = 1000.0 / max(t["hours"], 1)
        rows.append({"rule": rule, "cost_vs_on_demand": t["paid"] / t["od"] if t["od"] else float("nan"),
                     "hours_at_or_above_on_demand_per_1000h": t["above"] * per_k,
                     "spiking_hours_per_1000h": t["spike"] * per_k, "hours": t["hours"]})
    return pd.DataFrame(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", type=Path,
                    default=os.environ.get("HEADROOM_DATASETS", ROOT.parent / "shared" / "datasets"))
    ap.add_argument("--suites", default="aws,synthetic")
    ap.add_argument("--decide-every", default="24h")
    ap.add_argument("--nodes", type=int, default=12)
    ap.add_argument("--days", type=int, default=56)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out" / "spot")
    args = ap.parse_args()
    suites = [s.strip() for s in args.suites.split(",") if s.strip()]
    if set(suites) - {"aws", "synthetic"}:  # before any suite runs
        ap.error(f"unknown suite(s) in {args.suites!r}; choose from aws, synthetic")
    args.out.mkdir(parents=True, exist_ok=True)
    for suite in suites:
        if suite == "aws":
            if args.datasets is None or not Path(args.datasets).is_dir():
                print("skipping aws: pass --datasets or set HEADROOM_DATASETS", file=sys.stderr)
                continue
            prices, od = aws(Path(args.datasets))
        elif suite == "synthetic":
            prices, od = synthetic(args.nodes, args.days, args.seed)
        else:
            print(f"unknown suite {suite}", file=sys.stderr)
            return 2
        t0 = time.perf_counter()
        table = replay(prices, od, args.decide_every)
        table.to_csv(args.out / f"spot_{suite}.csv", index=False)
        print(f"== {suite} (decide every {args.decide_every})")
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        print(f"({time.perf_counter() - t0:.1f} s)\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
