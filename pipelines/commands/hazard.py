"""``headroom faults hazard``: the fleet failure hazard by device age, and the failures to expect."""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from pipelines.commands.summaries import json_text
from pipelines.runtime.outputs import check_writable


def register(faults_subparsers: argparse._SubParsersAction) -> None:
    h = faults_subparsers.add_parser(
        "hazard", help="fleet failure hazard by device age; failures to expect over a horizon",
        description="Fits the failure hazard by device age (time in service) from lifetimes, with "
        "right censoring and left truncation: an annualised failure rate per age band (events over "
        "device-years) and a Weibull fit, per failure type and for any failure. Then the failures "
        "to expect over --horizon for --fleet (device_id,age_days), or without it for the devices "
        "still in service when the lifetimes end, with a Poisson-binomial interval.",
    )
    h.add_argument("--lifetimes", required=True, type=Path,
                   help="device_id,install,remove,failed[,failure_type] (or Titan gc_full.csv)")
    h.add_argument("--fleet", type=Path, default=None, help="optional device_id,age_days to forecast for")
    h.add_argument("--horizon", default="30D", help="forecast horizon (default 30D)")
    h.add_argument("--model", choices=("piecewise", "weibull"), default="piecewise",
                   help="hazard the forecast uses (default piecewise: the age-band rates)")
    h.add_argument("--level", type=float, default=0.9, help="interval level (default 0.9)")
    h.add_argument("--json", action="store_true", help="the result as one JSON document instead of text")
    h.add_argument("--out", type=Path, default=None, help="write the age-band table (CSV) here")
    h.set_defaults(func=run_hazard)


def run_hazard(args: argparse.Namespace) -> int:
    from pipelines.commands.errors import CliError

    if args.out is not None:
        check_writable(args.out)
    if not 0 < args.level < 1:
        raise CliError(f"--level must be between 0 and 1, got {args.level}", 2)
    from anomaly.hazard import FleetHazard, HazardPolicy, in_service
    from pipelines.ingest import tables
    from pipelines.ingest.lifetimes import read_lifetimes
    from pipelines.runtime.durations import parse_duration

    try:
        horizon = parse_duration(args.horizon, "--horizon")
        if horizon.total_seconds() < 1:  # counted in days: 500ns is 0 of them
            raise ValueError(f"--horizon: {args.horizon!r} is under a second")
        lives, rejects = read_lifetimes(args.lifetimes)
        if args.fleet is not None:
            fleet = tables.read_devices(args.fleet)
            bad = ~(fleet["age_days"] >= 0)
            if bad.any():
                i = int(bad.to_numpy().nonzero()[0][0])
                raise tables.InputError(f"{args.fleet}: {tables.row_label(args.fleet, i)}, column 'age_days': "
                                        f"missing or negative age ({int(bad.sum())} such value(s))")
            whose = f"the {len(fleet):,} devices of {args.fleet}"
        else:
            end = lives["remove"].max()
            fleet = in_service(lives, end)
            whose = f"the {len(fleet):,} devices in service at {end}"
        model = FleetHazard(HazardPolicy(level=args.level)).fit(lives)
    except (tables.InputError, ValueError) as exc:
        raise CliError(str(exc), 2) from exc
    days = horizon.total_seconds() / 86400.0
    forecasts = [model.expected_failures(fleet["age_days"].to_numpy(), days, mode, args.model)
                 for mode in model.modes_]
    # a mode with failures at fewer than two ages has no Weibull fit: the model forecasts it with
    # its piecewise hazard (FleetHazard.model_for), said here
    unfit = [f.mode for f in forecasts if f.model != args.model]
    if unfit:
        print(f"note: no Weibull fit for {', '.join(unfit)} (it needs failures at two ages or more); "
              "the piecewise hazard forecasts there", file=sys.stderr)
    if args.out is not None:
        from pipelines.runtime.outputs import write_atomic

        write_atomic(args.out, lambda tmp: model.bands_.to_csv(tmp, index=False))
    doc = {
        "lifetimes": str(args.lifetimes), "lives": model.lives_, "devices": model.devices_,
        "rejected": int(len(rejects)), "reject_reasons": rejects["reason"].value_counts().to_dict(),
        "weibull": model.weibull_.to_dict("records"),  # NaN as null by json_text
        "bands": model.bands_.to_dict("records"),
        "forecast": {"fleet": whose, "horizon": args.horizon, "model": args.model, "level": args.level,
                     "by_mode": [vars(f) for f in forecasts]},
    }
    if args.json:
        print(json_text(doc, indent=2))
        return 0
    print(f"{args.lifetimes}: {model.lives_:,} lives of {model.devices_:,} devices, "
          f"{int(model.weibull_['events'].iloc[0]):,} failures; {len(rejects):,} row(s) rejected")
    for reason, n in doc["reject_reasons"].items():
        print(f"  {n:,} {reason}")
    print("\nWeibull hazard by age (shape > 1: wear-out)")
    print(f"  {'mode':<8} {'shape':>6} {'95% interval':>14} {'scale_years':>12} {'events':>7}")
    for r in model.weibull_.itertuples():
        print(f"  {r.mode:<8} {r.shape:>6.2f} {f'{r.shape_lo:.2f}-{r.shape_hi:.2f}':>14} "
              f"{r.scale_days / 365.25:>12.1f} {r.events:>7,}")
    # afr_raw is events / device-years and the interval is its own; afr adds up to 100 device-years at
    # the band below's rate (a band barely reached does not read as 0), so it may lie outside it
    print(f"\nannualised failure rate by age band (afr_raw = events / device-years, its {args.level:.0%} interval; "
          "afr shrunk towards the band below)")
    print(f"  {'mode':<8} {'age_years':<10} {'events':>7} {'dev_years':>10} {'afr_raw':>8} {'interval':>17} "
          f"{'afr':>7} {'weibull':>8}")
    for r in model.bands_.itertuples():
        band = f"{r.age_lo_days / 365.25:.2g}-" + ("" if math.isinf(r.age_hi_days) else f"{r.age_hi_days / 365.25:.2g}")
        afr = "-" if math.isnan(r.afr) else f"{r.afr:.2%}"
        raw = "-" if math.isnan(r.afr_raw) else f"{r.afr_raw:.2%}"
        ci = "-" if math.isnan(r.afr_lo) or math.isnan(r.afr_hi) else f"{r.afr_lo:.2%}-{r.afr_hi:.2%}"
        print(f"  {r.mode:<8} {band:<10} {r.events:>7,} {r.device_years:>10,.0f} {raw:>8} {ci:>17} {afr:>7} "
              f"{r.weibull_afr:>8.2%}")
    print(f"\nexpected failures in the next {args.horizon} for {whose} ({args.model} hazard, "
          f"{args.level:.0%} interval)")
    for f in forecasts:
        print(f"  {f.mode:<8} {f.expected:>9.1f}   [{f.lo}, {f.hi}]" + ("   (piecewise)" if f.mode in unfit else ""))
    return 0
