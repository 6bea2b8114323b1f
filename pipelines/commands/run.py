"""``headroom run``: the whole pipeline once on the embedded default (DuckDB file,
ephemeral Prefect API). With no ``--input`` it first generates a synthetic fleet."""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from pipelines.commands.ingest import add_db_argument


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="generate (if no input), ingest, train, detect, plan and report, once")
    p.add_argument("--input", default=None, help="folder of files named for their kind (<kind>.csv, .csv.gz, .parquet "
                   "or .json) and raw exports recognised by content: GWA-T-12 folders, AWS and Prometheus JSON "
                   "(default: generate a fleet)")
    p.add_argument("--nodes", type=int, default=12, help="generated fleet size")
    p.add_argument("--days", type=int, default=28, help="generated days of history")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stages", default=None, help="comma list of stages after ingest (default: all available)")
    p.add_argument("--strict", action="store_true")
    add_db_argument(p)
    p.set_defaults(func=run_all)


def _print_summary(out: dict) -> None:
    from pipelines.ingest.loading import counts_text

    failed = {stage: r["failed"] for stage, r in out.items() if isinstance(r, dict) and "failed" in r}
    out = {stage: r for stage, r in out.items() if stage not in failed}

    ing = out["ingest"]
    for r in ing["files"]:
        if r["status"] == "skipped":
            print(f"  {r['path']}: skipped (already ingested)")
        else:
            print(f"  {r['path']}: {counts_text(r['rows_read'], r['rows_loaded'], r['rows_rejected'])}")
    print("\nwarehouse after ingest:")
    for table, n in ing["summary"]["rows"].items():
        print(f"  {table:<18} {n:>10,} rows")
    print("\ntime span per kind:")
    for table, (lo, hi) in ing["summary"]["spans"].items():
        print(f"  {table:<18} {lo or '-'} .. {hi or '-'}")
    if "train" in out:
        t = out["train"]
        print(f"\ntrain: {t.get('series', '?')} series, data cutoff {t.get('data_cutoff')}, run {t.get('run_id')}")
        print(f"  {'group':<10} {'champion':<16} {'WAPE':>7}   all models (backtest WAPE)")
        for group, g in t.get("groups", {}).items():
            scores = ", ".join(f"{m} {w:.3f}" for m, w in g.get("scores", {}).items())
            print(f"  {group:<10} {g['champion']:<16} {g['wape']:>7.3f}   {scores}")
    if "detect" in out:
        d = out["detect"]
        for kind in ("bursts", "faults", "spikes"):
            if kind in d:
                print(f"\ndetect {kind}: " + ", ".join(f"{k} {v}" for k, v in d[kind].items()))
        sent = ", ".join(f"{n} to {sink}" for sink, n in (d.get("delivered") or {}).items()) or "no sink"
        print(f"alerts firing {d.get('firing')}, delivered {sent}, pending {d.get('pending_deliveries')}")
        for sink, n in (d.get("pending_unconfigured") or {}).items():
            print(f"  {n} deliveries wait for {sink}, not configured in this run (sent if it is again)")
    if "plan" in out:
        from pipelines.plan.planning import current_text, saving_text, spot_text
        from pipelines.runtime.money import money

        p = out["plan"]
        print(f"\nplan {p['run_id']}: " + ", ".join(f"{k} {v}" for k, v in p["rows"].items()))
        for h in p.get("headline", []):
            print(f"  {h['unique_id']:<20} recommended: {h['text']}")
        for a in p["allocation"]:
            gain = ("default split kept (no other saves enough)" if a["kept_default"]
                    else saving_text(a["savings_vs_default"]))
            print(f"  {a['unique_id']:<20} split private/public/edge {a['private']:.2f}/{a['public']:.2f}/"
                  f"{a['edge']:.2f}: {money(a['monthly_cost']):>12}/month, {gain}{current_text(a)}")
        for sp in p.get("spot", []):
            print(f"  {sp['unique_id']:<20} {spot_text(sp)}")
    if "replay" in out and "replays" in out["replay"]:
        print("\nreplay of the last days (cost / oracle, steps under-provisioned):")
        for r in out["replay"]["replays"]:
            print(f"  {r['unique_id']:<20} planned {r['planned_cost_vs_oracle']:.2f}x "
                  f"{r['planned_underprovisioned_pct']:.2f}%, reactive_80 {r['reactive_80_cost_vs_oracle']:.2f}x "
                  f"{r['reactive_80_underprovisioned_pct']:.2f}%" + ("" if r["beyond_frontier"] else
                                                                  " (a reactive autoscaler does as well)"))
    if "report" in out:
        print(f"\nreport: {out['report']['html']} (+ {len(out['report']['files'])} recommendation exports)")
    for stage, result in out.items():
        if stage not in ("ingest", "train", "detect", "plan", "replay", "report"):
            print(f"\n{stage}:")
            print("  " + json.dumps(result, indent=2, default=str).replace("\n", "\n  "))
    for stage, message in failed.items():
        print(f"\n{stage}: FAILED: {message}")


