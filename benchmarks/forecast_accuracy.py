"""Forecast accuracy benchmark: every headroom model side by side with statsforecast /
mlforecast peers (when installed) on the public Bitbrains traces and the synthetic fleet,
plus the 100-series speed check.

    python benchmarks/forecast_accuracy.py [--datasets ../shared/datasets] [--suites cluster,panel,synthetic,speed]
    python benchmarks/forecast_accuracy.py --suites cluster-windows   # coverage vs number of windows
    python benchmarks/forecast_accuracy.py --suites m4 --models seasonal_naive,lgbm   # M4 Hourly, OWA
    python benchmarks/forecast_accuracy.py --suites m4 --m4-test Hourly-test.csv   # the official test part
    python benchmarks/forecast_accuracy.py --suites panel --models lstm --no-peers --seed 3   # another seed

The backtests use 7 rolling origins a day apart (``--windows``; the issue asks for at least 3):
a week, so each weekday is forecast once, and 7 days rather than 3 to measure coverage on.
``coverage_80_se`` and ``coverage_95_se`` are the coverages' standard errors with each window
as one independent block (hours of a day, and VMs on one day, miss together).

``cluster-windows`` backtests headroom's models on the cluster series with 3, 5, 7, 10 and 14
windows: one series' coverage over a few days is a noisy figure (its errors are strongly
correlated within a day), and this shows how far it moves with the span it is measured on.

Datasets are read in place (``--datasets`` or ``HEADROOM_DATASETS``), never copied.
Data preparation, documented:
  * cluster: every ``rnd_cluster_5min*.csv.gz`` (the July copy here,
    ``rnd_cluster_5min_until_2013-08-01``, and/or the whole Jul-Sep trace; a 5-min bucket in
    two files is read once, from the first by name), hourly mean of the
    5-min ``cpu_usage_mhz_sum`` (the cluster total), on the longest stretch of hours without
    a hole (an hour with no data; in July the hole at 2013-07-30 22:00 is a day long); hours
    when fewer than half the usual VMs reported (a 30-hour outage on 2013-07-16/17) are
    filled from the same hour a day earlier, since the total then counts only ~33 VMs.
  * panel: every ``rnd_vm_hourly_*.csv.gz`` present (a VM-hour in two month files is their
    mean), ``cpu_usage_mhz_mean`` of the first 100 VMs (by id) that report in >= 95% of
    hours, on the longest stretch of hours in which some VM reports; their missing hours
    (mostly the same outage) are filled from a day earlier.
  * synthetic: ``pipelines.synth.fleet.generate_fleet`` -> DuckDB -> ``pipelines.store.demand``.
"""
from __future__ import annotations

import argparse
import logging
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import forecasters  # noqa: E402
from benchmarks.public_files import union_csv  # noqa: E402

log = logging.getLogger("forecast_accuracy")
BITBRAINS = "bitbrains-rnd-vm-utilization"
MODELS = ("seasonal_naive", "ets", "prophet", "lgbm", "prophet_lgbm", "lstm", "ensemble")
CLUSTER_WINDOWS = (3, 5, 7, 10, 14)
SUITES = ("cluster", "panel", "synthetic", "speed", "cluster-windows", "m4")


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (cmdstan runs as a child)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _fill_from_yesterday(series: pd.Series, season: int = 24) -> pd.Series:
    out = series.copy()
    for _ in range(7):
        if not out.isna().any():
            break
        out = out.fillna(out.shift(season))
    return out.interpolate(limit_direction="both")


def _bitbrains_files(root: Path, pattern: str) -> list[Path]:
    files = sorted((root / BITBRAINS).glob(pattern))
    if not files:
        raise FileNotFoundError(f"no {pattern} under {root / BITBRAINS}")
    return files


def _longest_stretch(hole: np.ndarray) -> slice:
    """The longest run of positions where ``hole`` is False."""
    edges = np.flatnonzero(np.diff(np.r_[1, hole.astype(np.int8), 1]))  # starts and ends of runs
    runs = list(zip(edges[::2], edges[1::2]))  # (start, end) of each run without a hole
    start, end = max(runs, key=lambda r: r[1] - r[0]) if runs else (0, 0)
    return slice(int(start), int(end))


