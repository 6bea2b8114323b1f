"""``headroom run``: the whole pipeline once on the embedded default (DuckDB file,
ephemeral Prefect API). With no ``--input`` it first generates a synthetic fleet."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from pipelines.commands.ingest import add_db_argument


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="generate (if no input), ingest, train, detect, plan and report, once")
    p.add_argument("--input", default=None, help="folder of files named for their kind (<kind>.csv, .csv.gz, .parquet "
                   "or .json) and raw exports recognised by content: GWA-T-12 folders, AWS and Prometheus JSON "
                   "(default: generate a fleet)")
    p.add_argument("--nodes", type=int, default=None, help="generated fleet size (default 12; not with --input)")
    p.add_argument("--days", type=int, default=None, help="generated days of history (default 28; not with --input)")
    p.add_argument("--seed", type=int, default=None, help="generated fleet's seed (default 0; not with --input)")
    p.add_argument("--stages", default=None, help="comma list of stages after ingest (default: all available)")
    p.add_argument("--strict", action="store_true",
                   help="a file with any bad row: write nothing of it and stop the run, exit 1")
    add_db_argument(p)
    p.set_defaults(func=run_all)


def _stage_printer():
    """A stage listener that prints each stage's lines (and each ingested file's) as it finishes."""
    from pipelines.commands.summaries import ingest_file_lines, seconds_text, stage_lines

    started_ingest = []

    def on_stage(stage: str, result: object, seconds: float) -> None:
        if stage == "ingest-file":
            if not started_ingest:
                print("\ningest:")
                started_ingest.append(True)
            first, *rest = ingest_file_lines(result)
            lines = [f"{first} {seconds_text(seconds)}", *rest]
        else:
            lines = ["", *stage_lines(stage, result, seconds)]
        print("\n".join(lines), flush=True)

    return on_stage


FLEET_DEFAULTS = {"nodes": 12, "days": 28, "seed": 0}  # the generated fleet without --input


def ingested_files(db: Path) -> dict[str, str]:
    """The files the warehouse ``db`` ingested, path -> sha256 of the newest batch of each
    (none: no warehouse yet)."""
    from pipelines.store import warehouse

    if not Path(db).is_file() or Path(db).stat().st_size == 0:
        return {}
    with warehouse.connect(db, read_only=True) as con:
        if not warehouse.has_table(con, "ingest_batches"):
            return {}
        rows = con.execute("SELECT path, arg_max(sha256, finished_at) FROM ingest_batches GROUP BY path "
                           "ORDER BY path").fetchall()
    return {path: sha for path, sha in rows}


def foreign_input(db: Path, folder: Path) -> str | None:
    """A file the warehouse ``db`` ingested from outside ``folder`` (the generated fleet's),
    else None (no warehouse yet, or only the generated fleet in it)."""
    home = Path(folder).resolve()
    return next((p for p in ingested_files(db) if Path(p).resolve().parent != home), None)


def _manifest(folder: Path) -> dict | None:
    """The generator's manifest in ``folder``, else None."""
    import json

    try:
        found = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) and found.get("generator") == "headroom synthetic fleet" else None


