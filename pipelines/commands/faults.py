"""``headroom faults evaluate`` (files) and ``headroom faults score`` (the warehouse)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipelines.commands.ingest import add_db_argument
from pipelines.runtime.outputs import check_writable, report_metrics


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("faults", help="hardware-fault prediction: evaluate or score")
    sub = p.add_subparsers(dest="faults_command", required=True, metavar="ACTION")
    e = sub.add_parser(
        "evaluate",
        help="time- or device-split evaluation of the fault predictor",
        description="Train on the early span, alert on the late span (or, with --split device, train on some "
        "devices and alert on the others). A failure is caught when an alert "
        "fired between --horizon and --lead before it; precision is over alerts, deduplicated per device "
        "and horizon; an alert in the last horizon of the data that no known failure confirms cannot be "
        "judged and is left out. Azure PdM files (telemetry, failures, errors, maint, machines) are recognised and "
        "mapped onto the contract.",
    )
    e.add_argument("--telemetry", required=True, type=Path, help="ts,device_id,node_id,metric,value (or PdM)")
    e.add_argument("--failures", required=True, type=Path, help="ts,device_id,node_id,failure_type (or PdM)")
    e.add_argument("--events", type=Path, action="append", default=None,
                   help="optional ts,device_id,event_type (or PdM errors/maint); repeatable")
    e.add_argument("--devices", type=Path, default=None, help="optional device_id,age_days (or PdM machines)")
    e.add_argument("--lead", default="30m", help="minimum warning time (default 30m)")
    e.add_argument("--horizon", default="24h", help="prediction horizon H (default 24h)")
    e.add_argument("--windows", default="3h,24h", help="feature windows (default 3h,24h)")
    e.add_argument("--test-fraction", type=float, default=0.3, help="late share held out (default 0.3)")
    e.add_argument("--test-devices", type=float, default=None,
                   help="also hold out this share of devices from training (time and device split)")
    e.add_argument("--split", choices=("time", "device"), default="time",
                   help="time (default): train on the early span, score the late one; device: hold out "
                   "--device-folds groups of devices in turn, train on the others, score the held-out ones over "
                   "the whole span, pooled (devices never seen)")
    e.add_argument("--device-folds", type=int, default=5, help="groups of devices of --split device (default 5)")
    rule = e.add_mutually_exclusive_group()  # one threshold rule: the other would be dropped silently
    rule.add_argument("--target-precision", type=float, default=0.8, help="alert threshold target (default 0.8)")
    rule.add_argument("--cost-ratio", type=float, default=None,
                      help="instead: threshold minimising ratio x missed failures + false alerts")
    e.add_argument("--threshold-folds", choices=("auto", "time", "device"), default="auto",
                   help="out-of-fold scores the alert threshold is set on: purged time blocks of the training "
                   "span (the same fleet, later), groups of devices (devices never seen), or auto (default): "
                   "time blocks for the devices trained on, device groups for devices new to the model (where "
                   "no device group scored a failure, new devices as the known ones)")
    e.add_argument("--final-model", choices=("folds", "refit"), default="folds",
                   help="what scores after the fit: the mean of the out-of-fold models whose scores set the "
                   "threshold (default) or the chosen setting refit on all training rows")
    e.add_argument("--lifetimes", type=Path, default=None,
                   help="device lifetimes (as for faults hazard; with --devices): also print how many failures "
                   "the fleet's age hazard expects over the scored span, beside those observed and alerted")
    e.add_argument("--out", type=Path, default=None, help="write the metrics CSV here")
    e.set_defaults(func=run_evaluate)
    s = sub.add_parser(
        "score", help="score the warehouse's latest telemetry into hardware-fault alerts",
        description="Runs the detect flow's fault step only: (re)trains the model when the registered "
        "one is over a day old, scores each device's latest telemetry, stores and delivers alerts.",
    )
    add_db_argument(s)
    s.add_argument("--lead", default="30m", help="minimum warning time (default 30m)")
    s.add_argument("--horizon", default="24h", help="prediction horizon (default 24h)")
    s.add_argument("--jsonl", default=None, help="append alerts to this JSONL file")
    s.add_argument("--json", action="store_true", help="the run's result as one JSON document instead of text")
    s.add_argument("--lifetimes", type=Path, default=None,
                   help="device lifetimes (as for faults hazard; with --devices): also print how many failures "
                   "the fleet's age hazard expects over the next --horizon, beside the alerts fired")
    s.add_argument("--devices", type=Path, default=None, help="device_id,age_days of the fleet (with --lifetimes)")
    s.set_defaults(func=run_score)
    __import__("pipelines.commands.hazard", fromlist=["register"]).register(sub)  # faults hazard (its own module)


def _policy(args: argparse.Namespace):  # -> FaultPolicy
    from anomaly.fault_features import FaultPolicy
    from pipelines.runtime.durations import parse_duration

    windows = tuple(str(parse_duration(w, "--windows")) for w in getattr(args, "windows", "3h,24h").split(",")
                    if w.strip())
    cost_ratio = getattr(args, "cost_ratio", None)
    target = getattr(args, "target_precision", 0.8)
    if cost_ratio is not None and not cost_ratio > 0:
        raise ValueError(f"--cost-ratio must be > 0 (a missed failure's cost over a false alert's), got {cost_ratio}")
    if cost_ratio is None and not 0 < target <= 1:
        raise ValueError(f"--target-precision must be in (0, 1], got {target}")
    return FaultPolicy(lead=str(parse_duration(args.lead, "--lead", zero=True)), horizon=str(parse_duration(args.horizon, "--horizon")),
                       windows=windows, target_precision=None if cost_ratio is not None else target,
                       cost_ratio=cost_ratio, threshold_folds=getattr(args, "threshold_folds", FaultPolicy.threshold_folds),
                       final_model=getattr(args, "final_model", FaultPolicy.final_model))


def run_evaluate(args: argparse.Namespace) -> int:
    if args.out is not None:  # before the work, not after it
        check_writable(args.out)
    from pipelines.commands.errors import check_fraction

    check_fraction(args.test_fraction, "--test-fraction", "the share of the time span scored")
    import numpy as np
    import pandas as pd

    from anomaly.evaluate import evaluate_faults, evaluate_faults_by_device
    from pipelines.commands.errors import CliError
    from pipelines.ingest import tables
    from pipelines.runtime.settings import Settings

    try:
        policy = _policy(args)
        telemetry = tables.read_telemetry(args.telemetry)
        failures = tables.read_failures(args.failures)
        events = (pd.concat([tables.read_events(p) for p in args.events], ignore_index=True)
                  if args.events else None)
        devices = tables.read_devices(args.devices) if args.devices else None
    except (tables.InputError, ValueError) as exc:
        raise CliError(str(exc), 2) from exc
    blind = failures[~failures["device_id"].isin(set(telemetry["device_id"]))]
    if not blind.empty:
        print(f"warning: {len(blind)} failure(s) of {blind['device_id'].nunique()} device(s) with no telemetry "
              f"in {args.telemetry} cannot be predicted and are left out (such as "
              f"{', '.join(sorted(blind['device_id'].unique())[:3])})", file=sys.stderr)
    hazard = _read_hazard(args, devices)
    held = None
    if args.test_devices is not None:
        ids = np.sort(telemetry["device_id"].unique())
        if not 0 < args.test_devices < 1:
            raise CliError(f"--test-devices is the share of devices held out, in (0, 1); got {args.test_devices:g}", 2)
        if len(ids) < 2:
            raise CliError(f"--test-devices needs two devices or more (one to train on, one held out); "
                           f"{args.telemetry} has {len(ids)}", 2)
        rng = np.random.default_rng(0)
        held = list(rng.choice(ids, size=min(len(ids) - 1, max(1, int(round(len(ids) * args.test_devices)))), replace=False))
    jobs = Settings.from_env().max_workers  # fold models fitted at once: the same models
    try:
        if args.split == "device":
            if args.test_devices is not None:
                raise ValueError("--test-devices is for --split time; --split device holds out every device in turn")
            if args.device_folds < 2:
                raise ValueError(f"--device-folds must be >= 2, got {args.device_folds}")
            n_devices = telemetry["device_id"].astype(str).nunique()
            if args.device_folds > n_devices:  # a group a device: as many folds as devices
                print(f"note: --device-folds {args.device_folds} is more than the {n_devices} device(s) in "
                      f"{args.telemetry}: {n_devices} fold(s), one device each", file=sys.stderr)
            metrics = evaluate_faults_by_device(telemetry, failures, policy, args.device_folds, events, devices,
                                                n_jobs=jobs)
        else:
            metrics = evaluate_faults(telemetry, failures, policy, args.test_fraction, events, devices, held, n_jobs=jobs)
    except ValueError as exc:
        raise CliError(str(exc), 2) from exc
    report_metrics(metrics, args.out)
    chosen = metrics.attrs.get("folds") or [{"devices": None, **metrics.attrs.get("settings", {})}]
    newer = metrics.attrs.get("new_device_settings")  # a time split's devices the training span lacks
    for f in chosen + ([{"devices": None, **newer}] if newer else []):
        whom = (f" of held-out {','.join(f['devices'])}" if f["devices"] else
                f" of {len(f['new_devices'])} device(s) new to the model ({', '.join(f['new_devices'][:3])})"
                if f.get("new_devices") else "")
        print(f"settings{whom}: {f.get('params')}, threshold {f.get('threshold', float('nan')):.4g} "
              f"({f.get('threshold_rule')}, inner {f.get('threshold_folds', 'time')} folds), chosen on the training "
              f"{'devices' if f['devices'] else 'span'} only", file=sys.stderr)
    chosen += [newer] if newer else []
    fallback = sum(f.get("threshold_rule") == "max_f1_fallback" for f in chosen)
    if fallback:
        print(f"note: target precision {policy.target_precision} not reached on out-of-fold scores "
              f"({fallback} of {len(chosen)} model(s)): alerting at the best-F1 threshold instead, as warnings",
              file=sys.stderr)
    quiet = sum(f.get("threshold_rule") == "no_skill" for f in chosen)
    if quiet:
        print(f"note: {quiet} of {len(chosen)} model(s) will not alert: on out-of-fold scores no threshold that "
              f"catches a failure is right more often than alerts at random times would be by luck", file=sys.stderr)
    censored = int(metrics.attrs.get("censored_alerts", 0))
    if censored:
        print(f"note: {censored} alert(s) in the last {args.horizon} no known failure confirms cannot be judged "
              f"(the device may fail after the data stop); they are left out of alerts and precision",
              file=sys.stderr)
    if hazard is not None:
        print(_hazard_line(hazard, devices, args, metrics), file=sys.stderr)
    if int(metrics["events"].iloc[0]) == 0:
        remedy = ("data with failures on more devices (each device is held out once)" if args.split == "device"
                  else "a larger --test-fraction")
        print("warning: no failure falls in the test span (of the held-out devices): recall and AUC are "
              f"undefined, and every alert judged counts as false; use {remedy}", file=sys.stderr)
    return 0


def _read_hazard(args: argparse.Namespace, devices):  # -> FleetHazard | None
    """The age hazard fit on --lifetimes (None without it); --lifetimes needs --devices."""
    if args.lifetimes is None:
        return None
    from anomaly.hazard import FleetHazard
    from pipelines.commands.errors import CliError
    from pipelines.ingest import tables
    from pipelines.ingest.lifetimes import read_lifetimes

    if devices is None:
        raise CliError("--lifetimes needs --devices (device ages) to say what the fleet should expect", 2)
    try:
        return FleetHazard().fit(read_lifetimes(args.lifetimes)[0])
    except (tables.InputError, ValueError) as exc:
        raise CliError(str(exc), 2) from exc


def _hazard_line(hazard, devices, args: argparse.Namespace, metrics) -> str:
    """What the age hazard expects of the devices and span the evaluation scored (ages from
    --devices, taken at the span's start), beside the failures observed and the alerts."""
    start, end = metrics.attrs["scored_span"]
    ages = devices.loc[devices["device_id"].isin(metrics.attrs["scored_devices"]), "age_days"]
    days = max((end - start).total_seconds() / 86400.0, 1e-9)
    return _expectation(hazard, ages, days, args, "scored device(s) of these ages", f"{days:.1f} days",
                        f"observed {int(metrics['events'].iloc[0])}, alerts {int(metrics['alerts'].iloc[0])}")


def _expectation(hazard, ages, days: float, args: argparse.Namespace, who: str, span: str, beside: str) -> str:
    """One line: the failures the hazard expects of devices aged ``ages`` over ``days``, with
    its interval, and ``beside`` it what the run saw."""
    ages = ages.dropna().to_numpy()
    if ages.size == 0:
        return f"note: --lifetimes: none of these devices has an age in {args.devices}: no hazard figure"
    f = hazard.expected_failures(ages, days)
    return (f"fleet hazard ({args.lifetimes}): the {ages.size} {who} expect {f.expected:.3g} [{f.lo}, {f.hi}] "
            f"failure(s) in {span} ({f.level:.0%} interval); {beside}")


def run_score(args: argparse.Namespace) -> int:
    from pipelines.commands.errors import CliError
    from pipelines.detect.jobs import configured_sinks
    from pipelines.flows.detect import detect_flow
    from pipelines.ingest import tables
    from pipelines.runtime.settings import Settings

    settings = Settings.from_env(db_path=args.db)
    if not settings.db_path.exists():
        raise CliError(f"{settings.db_path}: no warehouse (run headroom ingest first)", 2)
    try:
        configured_sinks(args.jsonl, probe=True)
        policy = _policy(args)  # bad durations fail here, with the option named, not inside the flow
        devices = tables.read_devices(args.devices) if args.devices else None
    except (tables.InputError, ValueError) as exc:
        raise CliError(str(exc), 2) from exc
    if devices is not None and args.lifetimes is None:
        raise CliError("--devices of faults score only serves --lifetimes (the model reads no ages)", 2)
    hazard = _read_hazard(args, devices)  # before the run: a bad file changes nothing
    out = detect_flow(db_path=str(settings.db_path), jsonl_path=args.jsonl, detectors=["faults"],
                      fault_lead=policy.lead, fault_horizon=policy.horizon)
    from pipelines.commands.summaries import print_result

    print_result(out, args.json, "detect")
    if hazard is not None:
        print(_expected_line(hazard, devices, args, policy, out.get("faults", {})), file=sys.stderr)
    from pipelines.commands.detect import failures_said

    return failures_said(out)  # a sink down is exit 1, as for detect (it was 0 here)


def _expected_line(hazard, devices, args: argparse.Namespace, policy, faults: dict) -> str:
    """What the age hazard expects of the --devices fleet over the next horizon, beside the
    alerts this run fired: a check that the model's alert count is in proportion."""
    import pandas as pd

    days = pd.Timedelta(policy.horizon).total_seconds() / 86400.0
    return _expectation(hazard, devices["age_days"], days, args, f"device(s) of {args.devices}",
                        f"the next {args.horizon}", f"this run fired {int(faults.get('fired', 0))} fault alert(s)")
