"""``headroom serve``: serve the scheduled deployments (ingest hourly, train daily,
detect every 15 minutes, plan daily) until interrupted."""
from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path

from pipelines.commands.ingest import add_db_argument


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the scheduled Prefect deployments until interrupted")
    p.add_argument("--input", default=None, help="folder watched by the hourly ingest (new files are ingested; seen ones skipped)")
    p.add_argument("--list", action="store_true", help="print the deployments and their schedules, then exit")
    add_db_argument(p)
    p.set_defaults(func=run_serve)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run_serve(args: argparse.Namespace) -> int:
    from prefect import serve

    from pipelines.commands.errors import CliError
    from pipelines.commands.plan import require_plan_config
    from pipelines.detect.jobs import configured_sinks
    from pipelines.flows.deployments import SCHEDULES, build_deployments, deployment_name
    from pipelines.runtime.settings import Settings
    from pipelines.store.warehouse import check_is_warehouse

    settings = Settings.from_env(db_path=args.db)
    require_plan_config(settings.plan_config)  # the plan stage's policy: a bad one stops here
    if args.input and not Path(args.input).is_dir():
        raise CliError(f"--input {args.input} is not a folder", 2)
    # what every scheduled run needs, checked once here rather than failing every run
    check_is_warehouse(Path(settings.db_path))
    try:
        configured_sinks()
    except ValueError as exc:
        raise CliError(f"alert sink setting (HEADROOM_ALERT_JSONL, HEADROOM_ALERT_WEBHOOK or "
                       f"HEADROOM_ALERTMANAGER_URL): {exc}", 2) from exc
    deployments = build_deployments(str(settings.db_path), args.input)
    if not deployments:
        raise CliError("nothing to serve: pass --input for the ingest deployment", 2)
    crons = {deployment_name(s, str(settings.db_path)): s.cron for s in SCHEDULES}
    for d in deployments:
        print(f"{d.name:<36} {crons.get(d.name, ''):<14}")
    if args.list:
        return 0
    # a closed terminal (SIGHUP) stops serve as Ctrl-C does, so the local server stops with it
    signal.signal(signal.SIGHUP, _interrupt)
    from prefect.settings import PREFECT_API_URL, temporary_settings

    if PREFECT_API_URL.value():
        serve(*deployments)
        return 0
    # the ephemeral API has no scheduler: served deployments would never run
    from pipelines.runtime.prefect_server import local_server

    print("no PREFECT_API_URL: starting a local Prefect server with its scheduler (stopped on exit)")
    with local_server() as url, temporary_settings(updates={PREFECT_API_URL: url}):
        os.environ["PREFECT_API_URL"] = url  # for the flow-run processes the runner starts
        try:
            print(f"Prefect API at {url}")
            serve(*deployments)
        finally:
            os.environ.pop("PREFECT_API_URL", None)
    return 0
