"""``headroom generate``: write a synthetic fleet (all five input kinds plus ground truth)."""
from __future__ import annotations

import argparse
import time
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``generate`` subcommand."""
    p = subparsers.add_parser(
        "generate",
        help="write a synthetic fleet as CSV in the input contract",
        description="Write utilization, telemetry, failures, spot prices and catalog CSVs, "
        "ground truth (failures.csv, bursts.csv) and manifest.json into --out.",
    )
    p.add_argument("--out", required=True, type=Path, help="output folder (created if missing)")
    p.add_argument("--nodes", type=int, default=12, help="fleet size (default 12, at least 3)")
    p.add_argument("--days", type=int, default=28, help="days of history (default 28, at least 2)")
    p.add_argument("--seed", type=int, default=0, help="random seed: same seed, same files (default 0)")
    p.add_argument("--start", default="2026-01-05", help="first day, UTC (default 2026-01-05)")
    p.add_argument(
        "--no-telemetry",
        action="store_true",
        help="write telemetry.csv with its header only (for large utilization-only fleets)",
    )
    p.set_defaults(func=run_generate)


def run_generate(args: argparse.Namespace) -> int:
    """Generate and write the fleet, then print rows per file."""
    from pipelines.cli import CliError
    from pipelines.synth_io import write_fleet

    if args.nodes < 3:
        raise CliError(f"--nodes must be at least 3 (one node per pool), got {args.nodes}", 2)
    if args.days < 2:
        raise CliError(f"--days must be at least 2, got {args.days}", 2)
    if args.seed < 0:
        raise CliError(f"--seed must be >= 0, got {args.seed}", 2)
    if args.out.exists() and not args.out.is_dir():
        raise CliError(f"--out {args.out} exists and is not a folder", 2)
    try:
        import pandas as pd

        pd.Timestamp(args.start)
    except (ValueError, TypeError) as exc:
        raise CliError(f"--start {args.start!r} is not a date: {exc}", 2) from exc
    began = time.perf_counter()
    try:
        rows = write_fleet(
            args.out, nodes=args.nodes, days=args.days, seed=args.seed, start=args.start,
            telemetry=not args.no_telemetry,
        )
    except OSError as exc:
        raise CliError(f"cannot write to {args.out}: {exc}", 2) from exc
    print(f"generated fleet in {args.out} (nodes={args.nodes}, days={args.days}, seed={args.seed}) "
          f"in {time.perf_counter() - began:.1f}s")
    for name, n in rows.items():
        print(f"  {name:<16} {n:>10,} rows")
    print("  manifest.json")
    return 0
