"""Decisions benchmark: headroom's pre-scaling replayed against what users run without it.

    python benchmarks/decisions.py [--datasets ../shared/datasets] [--suites bitbrains,synthetic]
                                   [--days 30] [--out bench-out/decisions]

Each suite runs ``headroom plan replay`` (the CLI, as a user would) over the last ``--days``:

* ``bitbrains``: the public Bitbrains cluster total (``convert --from bitbrains-cluster``, one
  pool at 5 minutes), in instances of 8 vCPUs;
* ``synthetic``: every pool of a generated fleet (``headroom generate``, 12 nodes, 42 days,
  seed 7: not the demo's seed), in the pool's own node size.

The peers are in the same run: reactive autoscalers at 80/70/60/50% target utilization (out
5 minutes after a rise, in after 30 minutes below), the same at 80% acting 30 minutes late,
static provisioning for the peak before the span + 15%, and the oracle. Reported as ratios:
cost over the oracle's, steps under-provisioned, and whether ``planned`` is beyond the
reactive frontier (no reactive row at once no dearer and no more under-provisioned).
Datasets are read in place (``--datasets`` or ``HEADROOM_DATASETS``), never copied.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
HEADROOM = [sys.executable, "-m", "pipelines.cli"]
sys.path.insert(0, str(ROOT))

from benchmarks.public_files import union_csv  # noqa: E402


def headroom(*args: str) -> str:
    """Run the CLI; its stdout, or exit with its error."""
    done = subprocess.run([*HEADROOM, *args], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"headroom {' '.join(args[:2])} failed: {done.stderr.strip().splitlines()[-1:]}")
    return done.stdout


def replay(util: Path, out: Path, days: int, extra: list[str]) -> pd.DataFrame:
    """One replay's table over the last ``days`` of ``util``."""
    end = pd.read_csv(util, usecols=["ts"])["ts"].max()
    start = (pd.Timestamp(end).tz_localize(None) - pd.Timedelta(days=days)).ceil("D")
    t0 = time.perf_counter()
    headroom("plan", "replay", "--utilization", str(util), "--start", str(start), "--out", str(out), *extra)
    table = pd.read_csv(out)
    table.insert(0, "seconds", round(time.perf_counter() - t0))
    return table


def verdict(table: pd.DataFrame) -> str:
    me = table.set_index("strategy").loc["planned"]
    rivals = table[table["strategy"].str.startswith("reactive_")]
    beaten = rivals[(rivals["cost"] <= me["cost"] + 1e-9) &
                    (rivals["underprovisioned_pct"] <= me["underprovisioned_pct"] + 1e-9)]
    return "beyond the reactive frontier" if beaten.empty else f"matched by {', '.join(beaten['strategy'])}"


def show(name: str, table: pd.DataFrame) -> None:
    cols = ["strategy", "cost_vs_oracle", "underprovisioned_pct", "avg_utilization", "scale_actions"]
    print(f"== {name} ({int(table['seconds'].iloc[0])} s): planned is {verdict(table)}")
    print(table[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", type=Path, default=Path(os.environ.get("HEADROOM_DATASETS", ROOT.parent / "shared"
                                                                          / "datasets")))
    ap.add_argument("--suites", default="bitbrains,synthetic")
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out" / "decisions")
    args = ap.parse_args(argv)
    suites = {s.strip() for s in args.suites.split(",") if s.strip()}
    if suites - {"bitbrains", "synthetic"}:
        ap.error(f"unknown suite(s) in {args.suites!r}; choose from bitbrains, synthetic")
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        if "bitbrains" in suites:
            # every cluster file (our July copy, the whole trace, or both): one table, a bucket once
            raw, files = union_csv(args.datasets / "bitbrains-rnd-vm-utilization", "rnd_cluster_5min*.csv.gz", [],
                                   "bucket_start_utc")
            src = Path(tmp) / "rnd_cluster_5min_union.csv"
            raw.assign(bucket_start_utc=raw["bucket_start_utc"].dt.strftime("%Y-%m-%dT%H:%M:%SZ")).to_csv(src, index=False)
            print(f"bitbrains cluster: {', '.join(f.name for f in files)}")
            headroom("convert", "--from", "bitbrains-cluster", "--out", f"{tmp}/bb", str(src))
            t = replay(Path(tmp) / "bb" / "utilization.csv", args.out / "bitbrains.csv", args.days,
                       ["--instance-units", "8"])
            show("bitbrains cluster, 8-vCPU instances", t)
            rows.append(t.assign(suite="bitbrains"))
        if "synthetic" in suites:
            headroom("generate", "--out", f"{tmp}/syn", "--nodes", "12", "--days", "42", "--seed", "7",
                     "--no-telemetry")
            util = pd.read_csv(Path(tmp) / "syn" / "utilization.csv")
            for (cluster, pool), part in util.groupby(["cluster", "pool"]):
                one = Path(tmp) / f"{cluster}-{pool}.csv"
                part.to_csv(one, index=False)
                t = replay(one, args.out / f"synthetic_{cluster}_{pool}.csv", args.days, [])
                show(f"synthetic {cluster}/{pool}", t)
                rows.append(t.assign(suite=f"synthetic {cluster}/{pool}"))
    if rows:
        pd.concat(rows).to_csv(args.out / "decisions.csv", index=False)
        print(f"tables: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