def bitbrains_cluster(root: Path) -> pd.DataFrame:
    raw, _ = union_csv(root / BITBRAINS, "rnd_cluster_5min*.csv.gz", [], "bucket_start_utc")
    raw["ds"] = pd.to_datetime(raw["bucket_start_utc"], utc=True).dt.tz_localize(None).dt.floor("h")
    hourly = raw.groupby("ds").agg(y=("cpu_usage_mhz_sum", "mean"), vms=("n_vms", "mean"))
    hourly = hourly.reindex(pd.date_range(hourly.index.min(), hourly.index.max(), freq="h"))
    hourly = hourly.iloc[_longest_stretch(hourly["y"].isna().to_numpy())]
    y = hourly["y"].where(hourly["vms"] >= 0.5 * hourly["vms"].median())
    return pd.DataFrame({"unique_id": "rnd_cluster", "ds": hourly.index, "y": _fill_from_yesterday(y).to_numpy()})


def bitbrains_panel(root: Path, n_vms: int = 100) -> pd.DataFrame:
    cols = ["vm_id", "hour_utc", "cpu_usage_mhz_mean"]
    raw = pd.concat([pd.read_csv(f, usecols=cols) for f in _bitbrains_files(root, "rnd_vm_hourly_*.csv.gz")])
    raw["ds"] = pd.to_datetime(raw["hour_utc"], utc=True).dt.tz_localize(None)
    wide = raw.pivot_table(index="ds", columns="vm_id", values="cpu_usage_mhz_mean")  # mean of duplicates
    wide = wide.reindex(pd.date_range(wide.index.min(), wide.index.max(), freq="h"))
    wide = wide.iloc[_longest_stretch(wide.isna().all(axis=1).to_numpy())]
    keep = [c for c in sorted(wide.columns) if wide[c].notna().mean() >= 0.95][:n_vms]
    wide = wide[keep].apply(_fill_from_yesterday)
    long = wide.stack().rename("y").reset_index()
    long.columns = ["ds", "unique_id", "y"]
    long["unique_id"] = "vm" + long["unique_id"].astype(str)
    return long[["unique_id", "ds", "y"]].sort_values(["unique_id", "ds"]).reset_index(drop=True)


def synthetic_demand(nodes: int, days: int, seed: int) -> pd.DataFrame:
    from pipelines.store import demand, warehouse
    from pipelines.synth.fleet import generate_fleet

    util = generate_fleet(nodes=nodes, days=days, seed=seed)["utilization"]
    con = warehouse.connect(":memory:")
    try:
        con.register("_util", util)
        con.execute("INSERT INTO utilization SELECT ts, cluster, pool, node_id, resource, used, capacity FROM _util")
        return demand.load_demand(con)
    finally:
        con.close()


def speed_panel(n_series: int = 100, days: int = 60, seed: int = 0) -> pd.DataFrame:
    """100 hourly demand-like series: daily and weekly cycles, trend, AR noise, bursts."""
    rng = np.random.default_rng(seed)
    t = np.arange(days * 24)
    frames = []
    for i in range(n_series):
        level = rng.uniform(20, 500)
        shape = 1 + 0.35 * np.sin(2 * np.pi * (t + rng.integers(24)) / 24) + 0.15 * np.sin(2 * np.pi * t / 168)
        noise = np.convolve(rng.normal(0, 0.05, len(t)), np.ones(3) / 3, mode="same")
        bursts = (rng.random(len(t)) < 0.01) * rng.uniform(0.2, 0.6, len(t))
        y = level * (shape + 0.001 * t + noise + bursts)
        frames.append(pd.DataFrame({"unique_id": f"s{i:03d}", "ds": pd.date_range("2026-01-05", periods=len(t),
                                    freq="h"), "y": y}))
    return pd.concat(frames, ignore_index=True)


