"""Forecast speed: headroom's lgbm against mlforecast's LightGBM on M4 Hourly in one run, and
how train + forecast of the default models grows from 1,000 to 10,000 synthetic series.

    python benchmarks/forecast_speed.py [--datasets ../shared/datasets] [--suites m4,scale]
    python benchmarks/forecast_speed.py --suites scale --sizes 1000,2000,5000,10000 --models seasonal_naive,lgbm

``m4``: fit + forecast of 48 hours with 80% and 95% intervals on the held-out split of
benchmarks/m4.py, both single-threaded: headroom's lgbm (its conformal calibration
included) and mlforecast's LightGBM in the configuration of the M4 table (lags 1, 2, 3, 24,
48, 168, Differences([24]) + LocalStandardScaler, 100 trees) with its own conformal
intervals (2 windows of 48). Prints both times, their ratio and each one's OWA.

``scale``: ``--sizes`` panels of synthetic hourly demand (``--days`` days each; daily and
weekly cycles, trend, AR noise, bursts), one fresh process per model and size so that the
peak resident memory is that run's: seconds of fit + 24-hour forecast with intervals, the
process's resident memory before the fit (the data) and at its peak, and seconds per 1,000
series relative to the smallest size (1.0: linear growth).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

log = logging.getLogger("forecast_speed")


def synthetic_panel(n_series: int, days: int, seed: int = 0) -> pd.DataFrame:
    """``n_series`` hourly demand-like series of ``days`` days (as forecast_accuracy's speed panel)."""
    rng = np.random.default_rng(seed)
    t = np.arange(days * 24)
    level = rng.uniform(20, 500, n_series)[:, None]
    shift = rng.integers(24, size=n_series)[:, None]
    shape = 1 + 0.35 * np.sin(2 * np.pi * (t[None, :] + shift) / 24) + 0.15 * np.sin(2 * np.pi * t[None, :] / 168)
    noise = rng.normal(0, 0.05, (n_series, len(t)))
    noise = (noise + np.roll(noise, 1, axis=1) + np.roll(noise, -1, axis=1)) / 3
    bursts = (rng.random((n_series, len(t))) < 0.01) * rng.uniform(0.2, 0.6, (n_series, len(t)))
    y = level * (shape + 0.001 * t[None, :] + noise + bursts)
    ds = pd.date_range("2026-01-05", periods=len(t), freq="h")
    return pd.DataFrame({"unique_id": np.repeat([f"s{i:05d}" for i in range(n_series)], len(t)),
                         "ds": np.tile(ds, n_series), "y": y.ravel()})


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def one(model_name: str, n_series: int, days: int, horizon: int) -> dict:
    """Fit + forecast one model on one panel in this process: seconds and memory."""
    import forecasters

    data = synthetic_panel(n_series, days)
    before = _rss_mb()
    wall = time.perf_counter()
    model = forecasters.create(model_name, horizon=horizon, freq="h", season_length=24)
    fc = model.fit(data).predict(horizon, level=(80, 95))
    seconds = time.perf_counter() - wall
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux
    return {"model": model_name, "series": n_series, "days": days, "rows_forecast": len(fc),
            "seconds": round(seconds, 2), "rss_data_mb": round(before, 1), "peak_rss_mb": round(peak, 1)}


def scale(models: list[str], sizes: list[int], days: int, horizon: int) -> pd.DataFrame:
    rows = []
    for name in models:
        for n in sizes:
            cmd = [sys.executable, __file__, "--one", name, str(n), str(days), str(horizon)]
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                log.error("%s x %d failed: %s", name, n, done.stderr.strip().splitlines()[-1:])
                continue
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
            log.info("scale: %s", rows[-1])
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    table["seconds_per_1000"] = table["seconds"] / table["series"] * 1000
    first = table.groupby("model")["seconds_per_1000"].transform("first")
    table["growth_vs_smallest"] = table["seconds_per_1000"] / first  # 1.0: linear
    return table


def m4_speed(split: tuple[pd.DataFrame, pd.DataFrame], ds: str) -> pd.DataFrame:
    """headroom lgbm and mlforecast LightGBM, fit + forecast with intervals, on M4 Hourly's
    ``split`` (``m4.load``'s (train, test): the held-out last points, or the official test)."""
    import forecasters
    from benchmarks import m4

    train, test = split
    base = m4.naive2_scores(train, test)
    rows = []
    wall = time.perf_counter()
    fc = forecasters.create("lgbm", horizon=m4.H, freq="h", season_length=m4.M).fit(train).predict(
        m4.H, level=(80, 95))
    rows.append(m4._row("lgbm", "headroom", m4.scores(train, test, fc, "mean"), base, time.perf_counter() - wall,
                         dataset=ds) | m4.coverage(test, fc, "lo_{}", "hi_{}"))
    wall = time.perf_counter()
    fc = m4.mlforecast_peer(train)
    rows.append(m4._row("mlf_lgbm", "peer", m4.scores(train, test, fc, "mlf_lgbm"), base, time.perf_counter() - wall,
                         dataset=ds) | m4.coverage(test, fc, "mlf_lgbm-lo-{}", "mlf_lgbm-hi-{}"))
    table = pd.DataFrame(rows)
    table["seconds_vs_mlforecast"] = table["seconds"] / table.loc[table["model"] == "mlf_lgbm", "seconds"].iloc[0]
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", default=os.environ.get("HEADROOM_DATASETS", str(ROOT.parent / "shared" / "datasets")))
    parser.add_argument("--suites", default="m4,scale")
    parser.add_argument("--m4-test", type=Path, default=None,
                        help="M4's official Hourly-test.csv: score m4 there, fit on the whole training part")
    parser.add_argument("--models", default="seasonal_naive,lgbm", help="models of the scale suite")
    parser.add_argument("--sizes", default="1000,2000,5000,10000")
    parser.add_argument("--days", type=int, default=60)
    parser.add_argument("--horizon", type=int, default=24)
    parser.add_argument("--out", default=str(ROOT / "bench-out" / "forecast_speed.csv"))
    parser.add_argument("--one", nargs=4, metavar=("MODEL", "SERIES", "DAYS", "HORIZON"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.one:  # a child of the scale suite: one run, its figures as one JSON line
        name, n, days, h = args.one
        print(json.dumps(one(name, int(n), int(days), int(h))))
        return 0
    from benchmarks import m4

    suites = [s.strip() for s in args.suites.split(",") if s.strip()]
    if problem := m4.test_option_problem(args.m4_test, suites):
        print(f"forecast_speed.py: error: {problem}", file=sys.stderr)
        return 2
    tables = []
    for suite in suites:
        if suite == "m4":
            root = Path(args.datasets)
            if not (root / m4.FILE).is_file():
                log.warning("m4: no M4 Hourly under %s, skipped", root)
                continue
            try:
                split = m4.load(root, args.m4_test)
            except (OSError, ValueError) as err:
                print(f"forecast_speed.py: error: {err}", file=sys.stderr)
                return 2
            table = m4_speed(split, m4.dataset_name(args.m4_test))
        elif suite == "scale":
            table = scale([m for m in args.models.split(",") if m], [int(s) for s in args.sizes.split(",")],
                          args.days, args.horizon)
        else:
            parser.error(f"unknown suite {suite!r}")
        table.insert(0, "suite", suite)
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        tables.append(table)
    if tables:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        pd.concat(tables, ignore_index=True).to_csv(out, index=False)
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
