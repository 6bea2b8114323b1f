"""``headroom spikes evaluate``: the spot-price-spike predictor vs persistence."""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.runtime.outputs import check_writable, write_csv

if TYPE_CHECKING:
    import pandas as pd


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("spikes", help="spot-price-spike prediction evaluation")
    sub = p.add_subparsers(dest="spikes_command", required=True, metavar="ACTION")
    e = sub.add_parser(
        "evaluate",
        help="time-split evaluation of the spike predictor and a persistence baseline",
        description="A spike is a price >= k x its trailing 7-day median or >= the on-demand price; "
        "the target is 'a spike within the next --horizon'. Train on the early span, test on the rest. "
        "Each model's alert threshold is set on the training span only (the predictor's out-of-fold scores, "
        "persistence's own): the most recall at --target-precision, else the best F1 there (threshold_rule "
        "says which). Prints AUC, the base rate, and precision, recall and F1 per market-hour at that threshold.",
    )
    e.add_argument("--prices", required=True, type=Path,
                   help="spot prices: ts,provider,region,zone,instance_type,product,price")
    e.add_argument("--on-demand", type=Path, default=None,
                   help="CSV provider,region,instance_type,on_demand_price")
    e.add_argument("--horizon", default="6h", help="prediction horizon (default 6h)")
    e.add_argument("--k", type=float, default=2.0, help="spike multiple of the trailing median (default 2)")
    e.add_argument("--freq", default="1h", help="grid step (default 1h)")
    e.add_argument("--test-fraction", type=float, default=0.3, help="late share held out (default 0.3)")
    e.add_argument("--target-precision", type=float, default=0.8,
                   help="alert threshold: the most recall at this precision on the training span (default 0.8, "
                   "as faults); none reaching it falls back to the best F1")
    e.add_argument("--out", type=Path, default=None, help="write the metrics CSV here")
    e.add_argument("--json", action="store_true", help="the metrics as JSON rows instead of text")
    e.set_defaults(func=run_evaluate)


def run_evaluate(args: argparse.Namespace) -> int:
    if args.out is not None:  # before the work, not after it
        check_writable(args.out)
    from pipelines.commands.errors import check_fraction

    check_fraction(args.test_fraction, "--test-fraction", "the share of the time span scored")
    from anomaly.evaluate import evaluate_spikes
    from anomaly.spike_features import SpikePolicy
    from pipelines.commands.errors import CliError
    from pipelines.ingest import tables
    from pipelines.runtime.durations import parse_duration

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
        if not 0 < args.target_precision <= 1:
            raise ValueError(f"--target-precision must be in (0, 1], got {args.target_precision}")
        policy = SpikePolicy(freq=str(parse_duration(args.freq, "--freq")),
                             horizon=str(parse_duration(args.horizon, "--horizon")), k=args.k,
                             target_precision=args.target_precision)
        metrics = evaluate_spikes(prices, policy, on_demand, test_fraction=args.test_fraction)
    except (tables.InputError, ValueError) as exc:
        hint = ("; a spike ahead of every hour: try a higher --k or a shorter --horizon; with an on-demand price "
                "below every spot price, check --on-demand" if "has a spike ahead" in str(exc) else
                "; with prices that never move that much, try a lower --k or a longer --horizon"
                if "single class" in str(exc) else
                f" (the training or test span of --test-fraction {args.test_fraction:g} holds no hours)"
                if "0 sample(s)" in str(exc) else "")
        raise CliError(f"{exc}{hint}", 2) from exc
    if args.out is not None:
        write_csv(metrics, args.out)
    if args.json:
        print(metrics.to_json(orient="records", indent=2))
    else:
        print("\n".join(metric_lines(metrics, args.target_precision)))
    short = metrics[metrics["threshold_rule"] == "max_f1"]
    for name in short["model"]:
        print(f"note: {name}: no threshold that beats chance reaches precision {args.target_precision:g} on its "
              "training-span scores; its threshold is the best-F1 one there", file=sys.stderr)
    for name in metrics.loc[metrics["threshold_rule"] == "no_skill", "model"]:
        print(f"note: {name}: no threshold's alerts beat alerts at random hours on its training-span scores: it "
              "raises no alert", file=sys.stderr)
    if int(metrics["positives"].max()) == 0:
        print("warning: no spike in the test span: AUC is undefined, recall 0 and precision 0 (or - with no alert); use a "
              "larger --test-fraction, a lower --k or a longer --horizon", file=sys.stderr)
    return 0


def metric_lines(metrics: pd.DataFrame, target: float) -> list[str]:
    """The evaluation as a table a person reads: one line per model."""
    n, pos = int(metrics["n"].iloc[0]), int(metrics["positives"].iloc[0])
    base = metrics["base_rate"].iloc[0]
    lines = [f"test span: {n:,} market-hours, {pos:,} with a spike ahead (base rate {base:.3f}); "
             f"thresholds for precision {target:g} on the training span",
             f"  {'model':<12} {'auc':>6} {'threshold':>9} {'precision':>9} {'recall':>7} {'f1':>6} "
             f"{'alerts':>7}  threshold rule"]
    def shown(v: float, width: int) -> str:  # undefined (no alert, one class): '-'
        return f"{'-':>{width}}" if math.isnan(v) else f"{v:>{width}.3f}"

    for r in metrics.itertuples(index=False):
        lines.append(f"  {r.model:<12} {shown(r.auc, 6)} {r.threshold:>9.3g} {shown(r.precision, 9)} "
                     f"{r.recall:>7.3f} {r.f1:>6.3f} {r.alerts:>7,}  {r.threshold_rule}")
    if metrics["alerts"].eq(0).any():
        lines.append("  precision is - where a model raised no alert (0 of 0)")
    return lines
