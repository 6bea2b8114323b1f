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


# Peak memory of generating a fleet, measured with /usr/bin/time on 20 and 80 nodes x 28 days
# (577 MB and 1.53 GB with telemetry, 347 MB and 584 MB without), rounded up
BASE_MB = 300.0
MB_PER_NODE_DAY = {True: 0.6, False: 0.15}
# The whole pipeline's peak on a generated fleet is detect's or ingest's: detect 1.83 and
# 5.49 GB on 12x28 and 600x14 nodes x days, ingest 0.68, 1.42, 4.21, 6.27 GB on 12x28, 48x28,
# 192x28, 600x14; a line above them all
RUN_BASE_MB = 2000.0
RUN_MB_PER_NODE_DAY = 0.6


def estimated_memory_gb(nodes: int, days: int, telemetry: bool = True, run: bool = False) -> float:
    """About how much memory generating (and writing) a fleet of this size takes, in GiB;
    ``run``: generating it and running the whole pipeline on it (``headroom run``)."""
    if run:
        return (RUN_BASE_MB + RUN_MB_PER_NODE_DAY * nodes * days) / 1024.0
    return (BASE_MB + MB_PER_NODE_DAY[telemetry] * nodes * days) / 1024.0


def available_memory_gb() -> float | None:
    """MemAvailable from /proc/meminfo (Linux), else None (no guard)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1048576.0
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_fleet_args(nodes: int, days: int, seed: int, telemetry: bool = True,
                     available_gb: float | None = None, can_drop_telemetry: bool = True, run: bool = False) -> None:
    """Refuse a fleet the generator cannot make, or one that would not fit in memory
    (``available_gb``: the memory to fit in, by default what this machine has free; ``run``:
    the whole pipeline's need, not the generator's)."""
    from pipelines.commands.errors import CliError, check_seed

    if nodes < 3:
        raise CliError(f"--nodes must be at least 3 (one node per pool), got {nodes}", 2)
    if days < 2:
        raise CliError(f"--days must be at least 2, got {days}", 2)
    check_seed(seed, models=False)  # numpy alone: any seed >= 0
    free = available_memory_gb() if available_gb is None else available_gb
    need = estimated_memory_gb(nodes, days, telemetry, run=run)
    if free is not None and need > 0.8 * free:
        hint = "; --no-telemetry needs about a quarter of that" if telemetry and can_drop_telemetry else ""
        task = "to generate and run the pipeline on (ingest and detect's fault model read all its telemetry)" if run else \
            "to generate"
        raise CliError(
            f"a fleet of {nodes} nodes x {days} days needs about {need:.1f} GiB of memory {task}, and this "
            f"machine has {free:.1f} GiB free: use fewer --nodes or --days{hint}", 2)


def write_fleet_or_fail(out: Path, what: str, **kwargs: object) -> dict[str, int]:
    """:func:`write_fleet` into ``out``; a folder it cannot make or write is a one-line
    CliError naming ``what`` (the option or setting that gave it)."""
    from pipelines.commands.errors import CliError
    from pipelines.runtime import faults
    from pipelines.synth.files import write_fleet

    blocker = next((p for p in (out, *out.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        raise CliError(f"{what} {out}: {blocker} is a file, not a folder", 2)
    from pipelines.runtime.outputs import OutputError

    try:
        return write_fleet(out, **kwargs)
    except OutputError as exc:  # it names the file
        raise CliError(f"{what}: {exc}", exc.code) from exc
    except OSError as exc:
        fault = faults.environment_fault(exc, path=exc.filename or out)
        raise CliError(f"{what}: {fault}" if fault else f"{what}: cannot write to {out}: {exc}",
                       fault.code if fault else 2) from exc


def run_generate(args: argparse.Namespace) -> int:
    """Generate and write the fleet, then print rows per file."""
    from pipelines.commands.errors import CliError

    check_fleet_args(args.nodes, args.days, args.seed, telemetry=not args.no_telemetry)
    try:
        import pandas as pd

        first = pd.Timestamp(args.start)
        if pd.isna(first):
            raise ValueError("no date")
        if first.tz is not None:
            first = first.tz_convert("UTC").tz_localize(None)
    except (ValueError, TypeError, OverflowError) as exc:
        raise CliError(f"--start {args.start!r} is not a date: {exc}", 2) from exc
    if first != first.normalize():  # the fleet's days, and its daily pattern, start at 00:00 UTC
        raise CliError(f"--start {args.start!r}: give a day (YYYY-MM-DD, UTC), not a time within one", 2)
    from pipelines.ingest.validate import TS_MAX, TS_MIN

    try:  # the whole span must be a time the warehouse (and pandas) can hold
        fits = pd.Timestamp(TS_MIN) <= first <= pd.Timestamp(TS_MAX) \
            - pd.Timedelta(days=args.days)  # the last reading is 5 minutes before that
    except (OverflowError, ValueError):
        fits = False
    if not fits:
        raise CliError(f"--start {args.start}: {args.days} days from it leave the years {TS_MIN[:4]}-"
                       f"{int(TS_MAX[:4]) - 1}", 2)
    began = time.perf_counter()
    rows = write_fleet_or_fail(args.out, "--out", nodes=args.nodes, days=args.days, seed=args.seed,
                               start=first.strftime("%Y-%m-%d"),
                               telemetry=not args.no_telemetry)
    print(f"generated fleet in {args.out} (nodes={args.nodes}, days={args.days}, seed={args.seed}) "
          f"in {time.perf_counter() - began:.1f}s")
    for name, n in rows.items():
        print(f"  {name:<16} {n:>10,} rows")
    print("  manifest.json")
    return 0
