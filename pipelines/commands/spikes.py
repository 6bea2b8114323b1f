"""``headroom spikes evaluate``: the spot-price-spike predictor vs persistence."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipelines.runtime.outputs import check_writable, report_metrics


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("spikes", help="spot-price-spike prediction evaluation")
    sub = p.add_subparsers(dest="spikes_command", required=True, metavar="ACTION")
    e = sub.add_parser(
        "evaluate",
        help="time-split evaluation of the spike predictor and a persistence baseline",
        description="A spike is a price >= k x its trailing 7-day median or >= the on-demand price; "
        "the target is 'a spike within the next --horizon'. Train on the early span, test on the rest.",
    )
    e.add_argument("--prices", required=True, type=Path,
                   help="spot prices: ts,provider,region,zone,instance_type,product,price")
    e.add_argument("--on-demand", type=Path, default=None,
                   help="CSV provider,region,instance_type,on_demand_price")
    e.add_argument("--horizon", default="6h", help="prediction horizon (default 6h)")
    e.add_argument("--k", type=float, default=2.0, help="spike multiple of the trailing median (default 2)")
    e.add_argument("--freq", default="1h", help="grid step (default 1h)")
    e.add_argument("--test-fraction", type=float, default=0.3, help="late share held out (default 0.3)")
    e.add_argument("--out", type=Path, default=None, help="write the metrics CSV here")
    e.set_defaults(func=run_evaluate)


def run_evaluate(args: argparse.Namespace) -> int:
    if args.out is not None:  # before the work, not after it
        check_writable(args.out)
    from pipelines.commands.errors import check_fraction

    check_fraction(args.test_fraction, "--test-fraction", "the share of the time span scored")
    from anomaly.evaluate import evaluate_spikes, parse_duration
    from anomaly.spike_features import SpikePolicy
    from pipelines.commands.errors import CliError
    from pipelines.ingest import tables

    try:
        prices = tables.read_spot_prices(args.prices)
        on_demand = tables.read_on_demand(args.on_demand) if args.on_demand else None
        if on_demand is not None:
            key = ["provider", "region", "instance_type"]
            markets = prices[key].drop_duplicates()
            unpriced = markets.merge(on_demand[key], on=key, how="left", indicator=True)
            unpriced = unpriced[unpriced["_merge"] == "left_only"]
            if len(unpriced):
                shown = ", ".join("/".join(r) for r in unpriced[key].astype(str).to_numpy()[:5].tolist())
                print(f"warning: {args.on_demand}: no on-demand price for {len(unpriced)} of {len(markets)} spot "
                      f"market(s) ({shown}); only the trailing-median rule marks their spikes", file=sys.stderr)
        policy = SpikePolicy(freq=str(parse_duration(args.freq, "--freq")),
                             horizon=str(parse_duration(args.horizon, "--horizon")), k=args.k)
        metrics = evaluate_spikes(prices, policy, on_demand, test_fraction=args.test_fraction)
    except (tables.InputError, ValueError) as exc:
        hint = ("; with prices that never move that much, try a lower --k or a longer --horizon; with an "
                "on-demand price below every spot price, check --on-demand" if "single class" in str(exc) else "")
        raise CliError(f"{exc}{hint}", 2) from exc
    report_metrics(metrics, args.out)
    if int(metrics["positives"].max()) == 0:
        print("warning: no spike in the test span: AUC is undefined and precision and recall are 0; use a "
              "larger --test-fraction, a lower --k or a longer --horizon", file=sys.stderr)
    return 0
