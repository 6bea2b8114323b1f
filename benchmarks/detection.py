"""Detection benchmark: the three ``headroom ... evaluate`` commands on the public traces
and on the synthetic fleet.

    python benchmarks/detection.py [--datasets ../shared/datasets] [--suites nab,nab-tuned,nab-heldout,pdm,pdm-splits,pdm-converted,pdm-curve,
                                             pdm-devices,spot,synthetic,synthetic-devices]
                                   [--out bench-out/detection] [--nodes 12 --days 28 --seed 0]
                                   [--seeds 1,2,3 --final-models folds,refit]   (synthetic-devices)

Datasets are read in place (``--datasets`` or ``HEADROOM_DATASETS``); conversions go to a
temporary folder, never into the repository. Data preparation, documented:
  * nab: every ``realAWSCloudwatch/*.csv`` present (``timestamp,value``, 5-min) becomes
    ``unique_id = realAWSCloudwatch/<file>``, ``ds``, ``y``; windows are
    ``combined_windows.json`` as is (same keys). ``bursts evaluate`` with its defaults, the
    settings ``detect`` runs on hourly fleet demand (season 24 points, 4 seasons, target ARL
    7 days, 6 h cooldown, refitted daily), none chosen on NAB; calibrated on the first 15%.
  * nab-tuned: the same with the settings an earlier round chose on these series (a 2-day
    rolling-median baseline: season 1, 576 points; target ARL 60 days; 36 h cooldown).
  * nab-heldout: the same series, leave-one-series-out: each detector's baseline, target ARL
    and cooldown, and the CUSUM's ``confirm_for`` (``NAB_GRID``, which holds the defaults) are chosen on the other 7 series
    (most windows detected at <= 1 false alarm per series-week) and scored on the held-out
    one; every (setting, series) score is written to ``bursts_nab_grid.csv``.
  * pdm: the Azure PdM files are passed as they are; ``headroom faults evaluate`` maps
    them (machineID -> device_id ``machine<N>``, volt/rotate/pressure/vibration -> metrics,
    failure comp1..4 -> failure_type, errors and maintenance -> events, age -> age_days).
  * pdm-splits: the same evaluation over several splits, pooled, because one quarter of
    10 machines leaves only 4 failures in a 30% test span: test fractions 0.25-0.45, and
    a 30% test span with 3 of the machines also held out of training (4 draws). Each
    split trains its own model and sets its own threshold on its own training span.
  * pdm-converted: the pdm-splits splits on the output of ``headroom convert --from azure-pdm``
    (telemetry with a counter per error type, failures; no maintenance log, no ages): the
    warehouse path, what the ``detect`` flow learns from.
  * pdm-curve: a learning curve over fleet size: ``faults evaluate`` (30% and 40% time
    splits) on a fleet of a random 30%, 50% or 70% of the machines (5 draws each) or of all
    of them, trained on the fleet's early span and scored on its late span: whether the PdM
    figure is limited by how many failures 10 machines give to train on.
  * pdm-devices: machines held out by device, never seen in training (5 random groups, each
    scored over the whole quarter by a model of the other 8; 2 draws), on all the PdM tables
    and on the telemetry-only conversion; inner time or device folds (benchmarks/fault_devices.py).
  * synthetic-devices: the same device split on the synthetic GPU fleet (DCGM metrics), on
    the fleet of each of ``--seeds`` and pooled over them.
  * PdM telemetry and spot prices: every ``PdM_telemetry*.csv*`` and every
    ``aws_spot_price_history_*.csv.gz`` in the folder, a row in two files once
    (benchmarks/public_files.py), so a larger slice copied beside the one here is read whole.
  * spot: ``aws_spot_price_history_*.csv.gz`` -> the spot-prices contract (provider aws,
    zone = availability_zone, product = product_description); ``on_demand_prices.csv`` ->
    ``provider,region,instance_type,on_demand_price``.
  * synthetic: ``pipelines.synth.fleet.generate_fleet``: GPU telemetry and failures (faults,
    lead 30 min), spot prices with the catalog's on-demand prices (spikes), and hourly
    demand per cluster/pool/resource with the injected bursts as windows (bursts).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
SUITES = ("nab", "nab-tuned", "nab-heldout", "pdm", "pdm-splits", "pdm-converted", "pdm-curve", "pdm-devices",
          "spot", "synthetic", "synthetic-devices")
sys.path.insert(0, str(ROOT))

from benchmarks.public_files import aws_spot, pdm_telemetry  # noqa: E402

NAB = "nab-cloud-cpu-anomaly"
PDM = "azure-pdm-telemetry"
SPOT = "aws-spot-us-east-1-2015"


def headroom(args: list[str], out_csv: Path) -> pd.DataFrame:
    """Run one ``headroom`` command in a fresh interpreter; return its metrics CSV."""
    cmd = [sys.executable, "-m", "pipelines.cli", *args, "--out", str(out_csv)]
    print("$ headroom " + " ".join(args + ["--out", str(out_csv)]), flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"command failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    frame = pd.read_csv(out_csv)
    print(frame.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"({time.perf_counter() - t0:.1f} s)\n", flush=True)
    return frame


def nab(datasets: Path, tmp: Path, out: Path, tuned: bool = False) -> None:
    root = datasets / NAB
    frames = []
    for f in sorted((root / "realAWSCloudwatch").glob("*.csv")):
        d = pd.read_csv(f)
        frames.append(pd.DataFrame({"unique_id": f"realAWSCloudwatch/{f.name}", "ds": d["timestamp"], "y": d["value"]}))
    pd.concat(frames).to_csv(tmp / "nab.csv", index=False)
    settings = (["--season-length", "1", "--n-seasons", "576", "--target-arl", "60D", "--cooldown", "36h"]
                if tuned else [])
    labels = ["--labels", str(root / "combined_labels.json")] if (root / "combined_labels.json").is_file() else []
    headroom(["bursts", "evaluate", "--input", str(tmp / "nab.csv"), "--windows", str(root / "combined_windows.json"),
              *labels, *settings, "--train-fraction", "0.15"], out / ("bursts_nab_tuned.csv" if tuned else "bursts_nab.csv"))


NAB_GRID = [  # (season length, n_seasons, target ARL, cooldown, confirm_for): 5-min rolling medians of
    # 1 and 2 days, the CUSUM alarming at once or after 10 minutes out of control ...
    (1, n, arl, cool, confirm) for confirm in ("0h", "10min") for n in (288, 576)
    for arl in ("7D", "30D", "60D", "120D") for cool in ("6h", "36h")
] + [(24, 4, "7D", "6h", "0h")]  # ... and the defaults


def _pick(table: pd.DataFrame, max_fa_week: float) -> tuple:
    """The setting with the most detections among those at <= ``max_fa_week`` (ties: fewest
    false alarms); the fewest false alarms when none qualifies."""
    ok = table[table["fa_week"] <= max_fa_week]
    if ok.empty:
        return table.sort_values(["fa_week", "rate"], ascending=[True, False]).index[0]
    return ok.sort_values(["rate", "fa_week"], ascending=[False, True]).index[0]


def _grid_rows(task: tuple) -> list[dict]:
    """Every detector's score of one NAB series at one grid setting (a worker's unit of work)."""
    from anomaly.cusum import CusumPolicy
    from anomaly.evaluate import evaluate_bursts

    setting, uid, frame, wins, labels = task
    season, n, arl, cool, confirm = setting
    policy = CusumPolicy(season_length=season, n_seasons=n, target_arl=arl, cooldown=cool, confirm_for=confirm)
    # confirm_for is the CUSUM's alone: the baselines score as at 0h, so they are not rerun
    only = ("cusum",) if confirm != "0h" else None
    m = evaluate_bursts(frame, {uid: wins}, policy, train_fraction=0.15, labels=labels, only=only)
    rows = []
    for r in m.to_dict("records"):
        weeks = r["false_alarms"] / r["false_alarms_per_week"] if r["false_alarms_per_week"] else None
        rows.append({"setting": setting, "uid": uid, **r, "weeks": weeks, "delays": m.attrs["delays"][r["detector"]]})
    return rows


def nab_heldout(datasets: Path, out: Path, max_fa_week: float = 1.0, jobs: int = 1) -> None:
    """Leave-one-series-out: each detector's settings are chosen on 7 NAB series (most windows
    detected at <= 1 false alarm per series-week) and scored on the 8th; held-out rows summed.
    No figure here comes from settings chosen on the series it is reported for. The grid's
    (setting, series) scores run on ``jobs`` processes (each about 10 s on a 4,000-point series)."""
    from concurrent.futures import ProcessPoolExecutor

    from pipelines.ingest.tables import read_labels, read_windows

    root = datasets / NAB
    series = {}
    for f in sorted((root / "realAWSCloudwatch").glob("*.csv")):
        d = pd.read_csv(f)
        uid = f"realAWSCloudwatch/{f.name}"
        series[uid] = pd.DataFrame({"unique_id": uid, "ds": pd.to_datetime(d["timestamp"]), "y": d["value"]})
    windows = read_windows(root / "combined_windows.json")
    labels = read_labels(root / "combined_labels.json") if (root / "combined_labels.json").is_file() else None
    t0 = time.perf_counter()
    tasks = [(setting, uid, frame, windows.get(uid, []), labels) for setting in NAB_GRID
             for uid, frame in series.items()]
    print(f"nab-heldout: {len(NAB_GRID)} settings x {len(series)} series on {jobs} process(es)", file=sys.stderr,
          flush=True)
    rows = []
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:  # results come back in task order
        for i, part in enumerate(pool.map(_grid_rows, tasks), 1):
            rows += part
            if i % len(series) == 0:
                print(f"nab-heldout: setting {i // len(series)} of {len(NAB_GRID)} scored "
                      f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    grid = pd.DataFrame(rows)
    # a series with no false alarm gives no weeks above: take its test span from another row
    span = grid.dropna(subset=["weeks"]).groupby("uid")["weeks"].first()
    grid["weeks"] = grid["uid"].map(span)
    if grid["weeks"].isna().any():
        raise RuntimeError("could not tell the test span of every NAB series")
    # every (setting, series) score, so other selection rules can be studied without a rerun
    grid.drop(columns="delays").assign(setting=grid["setting"].map(lambda s: "/".join(map(str, s)))).to_csv(
        out / "bursts_nab_grid.csv", index=False)
    held = []
    for det, d in grid.groupby("detector"):
        totals = {"detector": det, "windows": 0, "detected": 0, "false_alarms": 0, "weeks": 0.0, "choices": [],
                  "delays": []}
        for uid in series:
            train = d[d["uid"] != uid].groupby("setting")[["windows", "detected", "false_alarms", "weeks"]].sum()
            train["rate"] = train["detected"] / train["windows"].clip(lower=1)
            train["fa_week"] = train["false_alarms"] / train["weeks"]
            choice = _pick(train, max_fa_week)
            test = d[(d["uid"] == uid) & (d["setting"] == choice)].iloc[0]
            for k in ("windows", "detected", "false_alarms", "weeks", "delays"):
                totals[k] += test[k]
            totals["choices"].append("/".join(map(str, choice)))
        held.append({
            "detector": det, "windows": int(totals["windows"]), "detected": int(totals["detected"]),
            "detection_rate": totals["detected"] / totals["windows"], "false_alarms": int(totals["false_alarms"]),
            "false_alarms_per_week": totals["false_alarms"] / totals["weeks"],
            "median_delay_points": float(np.median(totals["delays"])) if totals["delays"] else float("nan"),
            "p90_delay_points": float(np.percentile(totals["delays"], 90)) if totals["delays"] else float("nan"),
            "delay_from": "label" if labels else "window_start",
            "settings_chosen": " ".join(sorted(set(totals["choices"]))),
        })
    table = pd.DataFrame(held)
    table.to_csv(out / "bursts_nab_heldout.csv", index=False)
    with pd.option_context("display.width", 250, "display.max_colwidth", 120):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"({time.perf_counter() - t0:.1f} s, {len(NAB_GRID)} CUSUM settings x {len(series)} series)\n", flush=True)


def pdm(datasets: Path, tmp: Path, out: Path) -> None:
    root = datasets / PDM
    telemetry = pdm_telemetry(root, tmp)
    headroom(["faults", "evaluate", "--telemetry", str(telemetry), "--failures", str(root / "PdM_failures.csv"),
              "--events", str(root / "PdM_errors.csv"), "--events", str(root / "PdM_maint.csv"),
              "--devices", str(root / "PdM_machines.csv"), "--lead", "30m", "--horizon", "24h",
              "--windows", "3h,24h", "--test-fraction", "0.3"], out / "faults_pdm.csv")


PDM_SPLITS = [(tf, None) for tf in (0.25, 0.3, 0.35, 0.4, 0.45)] + [(0.3, draw) for draw in range(4)]


def _pdm_inputs(datasets: Path, tmp: Path) -> dict[str, pd.DataFrame]:
    from pipelines.ingest import tables
    root = datasets / PDM
    return {
        "telemetry": tables.read_telemetry(pdm_telemetry(root, tmp)),
        "failures": tables.read_failures(root / "PdM_failures.csv"),
        "events": pd.concat([tables.read_events(root / "PdM_errors.csv"),
                             tables.read_events(root / "PdM_maint.csv")], ignore_index=True),
        "devices": tables.read_devices(root / "PdM_machines.csv"),
    }


def pdm_splits(datasets: Path, tmp: Path, out: Path) -> None:
    """``faults evaluate`` over several time (and time-and-device) splits, events pooled."""
    _splits(_pdm_inputs(datasets, tmp), out / "faults_pdm_splits.csv")


def pdm_converted(datasets: Path, tmp: Path, out: Path) -> None:
    """The same splits on what ``headroom convert --from azure-pdm`` writes for the warehouse
    (telemetry with error counters, failures; no maintenance log or ages): the data the
    ``detect`` flow's fault predictor sees."""
    _splits(_converted(datasets, tmp), out / "faults_pdm_converted_splits.csv")


