"""Hazard back-test: does the fleet failure hazard fitted up to a cutoff calibrate later counts?

    python benchmarks/hazard.py [--datasets ../shared/datasets] [--cutoffs 2016-01-01,2016-07-01,...]
                                [--months 12] [--level 0.9] [--out bench-out/hazard]

Titan GPU lifetimes (``titan-gpu-lifetimes/gc_full.csv.gz``, read by the CLI's reader). For
each cutoff the hazard is fitted on the lives as known then (installed before it, censored at
it). Then for each of the ``--months`` months (and quarters) after it, the GPUs in service at
the period's start and their ages are taken (the roster an operator knows then), and the
failures expected among them in the period are compared with those observed (failures of
those lives within the period). Models:

  * piecewise: the age-band hazard (the command's default);
  * weibull: the Weibull hazard by age;
  * naive: a constant rate, the failures per device-day of the year before the cutoff.

Reported per cutoff, period kind and model: observed / expected over the periods, the share of
periods whose observed count lies in the ``--level`` interval, and the mean |log(obs/exp)|.
Skips cleanly when the data set is absent.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from anomaly.hazard import FleetHazard, HazardPolicy, censor_at, in_service  # noqa: E402
from pipelines.ingest.lifetimes import read_lifetimes  # noqa: E402

TITAN = "titan-gpu-lifetimes"
CUTOFFS = "2016-01-01,2016-07-01,2017-01-01,2017-07-01,2018-01-01"


def naive_rate(lives: pd.DataFrame, cutoff: pd.Timestamp) -> float:
    """Failures per device-day in the year before ``cutoff``."""
    start = cutoff - pd.DateOffset(years=1)
    lo, hi = lives["install"].clip(lower=start), lives["remove"].clip(upper=cutoff)
    exposure = ((hi - lo).dt.total_seconds().clip(lower=0) / 86400.0).sum()
    events = (lives["failed"] & (lives["remove"] > start) & (lives["remove"] <= cutoff)).sum()
    return float(events / exposure) if exposure > 0 else 0.0


def observed(lives: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp) -> int:
    """Failures in ``(start, end]`` of the lives in service at ``start``."""
    alive = (lives["install"] <= start) & (lives["remove"] > start)
    return int((alive & lives["failed"] & (lives["remove"] <= end)).sum())


def backtest(lives: pd.DataFrame, cutoffs: list[pd.Timestamp], months: int, level: float) -> pd.DataFrame:
    rows = []
    data_end = lives["remove"].max()
    a = (1 - level) / 2
    for cutoff in cutoffs:
        model = FleetHazard(HazardPolicy(level=level)).fit(censor_at(lives, cutoff))
        rate = naive_rate(lives, cutoff)
        shape = float(model.weibull_.set_index("mode").loc["any", "shape"])
        for kind, step in (("month", 1), ("quarter", 3)):
            for k in range(0, months, step):
                start = cutoff + pd.DateOffset(months=k)
                end = start + pd.DateOffset(months=step)
                if end > data_end:
                    break
                fleet = in_service(lives, start)
                # a life that ends at start exactly (a failure then) is not in service over the period
                days = (end - start).total_seconds() / 86400.0
                obs = observed(lives, start, end)
                row = {"cutoff": cutoff.date(), "period": kind, "start": start.date(), "devices": len(fleet),
                       "observed": obs, "weibull_shape": shape}
                for m in ("piecewise", "weibull"):
                    f = model.expected_failures(fleet["age_days"].to_numpy(), days, "any", m, level)
                    row.update({f"{m}_expected": f.expected, f"{m}_lo": f.lo, f"{m}_hi": f.hi})
                mu = rate * days * len(fleet)
                row.update({"naive_expected": mu, "naive_lo": int(stats.poisson.ppf(a, mu)),
                            "naive_hi": int(stats.poisson.ppf(1 - a, mu))})
                rows.append(row)
    return pd.DataFrame(rows)


def summarise(periods: pd.DataFrame) -> pd.DataFrame:
    out = []
    for (cutoff, kind), g in periods.groupby(["cutoff", "period"], sort=False):
        row = {"cutoff": cutoff, "period": kind, "periods": len(g), "devices": int(g["devices"].iloc[0]),
               "observed": int(g["observed"].sum())}
        for m in ("piecewise", "weibull", "naive"):
            e = g[f"{m}_expected"]
            row[f"{m}_obs_over_exp"] = g["observed"].sum() / e.sum()
            row[f"{m}_coverage"] = ((g["observed"] >= g[f"{m}_lo"]) & (g["observed"] <= g[f"{m}_hi"])).mean()
            row[f"{m}_mean_abs_log"] = np.abs(np.log(np.maximum(g["observed"], 0.5) / e)).mean()
        out.append(row)
    return pd.DataFrame(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", type=Path,
                    default=os.environ.get("HEADROOM_DATASETS", ROOT.parent / "shared" / "datasets"))
    ap.add_argument("--cutoffs", default=CUTOFFS)
    ap.add_argument("--months", type=int, default=12)
    ap.add_argument("--level", type=float, default=0.9)
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out" / "hazard")
    args = ap.parse_args()
    path = Path(args.datasets or "") / TITAN / "gc_full.csv.gz"
    if args.datasets is None or not path.is_file():
        print(f"skipped: {path} not found (give --datasets or HEADROOM_DATASETS)")
        return 0
    lives, rejects = read_lifetimes(path)
    cutoffs = [pd.Timestamp(c) for c in args.cutoffs.split(",") if c.strip()]
    periods = backtest(lives, cutoffs, args.months, args.level)
    summary = summarise(periods)
    args.out.mkdir(parents=True, exist_ok=True)
    periods.to_csv(args.out / "hazard_periods.csv", index=False)
    summary.to_csv(args.out / "hazard_summary.csv", index=False)
    print(f"{path}: {len(lives):,} lives, {len(rejects):,} rejected; interval level {args.level}")
    with pd.option_context("display.width", 250, "display.max_columns", 30, "display.precision", 2):
        print(summary.to_string(index=False))
    print(f"written: {args.out / 'hazard_summary.csv'}, {args.out / 'hazard_periods.csv'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