def _sha256(path: Path) -> str | None:
    import hashlib

    try:
        with open(path, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()
    except OSError:
        return None


def check_no_mix(db: Path, folder: Path, fleet: dict | None) -> None:
    """Refuse to load ``folder`` (a fleet generated with ``fleet``'s settings, or given files:
    None) into a warehouse that holds another generated fleet: the two would mix, the made-up
    catalog, failures and spot prices feeding the other's pools. A generated fleet is known by
    its folder's manifest, trusted only while the folder holds the very files ingested."""
    from pipelines.commands.errors import CliError

    files = ingested_files(db)
    home = Path(folder).resolve()
    for where in dict.fromkeys(Path(p).resolve().parent for p in files):
        manifest = _manifest(where)
        if manifest is None:
            continue
        if fleet is None and where != home:
            raise CliError(f"{db} holds the generated fleet ingested from {where}; loading {folder} into it would "
                           "mix your files with made-up ones (its catalog, failures and spot prices): give --db a new "
                           "warehouse file", 2)
        if fleet is None or where != home:
            continue
        changed = [p for p, sha in files.items() if Path(p).resolve().parent == where and _sha256(Path(p)) != sha]
        if changed:
            raise CliError(f"{db} holds a generated fleet whose files in {where} have changed since it was ingested "
                           f"(such as {Path(changed[0]).name}): which fleet it holds cannot be told, and another "
                           "would mix with it: give --db a new warehouse file", 2)
        from pipelines.synth.config import FleetConfig

        had = {k: manifest.get(k) for k in ("nodes", "days", "seed")} | {"start": str(manifest.get("start", ""))[:10]}
        want = {**fleet, "start": FleetConfig.start}
        if had != want:
            raise CliError(f"{db} holds a generated fleet of {', '.join(f'{k}={v}' for k, v in had.items())}; one "
                           f"of {', '.join(f'{k}={v}' for k, v in want.items())} would mix with it: give the same "
                           "--nodes, --days and --seed, or --db a new warehouse file", 2)
    if fleet is None and _manifest(home) is not None and any(Path(p).resolve().parent != home for p in files):
        raise CliError(f"{folder} is a generated fleet and {db} holds other data: loading it there would mix "
                       "made-up pools, prices and failures into it: give --db a new warehouse file", 2)


def check_outputs(stages: list[str] | None) -> None:
    """The report folder and the alert sinks the chosen stages write to, checked before any
    work (as report, detect and serve check theirs), not after the ingest and the models."""
    from pipelines.commands.errors import CliError
    from pipelines.detect.jobs import SINK_SETTINGS, configured_sinks
    from pipelines.report.data import check_out_dir
    from pipelines.runtime.settings import Settings

    settings = Settings.from_env()
    if stages is None or "report" in stages:
        try:
            check_out_dir(settings.report_dir)
        except OSError as exc:
            raise CliError(f"HEADROOM_REPORT_DIR: {exc}", getattr(exc, "code", 2)) from exc
    if stages is None or "detect" in stages:
        try:
            configured_sinks(probe=True)
        except ValueError as exc:
            raise CliError(f"{SINK_SETTINGS}: {exc}", 2) from exc


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
    if stages is not None and (not stages or ("none" in stages and len(set(stages)) > 1)):
        raise CliError(f"--stages {args.stages!r}: name stages ({', '.join(STAGES)}), or none alone to stop "
                       "after ingest", 2)
    if stages is not None:  # in the pipeline's order, whatever order they were named in
        stages = [s for s in STAGES if s in stages] or ["none"]
    # the demo delivers alerts somewhere a newcomer can look, unless a sink is configured
    if not os.environ.get("HEADROOM_ALERT_JSONL", "").strip():  # blank is unset, as for every setting
        os.environ["HEADROOM_ALERT_JSONL"] = str(settings.report_dir / "alerts.jsonl")
    check_outputs(stages)
    fleet = {"nodes": args.nodes, "days": args.days, "seed": args.seed}  # None: not given
    if args.input:
        folder = Path(args.input)
        if not folder.is_dir():
            raise CliError(f"--input {folder} is not a folder", 2)
        given = [f"--{k}" for k, v in fleet.items() if v is not None]
        if given:
            raise CliError(f"{', '.join(given)} shape a generated fleet; with --input the files are the fleet", 2)
        check_no_mix(settings.db_path, folder, None)
    else:
        from pipelines.commands.generate import check_fleet_args, write_fleet_or_fail

        fleet = {k: FLEET_DEFAULTS[k] if v is None else v for k, v in fleet.items()}
        check_fleet_args(**fleet, can_drop_telemetry=False, run=True)  # run has no --no-telemetry
        folder = settings.data_dir
        foreign = foreign_input(settings.db_path, folder)
        if foreign is not None:  # a made-up fleet upserted into a real warehouse moves its cutoff to 2026
            raise CliError(f"{settings.db_path} holds data ingested from {foreign}; without --input, run generates "
                           f"a synthetic fleet and would load it into that warehouse: give --input FOLDER, or run "
                           "train, plan, detect and report on it as it is", 2)
        check_no_mix(settings.db_path, folder, fleet)
        print(f"generating a synthetic fleet in {folder} (nodes={fleet['nodes']}, days={fleet['days']}, "
              f"seed={fleet['seed']})")
        write_fleet_or_fail(folder, "HEADROOM_DATA_DIR", **fleet)
    if not inputs_in(folder, warn=False):  # the flow's own look names what it leaves out
        raise CliError(f"no input files (utilization.csv, telemetry.csv, ...) in {folder}", 2)
    print(f"running the pipeline into {settings.db_path}")
    if not os.environ.get("PREFECT_API_URL"):
        print("starting Prefect's ephemeral API (no PREFECT_API_URL set), about 15 s", flush=True)
    from pipelines.ingest.adapters import IngestFileError
    from pipelines.ingest.loading import StrictModeError
    from pipelines.runtime.progress import stage_listener

    try:
        with stage_listener(_stage_printer()):
            out = run_flow(str(settings.db_path), str(folder), stages=stages, strict=args.strict)
    except IngestFileError as exc:  # as headroom ingest says it: the file and the problem, exit 2
        raise CliError(f"{exc} (nothing of it was written; the later files and stages did not run)", exc.code) from exc
    except StrictModeError as exc:
        raise CliError(f"{exc} (the later files and stages did not run)", 1) from exc
    print(f"\nwarehouse: {settings.db_path}  (tables forecasts, models, backtests, alerts, rejects, ...)")
    failed = [stage for stage, r in out.items() if isinstance(r, dict) and "failed" in r]
    if "detect" in out and "detect" not in failed:
        print(f"alerts:    {os.environ['HEADROOM_ALERT_JSONL'].strip()}")
    if failed:
        raise CliError(f"stage(s) {', '.join(failed)} failed (see above); the other stages ran", 1)
    # as `headroom detect` exits: a skipped detector or a failed sink is down, and a scheduler must see it
    from pipelines.flows.detect import what_is_down

    down = what_is_down(out["detect"]) if isinstance(out.get("detect"), dict) else []
    if down:
        raise CliError(f"{'; '.join(down)} (see above; a sink's alerts stay pending for the next run); the other "
                       "stages ran", 1)
    return 0