def coverage_se(cv: pd.DataFrame) -> dict[str, float]:
    """Standard error of each interval's coverage, with the windows (cutoffs) as independent
    blocks: within a window the errors of an hour and the next, and of VMs on the same day, move
    together, so the points themselves are far from independent. NaN with one window."""
    out = {}
    for lv in (80, 95):
        if f"lo_{lv}" not in cv:
            continue
        inside = (cv["y"] >= cv[f"lo_{lv}"]) & (cv["y"] <= cv[f"hi_{lv}"])
        per_window = inside.groupby(cv["cutoff"].to_numpy()).mean()
        n = len(per_window)
        out[f"coverage_{lv}_se"] = float(per_window.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    return out


def wape_gap(cv: pd.DataFrame, ref: pd.DataFrame, draws: int = 2000, seed: int = 0) -> tuple[float, float]:
    """90% interval of WAPE(cv) - WAPE(ref), two backtests of the same points, from a paired
    bootstrap over series (over forecast windows when there is one series: the hours of a
    day miss together, so a window is the unit)."""
    keys = ["unique_id", "ds", "cutoff"]
    both = cv[keys + ["y", "mean"]].merge(ref[keys + ["mean"]], on=keys, suffixes=("", "_ref"))
    if both.empty or both[["mean", "mean_ref"]].isna().any().any():  # as the point WAPE: no figure
        return float("nan"), float("nan")
    unit = "unique_id" if both["unique_id"].nunique() > 1 else "cutoff"
    sums = both.assign(e=(both["y"] - both["mean"]).abs(), e_ref=(both["y"] - both["mean_ref"]).abs(),
                       a=both["y"].abs()).groupby(unit)[["e", "e_ref", "a"]].sum().to_numpy()
    pick = np.random.default_rng(seed).integers(0, len(sums), (draws, len(sums)))
    drawn = sums[pick].sum(axis=1)
    lo, hi = np.quantile((drawn[:, 0] - drawn[:, 1]) / drawn[:, 2], [0.05, 0.95])
    return float(lo), float(hi)


def run_ours(data: pd.DataFrame, names: list[str], h: int, windows: int, seed: int = 0,
             cvs: dict[str, pd.DataFrame] | None = None) -> list[dict]:
    """A row of metrics per model; each model's backtest goes into ``cvs`` when given."""
    rows = []
    for name in names:
        model = forecasters.create(name, horizon=h, freq="h", season_length=24, seed=seed)
        wall, cpu = time.perf_counter(), cpu_seconds()
        cv = forecasters.cross_validation(model, data, h=h, n_windows=windows, step=h)
        if cvs is not None:
            cvs[name] = cv
        row = forecasters.evaluate(cv, data, 24).iloc[0].to_dict()
        row.update(coverage_se(cv))
        row.update(seconds=time.perf_counter() - wall, cpu_seconds=cpu_seconds() - cpu, source="headroom")
        rows.append(row)
        log.info("%s: wape %.4f in %.1fs", name, row["wape"], row["seconds"])
    return rows


def _peer_frame(cv: pd.DataFrame, model: str) -> pd.DataFrame:
    out = pd.DataFrame({"unique_id": cv["unique_id"].astype(str), "ds": cv["ds"], "cutoff": cv["cutoff"],
                        "model": model, "y": cv["y"], "mean": cv[model]})
    for lv in (80, 95):
        for side in ("lo", "hi"):
            col = f"{model}-{side}-{lv}"
            out[f"{side}_{lv}"] = cv.get(col, np.nan)
    return out


def run_peers(data: pd.DataFrame, h: int, windows: int) -> list[dict]:
    """statsforecast SeasonalNaive/AutoETS/MSTL and mlforecast LightGBM, when installed."""
    rows: list[dict] = []
    frames: list[tuple[str, pd.DataFrame, float, float]] = []
    try:
        from statsforecast import StatsForecast
        from statsforecast.models import MSTL, AutoETS, SeasonalNaive

        for model in (SeasonalNaive(season_length=24, alias="sf_seasonal_naive"),
                      AutoETS(season_length=24, alias="sf_autoets"),
                      MSTL(season_length=[24, 168], alias="sf_mstl")):
            wall, cpu = time.perf_counter(), cpu_seconds()
            sf = StatsForecast(models=[model], freq="h", n_jobs=1)
            cv = sf.cross_validation(df=data, h=h, n_windows=windows, step_size=h, level=[80, 95])
            frames.append((model.alias, cv, time.perf_counter() - wall, cpu_seconds() - cpu))
    except ImportError:
        log.warning("statsforecast not installed: no statsforecast peers")
    try:
        import lightgbm as lgb
        from mlforecast import MLForecast
        from mlforecast.lag_transforms import RollingMean
        from mlforecast.utils import PredictionIntervals

        wall, cpu = time.perf_counter(), cpu_seconds()
        mlf = MLForecast(models={"mlf_lgbm": lgb.LGBMRegressor(verbosity=-1, n_jobs=1)}, freq="h",
                         lags=[1, 2, 3, 24, 48, 168], lag_transforms={1: [RollingMean(window_size=24)]},
                         date_features=["hour", "dayofweek"])
        cv = mlf.cross_validation(data, n_windows=windows, h=h, step_size=h,
                                  prediction_intervals=PredictionIntervals(n_windows=2, h=h), level=[80, 95])
        frames.append(("mlf_lgbm", cv, time.perf_counter() - wall, cpu_seconds() - cpu))
    except ImportError:
        log.warning("mlforecast not installed: no mlforecast peer")
    for name, cv, wall, cpu in frames:
        frame = _peer_frame(cv, name)
        row = forecasters.evaluate(frame, data, 24).iloc[0].to_dict()
        row.update(coverage_se(frame))
        row.update(seconds=wall, cpu_seconds=cpu, source="peer")
        rows.append(row)
        log.info("%s: wape %.4f in %.1fs", name, row["wape"], wall)
    return rows


def speed_check(n_series: int, days: int, h: int) -> dict:
    """prophet_lgbm: fit (with conformal calibration) and forecast on the speed panel."""
    data = speed_panel(n_series, days)
    wall, cpu = time.perf_counter(), cpu_seconds()
    fc = forecasters.create("prophet_lgbm", horizon=h, freq="h", season_length=24).fit(data).predict()
    return {"dataset": f"speed_{n_series}x{days}d", "model": "prophet_lgbm", "rows": len(fc),
            "seconds": time.perf_counter() - wall, "cpu_seconds": cpu_seconds() - cpu}


def _fail(message: str) -> int:
    """A bad input or option: one line on stderr, exit status 2."""
    print(f"forecast_accuracy.py: error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default_root = os.environ.get("HEADROOM_DATASETS", str(ROOT.parent / "shared" / "datasets"))
    parser.add_argument("--datasets", default=default_root)
    parser.add_argument("--suites", default="cluster,panel,synthetic,speed", help=f"of {', '.join(SUITES)}")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--windows", type=int, default=7,
                        help="rolling origins a day apart (7: each weekday once; the issue asks for >= 3)")
    parser.add_argument("--horizon", type=int, default=24)
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--m4-test", type=Path, default=None,
                        help="M4's official Hourly-test.csv: score m4 there, fit on the whole training part")
    parser.add_argument("--seed", type=int, default=0, help="the models' seed (lstm: its first network's)")
    parser.add_argument("--nodes", type=int, default=48, help="synthetic fleet nodes")
    parser.add_argument("--days", type=int, default=42, help="synthetic fleet days")
    parser.add_argument("--out", default=str(ROOT / "bench-out" / "forecast_accuracy.csv"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    for noisy in ("cmdstanpy", "prophet", "prophet.plot"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    suites = [s.strip() for s in args.suites.split(",") if s.strip()]
    unknown = [s for s in suites if s not in SUITES]
    if unknown or not suites:  # before any suite runs: a typo found after an hour's suite loses it
        parser.error(f"unknown suite(s) {', '.join(unknown)}; choose from {', '.join(SUITES)}" if unknown else
                     f"--suites {args.suites!r} names none; choose from {', '.join(SUITES)}")
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    root = Path(args.datasets)
    from benchmarks import m4

    if problem := m4.test_option_problem(args.m4_test, suites):
        return _fail(problem)
    rows: list[dict] = []
    for suite in suites:
        if suite == "cluster-windows":
            if not (root / BITBRAINS).is_dir():
                log.warning("%s: no %s under %s, skipped", suite, BITBRAINS, root)
                continue
            data = bitbrains_cluster(root)
            for windows in CLUSTER_WINDOWS:
                table = pd.DataFrame(run_ours(data, names, args.horizon, windows, args.seed))
                table.insert(0, "dataset", f"cluster_{windows}w")
                table["windows"] = windows
                rows += table.to_dict("records")
            continue
        if suite == "m4":  # M4 Hourly: the training part's last 48 points held out, or the official test
            if not (root / m4.FILE).is_file():
                log.warning("%s: no %s under %s, skipped", suite, m4.FILE, root)
                continue
            try:
                split = m4.load(root, args.m4_test)
            except (OSError, ValueError) as err:
                return _fail(str(err))
            m4_rows = m4.run(split, names, peers=not args.no_peers, seed=args.seed, ds=m4.dataset_name(args.m4_test))
            best = min(r["owa"] for r in m4_rows if r["source"] == "benchmark" and r["model"] == "seasonal_naive")
            rows += [{**r, "owa_vs_seasonal_naive": r["owa"] / best} for r in m4_rows]
            continue
        if suite == "speed":
            rows.append(speed_check(100, 60, args.horizon))
            log.info("speed: %s", rows[-1])
            continue
        if suite in ("cluster", "panel") and not (root / BITBRAINS).is_dir():
            log.warning("%s: no %s under %s, skipped", suite, BITBRAINS, root)
            continue
        data = {"cluster": lambda: bitbrains_cluster(root), "panel": lambda: bitbrains_panel(root),
                "synthetic": lambda: synthetic_demand(args.nodes, args.days, 0)}[suite]()
        log.info("%s: %d series x %d hours", suite, data["unique_id"].nunique(), data.groupby("unique_id").size().max())
        cvs: dict[str, pd.DataFrame] = {}
        found = run_ours(data, names, args.horizon, args.windows, args.seed, cvs)
        if not args.no_peers:
            found += run_peers(data, args.horizon, args.windows)
        table = pd.DataFrame(found)
        if "lgbm" in cvs:  # is a model's WAPE apart from lgbm's beyond the noise of these points?
            for name, cv in cvs.items():
                if name != "lgbm":
                    at = (table["model"] == name) & (table["source"] == "headroom")
                    table.loc[at, ["wape_gap_lo", "wape_gap_hi"]] = wape_gap(cv, cvs["lgbm"])
        base = table.set_index("model")["wape"]
        for ref in ("seasonal_naive", "prophet"):
            if ref in base:
                table[f"wape_vs_{ref}"] = table["wape"] / base[ref]
        peers = table.loc[table["source"] == "peer", "wape"]
        if not peers.empty:
            table["wape_vs_best_peer"] = table["wape"] / peers.min()
        table.insert(0, "dataset", suite)
        table["windows"] = args.windows
        rows += table.to_dict("records")
    out = pd.DataFrame(rows)
    cols = [c for c in ["dataset", "windows", "model", "source", "wape", "smape", "mase", "owa", "owa_vs_seasonal_naive",
                        "owa_gap_lo", "owa_gap_hi", "msis", "coverage_80", "coverage_95",
                        "coverage_80_se", "coverage_95_se", "wape_vs_seasonal_naive", "wape_vs_prophet",
                        "wape_vs_best_peer", "wape_gap_lo", "wape_gap_hi", "seconds", "cpu_seconds",
                        "rows"] if c in out.columns]
    out = out[cols]
    with pd.option_context("display.width", 200, "display.max_columns", 30):  # first: a bad --out loses nothing
        print(out.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    target = Path(args.out) / "forecast.csv" if Path(args.out).is_dir() else Path(args.out)
    target.parent.mkdir(parents=True, exist_ok=True)
    out.to_csv(target, index=False)
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