def _converted(datasets: Path, tmp: Path) -> dict:
    """What ``headroom convert --from azure-pdm`` writes (telemetry with error counters and
    failures), read back."""
    from pipelines.ingest import tables
    root = datasets / PDM
    conv = tmp / "pdm-converted"
    if not (conv / "telemetry.csv").is_file():
        cmd = [sys.executable, "-m", "pipelines.cli", "convert", "--from", "azure-pdm", "--out", str(conv),
               str(pdm_telemetry(root, tmp))]
        print("$ headroom " + " ".join(cmd[3:]), flush=True)
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"convert failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return {"telemetry": tables.read_telemetry(conv / "telemetry.csv"),
            "failures": tables.read_failures(conv / "failures.csv"), "events": None, "devices": None}


def pdm_devices(datasets: Path, tmp: Path, out: Path, inner: tuple[str, ...] = ("time", "auto")) -> None:
    """Machines held out by device (see benchmarks/fault_devices.py): all PdM tables, and the
    telemetry-only conversion."""
    from benchmarks.fault_devices import device_split_table

    device_split_table({"pdm_all_tables": _pdm_inputs(datasets, tmp), "pdm_telemetry_only": _converted(datasets, tmp)},
                       out / "faults_pdm_devices.csv", ("3h", "24h"), inner=inner)


