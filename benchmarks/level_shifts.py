"""Level shifts and trends on public traces: when the planner sizes a pool on the days since
its demand moved (``planner.shift.level_shift``), or at its last week's level after a steady
rise or fall (``planner.shift.trend``), does the next week stay there?

    python benchmarks/level_shifts.py [--datasets ../shared/datasets]

On the Bitbrains rnd traces (the cluster's sum and each of the panel's VMs, hourly), a
cutoff is placed every day of the last four weeks that leaves a week after it; at each, the
28 days before it are read as the plan reads them. For every shift found, the median of the
7 days after the cutoff is compared with the level before the shift and after it (log
ratio): the plan is right to follow the shift when the next week is nearer the new level.
Likewise for a trend (where no shift is found): the last week's level against the window's.
The rules were set before this was run; nothing here is tuned on it.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.forecast_accuracy import BITBRAINS, bitbrains_cluster, bitbrains_panel  # noqa: E402
from planner.shift import level_shift, trend  # noqa: E402

LOOKBACK, AFTER, CUTOFFS = pd.Timedelta(days=28), pd.Timedelta(days=7), 21


def score(data: pd.DataFrame) -> dict[str, int]:
    """Cutoffs read, shifts found, and how many of them the next week stayed nearer."""
    out = {"cutoffs": 0, "shifts": 0, "nearer_new": 0, "nearer_old": 0, "trends": 0, "nearer_recent": 0,
           "nearer_window": 0}
    for _uid, g in data.groupby("unique_id", sort=True):
        g = g.sort_values("ds")
        last = g["ds"].max()
        for k in range(7, 7 + CUTOFFS):
            cut = last - pd.Timedelta(days=k)
            seen = g[(g["ds"] <= cut) & (g["ds"] > cut - LOOKBACK)]
            if len(seen) < 24 * 10:
                continue
            out["cutoffs"] += 1
            nxt = float(g[(g["ds"] > cut) & (g["ds"] <= cut + AFTER)]["y"].median())
            found = level_shift(seen["ds"], seen["y"].to_numpy(dtype=float))
            if found is not None:
                out["shifts"] += 1
                out["nearer_new" if _nearer(nxt, found.after, found.before) else "nearer_old"] += 1
                continue
            steady = trend(seen["ds"], seen["y"].to_numpy(dtype=float))  # (the plan asks only without a shift)
            if steady is not None:
                out["trends"] += 1
                out["nearer_recent" if _nearer(nxt, steady.recent, steady.window) else "nearer_window"] += 1
    return out


def _nearer(value: float, a: float, b: float) -> bool:
    """Whether ``value`` is nearer ``a`` than ``b`` in log ratio."""
    return abs(np.log((value + 1e-6) / (a + 1e-6))) < abs(np.log((value + 1e-6) / (b + 1e-6)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", default=str(ROOT.parent / "shared" / "datasets"))
    args = parser.parse_args(argv)
    root = Path(args.datasets)
    if not (root / BITBRAINS).is_dir():
        parser.error(f"no {BITBRAINS} under {root}")
    rows = [{"trace": "bitbrains cluster (sum)", **score(bitbrains_cluster(root))},
            {"trace": "bitbrains panel (each VM)", **score(bitbrains_panel(root))}]
    print(pd.DataFrame(rows).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
