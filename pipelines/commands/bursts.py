"""``headroom bursts evaluate``: CUSUM vs 3-sigma vs Pelt on labelled windows (NAB style)."""
from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pipelines.runtime.outputs import check_writable, report_metrics

log = logging.getLogger(__name__)

RECALIBRATE_DEFAULT = "1D"  # as headroom detect


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("bursts", help="burst detection (CUSUM) evaluation")
    sub = p.add_subparsers(dest="bursts_command", required=True, metavar="ACTION")
    e = sub.add_parser(
        "evaluate",
        help="score CUSUM and two baselines against labelled windows",
        description="Calibrate on the first --train-fraction of each series, detect on the rest, and "
        "score detections against the windows: a window is detected when an alarm falls inside it; "
        "alarms outside every window are false alarms.",
    )
    e.add_argument("--input", required=True, type=Path, help="CSV/Parquet, long format unique_id,ds,y")
    e.add_argument("--windows", required=True, type=Path, help="JSON {unique_id: [[start, end], ...]}")
    e.add_argument("--labels", type=Path, default=None,
                   help="JSON {unique_id: [timestamp, ...]} of the labelled anomalies (NAB's combined_labels.json): "
                   "delays run from them instead of from each window's start")
    e.add_argument("--season-length", type=int, default=24, help="points per season (default 24)")
    e.add_argument("--n-seasons", type=int, default=4, help="seasons in the baseline median (default 4)")
    e.add_argument("--target-arl", default="7D", help="in-control run length per false alarm (default 7D)")
    e.add_argument("--cooldown", default="6h",
                   help="alarms this soon after an event are the same one (default 6h, as headroom detect)")
    e.add_argument("--clear-after", default="1h",
                   help="a burst ends once its residual level (an EWMA this long) is under 1 sigma (default 1h)")
    e.add_argument("--confirm-for", default="0h",
                   help="a CUSUM alarm waits until the residuals have stayed over 1 sigma this long (default 0h: "
                   "no wait; the fast path never waits)")
    e.add_argument("--recalibrate-every", default=RECALIBRATE_DEFAULT,
                   help="refit each detector this often on the 28 days before (default 1D, as headroom detect; "
                   "none: calibrate once)")
    e.add_argument("--train-fraction", type=float, default=0.15, help="calibration share (default 0.15)")
    e.add_argument("--out", type=Path, default=None, help="write the metrics CSV here")
    e.set_defaults(func=run_evaluate)


def run_evaluate(args: argparse.Namespace) -> int:
    if args.out is not None:  # before the work, not after it
        check_writable(args.out)
    from pipelines.commands.errors import check_fraction

    check_fraction(args.train_fraction, "--train-fraction", "the share of each series that calibrates")
    from anomaly.cusum import CusumPolicy
    from anomaly.evaluate import evaluate_bursts, split_history
    from pipelines.commands.errors import CliError
    from pipelines.ingest import tables
    from pipelines.runtime.durations import parse_duration

    try:
        series = tables.read_series(args.input)
        windows = tables.read_windows(args.windows)
        labels = tables.read_labels(args.labels) if args.labels is not None else None
        policy = CusumPolicy(
            season_length=args.season_length, n_seasons=args.n_seasons,
            target_arl=str(parse_duration(args.target_arl, "--target-arl")),
            cooldown=str(parse_duration(args.cooldown, "--cooldown", zero=True)),
            clear_after=str(parse_duration(args.clear_after, "--clear-after", zero=True)),
            confirm_for=str(parse_duration(args.confirm_for, "--confirm-for", zero=True)),
            recalibrate_every=(None if args.recalibrate_every.strip().lower() == "none"
                               else str(parse_duration(args.recalibrate_every, "--recalibrate-every"))),
        )
    except (tables.InputError, ValueError) as exc:
        raise CliError(str(exc), 2) from exc
    # a refit per minute of an hourly series, asked for, ran for hours, each refit alike (the
    # default on a series coarser than a day refits at most a few times more than it needs)
    if policy.recalibrate_every is not None and args.recalibrate_every != RECALIBRATE_DEFAULT:
        import pandas as pd

        steps = series.sort_values("ds").groupby("unique_id")["ds"].diff().dropna()
        step = steps.median() if len(steps) else None
        if step is not None and pd.Timedelta(policy.recalibrate_every) < step:
            from anomaly.base import short_duration

            raise CliError(f"--recalibrate-every {args.recalibrate_every} is shorter than the series' step "
                           f"({short_duration(step)}): a refit between two readings learns nothing new; give at "
                           "least the step", 2)
    ids = set(series["unique_id"].astype(str))
    unknown = sorted(set(windows) - ids)
    if windows and len(unknown) == len(windows):
        raise CliError(
            f"{args.windows}: no window key names a series of {args.input} (keys such as {unknown[:3]}, "
            f"series such as {sorted(ids)[:3]}): every alarm would count as false", 2)
    if unknown:
        log.warning("windows for %d series not in the input (ignored): %s", len(unknown), unknown[:5])
    spans = series.groupby("unique_id")["ds"].agg(["min", "max"])
    outside = [(uid, a, b) for uid, wins in windows.items() if uid in spans.index
               for a, b in wins if b < spans.at[uid, "min"] or a > spans.at[uid, "max"]]
    if outside:
        uid, a, b = outside[0]
        log.warning("%d window(s) lie outside their series' time span and cannot be detected (such as %s "
                    "[%s, %s])", len(outside), uid, a, b)
    hist, _test = split_history(series, args.train_fraction)
    scored_from = hist.groupby("unique_id")["ds"].max()
    early = [(uid, a, b) for uid, wins in windows.items() if uid in scored_from.index
             for a, b in wins if b <= scored_from.at[uid] and a >= spans.at[uid, "min"]]
    if early:
        uid, a, b = early[0]
        log.warning("%d window(s) lie in the first --train-fraction %g of their series, which calibrates the "
                    "detectors and is not scored (such as %s [%s, %s])", len(early), args.train_fraction, uid, a, b)
    try:
        metrics = evaluate_bursts(series, windows, policy, train_fraction=args.train_fraction, labels=labels)
    except ValueError as exc:
        hint = (f" (the history here is the first --train-fraction {args.train_fraction:g} of each series)"
                if "history" in str(exc) else "")
        raise CliError(f"{exc}{hint}", 2) from exc
    report_metrics(metrics, args.out)
    return 0