def synthetic_devices(out: Path, nodes: int, days: int, seeds: list[int],
                      finals: tuple[str, ...] = ("folds", "refit"), inner: tuple[str, ...] = ("time", "auto")) -> None:
    """GPUs held out by device on the synthetic fleet (DCGM metrics), one fleet per seed, and
    pooled over the seeds."""
    from benchmarks.fault_devices import device_split_table, synthetic_fleet

    device_split_table({f"synthetic_gpu_seed{s}": synthetic_fleet(nodes, days, s) for s in seeds},
                       out / "faults_synthetic_devices.csv", ("1h", "6h", "24h"), inner=inner, finals=finals,
                       pool_as="synthetic_gpu_seeds_" + "_".join(map(str, seeds)))


def _splits(data: dict, out_csv: Path) -> None:
    import numpy as np

    from anomaly.evaluate import evaluate_faults
    from anomaly.fault_features import FaultPolicy
    from benchmarks.fault_devices import pooled_counts

    ids = np.sort(data["telemetry"]["device_id"].unique())
    policy = FaultPolicy(lead="30min", horizon="24h", windows=("3h", "24h"))
    t0 = time.perf_counter()
    rows = []
    for tf, draw in PDM_SPLITS:
        held = None if draw is None else sorted(np.random.default_rng(draw).choice(ids, 3, replace=False))
        m = evaluate_faults(data["telemetry"], data["failures"], policy, tf, data["events"], data["devices"],
                            held).iloc[0].to_dict()
        rows.append({"test_fraction": tf, "held_devices": " ".join(held) if held else "", **m})
    table = pd.DataFrame(rows)
    pooled = pooled_counts(table, test_fraction="pooled", held_devices="")
    table = pd.concat([table, pd.DataFrame([pooled])], ignore_index=True)
    table.to_csv(out_csv, index=False)
    with pd.option_context("display.width", 250):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"({time.perf_counter() - t0:.1f} s, {len(PDM_SPLITS)} splits; auc pooled = mean)\n", flush=True)