def run_all(args: argparse.Namespace) -> int:
    from pipelines.commands.errors import CliError
    from pipelines.commands.plan import require_plan_config
    from pipelines.flows.run import STAGES, run_flow
    from pipelines.ingest.loading import inputs_in
    from pipelines.runtime.settings import Settings

    settings = Settings.from_env(db_path=args.db)
    require_plan_config(settings.plan_config)  # the plan stage's policy: a bad one stops here
    stages = [s.strip() for s in args.stages.split(",") if s.strip()] if args.stages is not None else None
    unknown = sorted(set(stages or []) - set(STAGES) - {"none"})
    if unknown:
        raise CliError(f"unknown stage(s) {unknown}; choose from {', '.join(STAGES)} (or none)", 2)
    if args.input:
        folder = Path(args.input)
        if not folder.is_dir():
            raise CliError(f"--input {folder} is not a folder", 2)
    else:
        from pipelines.commands.generate import check_fleet_args
        from pipelines.synth.files import write_fleet

        check_fleet_args(args.nodes, args.days, args.seed, can_drop_telemetry=False)  # run has no --no-telemetry
        folder = settings.data_dir
        print(f"generating a synthetic fleet in {folder} (nodes={args.nodes}, days={args.days}, seed={args.seed})")
        write_fleet(folder, nodes=args.nodes, days=args.days, seed=args.seed)
    if not inputs_in(folder):
        raise CliError(f"no input files (utilization.csv, telemetry.csv, ...) in {folder}", 2)
    # the demo delivers alerts somewhere a newcomer can look, unless a sink is configured
    os.environ.setdefault("HEADROOM_ALERT_JSONL", str(settings.report_dir / "alerts.jsonl"))
    print(f"running the pipeline into {settings.db_path}")
    from pipelines.ingest.adapters import IngestFileError
    from pipelines.ingest.loading import StrictModeError

    try:
        out = run_flow(str(settings.db_path), str(folder), stages=stages, strict=args.strict)
    except IngestFileError as exc:  # as headroom ingest says it: the file and the problem, exit 2
        raise CliError(f"{exc} (nothing of it was written; the later files and stages did not run)", 2) from exc
    except StrictModeError as exc:
        raise CliError(f"{exc} (the later files and stages did not run)", 1) from exc
    _print_summary(out)
    print(f"\nwarehouse: {settings.db_path}  (tables forecasts, models, backtests, alerts, rejects, ...)")
    failed = [stage for stage, r in out.items() if isinstance(r, dict) and "failed" in r]
    if "detect" in out and "detect" not in failed:
        print(f"alerts:    {os.environ['HEADROOM_ALERT_JSONL']}")
    if failed:
        raise CliError(f"stage(s) {', '.join(failed)} failed (see above); the other stages ran", 1)
    return 0