PDM_CURVE_SHARES = (0.3, 0.5, 0.7, 1.0)
PDM_CURVE_DRAWS = 5


def pdm_curve(datasets: Path, tmp: Path, out: Path) -> None:
    """Recall and precision against fleet size: ``faults evaluate`` on a random share of the
    machines (30% and 40% splits), pooled over draws and splits."""
    import numpy as np

    from anomaly.evaluate import evaluate_faults
    from anomaly.fault_features import FaultPolicy
    from benchmarks.fault_devices import pooled_counts

    data = _pdm_inputs(datasets, tmp)
    ids = np.sort(data["telemetry"]["device_id"].unique())
    policy = FaultPolicy(lead="30min", horizon="24h", windows=("3h", "24h"))
    t0 = time.perf_counter()
    runs, rows = [], []
    for share in PDM_CURVE_SHARES:
        k = max(int(round(share * len(ids))), 2)
        draws = 1 if k >= len(ids) else PDM_CURVE_DRAWS
        part = []
        for tf in (0.3, 0.4):
            for draw in range(draws):
                fleet = ids if k >= len(ids) else np.random.default_rng(draw).choice(ids, k, replace=False)
                telemetry = data["telemetry"][data["telemetry"]["device_id"].isin(fleet)]
                try:
                    m = evaluate_faults(telemetry, data["failures"], policy, tf, data["events"],
                                        data["devices"]).iloc[0].to_dict()
                except ValueError as exc:
                    if "nothing to learn" not in str(exc):
                        raise
                    print(f"  {k} machines, draw {draw}, test {tf}: skipped (no failure in the training span)")
                    continue
                part.append({"train_machines": k, "test_fraction": tf, "draw": draw, **m})
        runs += part
        if part:
            rows.append(pooled_counts(pd.DataFrame(part), train_machines=k, runs=len(part)))
    pd.DataFrame(runs).to_csv(out / "faults_pdm_curve_runs.csv", index=False)
    table = pd.DataFrame(rows)[["train_machines", "runs", "events", "caught", "recall", "alerts", "precision", "auc"]]
    table.to_csv(out / "faults_pdm_curve.csv", index=False)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"({time.perf_counter() - t0:.1f} s; events and alerts summed over the runs, auc = mean)\n", flush=True)


def spot(datasets: Path, tmp: Path, out: Path) -> None:
    root = datasets / SPOT
    prices, on_demand = aws_spot(root)
    prices.to_csv(tmp / "spot.csv", index=False)
    on_demand.to_csv(tmp / "od.csv", index=False)
    headroom(["spikes", "evaluate", "--prices", str(tmp / "spot.csv"), "--on-demand", str(tmp / "od.csv"),
              "--horizon", "6h", "--k", "2"], out / "spikes_aws.csv")


def synthetic(tmp: Path, out: Path, nodes: int, days: int, seed: int) -> None:
    from pipelines.synth.fleet import generate_fleet

    fleet = generate_fleet(nodes=nodes, days=days, seed=seed)
    fleet["telemetry"].to_csv(tmp / "telemetry.csv", index=False)
    fleet["failures"].to_csv(tmp / "failures.csv", index=False)
    print(f"synthetic fleet: {nodes} nodes, {days} days, seed {seed}: "
          f"{fleet['failures']['device_id'].nunique()} failed GPUs, {len(fleet['failures'])} failures")
    headroom(["faults", "evaluate", "--telemetry", str(tmp / "telemetry.csv"), "--failures", str(tmp / "failures.csv"),
              "--lead", "30m", "--horizon", "24h", "--windows", "1h,6h,24h", "--test-fraction", "0.4"],
             out / "faults_synthetic.csv")
    fleet["spot_prices"].to_csv(tmp / "spot.csv", index=False)
    cat = fleet["catalog"].dropna(subset=["on_demand_price"])
    cat[["provider", "region", "instance_type", "on_demand_price"]].to_csv(tmp / "od.csv", index=False)
    headroom(["spikes", "evaluate", "--prices", str(tmp / "spot.csv"), "--on-demand", str(tmp / "od.csv"),
              "--horizon", "6h", "--k", "2"], out / "spikes_synthetic.csv")
    util = fleet["utilization"]
    per_node = util.assign(ds=util["ts"].dt.floor("h")).groupby(
        ["cluster", "pool", "resource", "node_id", "ds"], as_index=False)["used"].mean()
    demand = per_node.groupby(["cluster", "pool", "resource", "ds"], as_index=False)["used"].sum()
    demand["unique_id"] = demand["cluster"] + "/" + demand["pool"] + "/" + demand["resource"]
    demand.rename(columns={"used": "y"})[["unique_id", "ds", "y"]].to_csv(tmp / "demand.csv", index=False)
    windows: dict[str, list[list[str]]] = {}
    for b in fleet["bursts"].itertuples(index=False):
        windows.setdefault(b.unique_id, []).append([str(b.start), str(b.end + pd.Timedelta(hours=2))])
    (tmp / "windows.json").write_text(json.dumps(windows))
    headroom(["bursts", "evaluate", "--input", str(tmp / "demand.csv"), "--windows", str(tmp / "windows.json"),
              "--season-length", "24", "--n-seasons", "4", "--target-arl", "7D", "--cooldown", "6h",
              "--train-fraction", "0.3"], out / "bursts_synthetic.csv")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", type=Path,
                    default=os.environ.get("HEADROOM_DATASETS", ROOT.parent / "shared" / "datasets"))
    ap.add_argument("--suites", default="nab,nab-tuned,nab-heldout,pdm,pdm-splits,spot,synthetic")
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out" / "detection")
    ap.add_argument("--nodes", type=int, default=12)
    ap.add_argument("--days", type=int, default=28)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="processes for the nab-heldout grid (default: one per CPU)")
    ap.add_argument("--seeds", help="synthetic-devices: comma-separated fleet seeds, pooled; replaces --seed there")
    ap.add_argument("--final-models", default="folds,refit",
                    help="synthetic-devices: the fault model's scorers to run (folds, refit)")
    ap.add_argument("--inner-folds", default=None,
                    help="pdm-devices, synthetic-devices: the inner folds thresholds are set on (time, device, "
                    "auto), comma-separated (default: time,auto)")
    args = ap.parse_args()
    try:
        seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else [args.seed]
    except ValueError:
        ap.error(f"--seeds takes comma-separated integers, got {args.seeds!r}")
    if len(set(seeds)) < len(seeds):
        ap.error(f"--seeds names a seed twice: {args.seeds!r}")
    finals = tuple(f.strip() for f in args.final_models.split(",") if f.strip())
    if not finals or set(finals) - {"folds", "refit"}:
        ap.error(f"--final-models takes folds and/or refit, got {args.final_models!r}")
    inner = tuple(f.strip() for f in (args.inner_folds or "").split(",") if f.strip())
    if args.inner_folds is not None and (not inner or set(inner) - {"time", "device", "auto"}):
        ap.error(f"--inner-folds takes time, device and/or auto, got {args.inner_folds!r}")
    suites = [s.strip() for s in args.suites.split(",") if s.strip()]
    unknown = [s for s in suites if s not in SUITES]
    if unknown:  # before any suite runs, not after the ones listed first
        ap.error(f"unknown suite(s) {', '.join(unknown)}; choose from {', '.join(SUITES)}")
    args.out.mkdir(parents=True, exist_ok=True)
    public = [s for s in suites if s in ("nab", "nab-tuned", "nab-heldout", "pdm", "pdm-splits", "pdm-converted",
                                          "pdm-curve", "pdm-devices", "spot")]
    if public and (args.datasets is None or not Path(args.datasets).is_dir()):
        print(f"skipping {public}: pass --datasets or set HEADROOM_DATASETS", file=sys.stderr)
        suites = [s for s in suites if s not in public]
    with tempfile.TemporaryDirectory(prefix="headroom-detect-bench-") as tmp_name:
        tmp = Path(tmp_name)
        for suite in suites:
            print(f"== {suite}", flush=True)
            if suite in ("nab", "nab-tuned"):
                nab(Path(args.datasets), tmp, args.out, tuned=suite == "nab-tuned")
            elif suite == "nab-heldout":
                nab_heldout(Path(args.datasets), args.out, jobs=args.jobs)
            elif suite == "pdm":
                pdm(Path(args.datasets), tmp, args.out)
            elif suite == "pdm-splits":
                pdm_splits(Path(args.datasets), tmp, args.out)
            elif suite == "pdm-converted":
                pdm_converted(Path(args.datasets), tmp, args.out)
            elif suite == "pdm-devices":
                pdm_devices(Path(args.datasets), tmp, args.out, *([inner] if inner else []))
            elif suite == "synthetic-devices":
                synthetic_devices(args.out, args.nodes, args.days, seeds, finals, *([inner] if inner else []))
            elif suite == "pdm-curve":
                pdm_curve(Path(args.datasets), tmp, args.out)
            elif suite == "spot":
                spot(Path(args.datasets), tmp, args.out)
            elif suite == "synthetic":
                synthetic(tmp, args.out, args.nodes, args.days, args.seed)
            else:
                print(f"unknown suite {suite}", file=sys.stderr)
                return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
