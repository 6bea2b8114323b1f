"""``headroom serve``: serve the scheduled deployments (ingest hourly, train daily,
detect every 15 minutes, plan, report and prune daily) until interrupted."""
from __future__ import annotations

import argparse
import contextlib
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pipelines.commands.ingest import add_db_argument

CONSOLE_LEVEL = "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL"  # a key of Prefect's logging.yml, from the environment


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the scheduled Prefect deployments until interrupted")
    p.add_argument("--input", default=None, help="folder watched by the hourly ingest (new files are ingested; "
                   "seen ones skipped; default: HEADROOM_INPUT_DIR)")
    p.add_argument("--list", action="store_true", help="print the deployments and their schedules, then exit")
    add_db_argument(p)
    p.set_defaults(func=run_serve)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run_serve(args: argparse.Namespace) -> int:
    from prefect import serve

    from pipelines.commands.errors import CliError
    from pipelines.commands.plan import require_plan_config
    from pipelines.detect.jobs import SINK_SETTINGS, configured_sinks
    from pipelines.flows.deployments import SCHEDULES, build_deployments, deployment_name
    from pipelines.runtime.settings import Settings
    from pipelines.store.warehouse import WarehouseLockedError, check_is_warehouse, open_warehouse

    settings = Settings.from_env(db_path=args.db, input_dir=args.input)
    require_plan_config(settings.plan_config)  # the plan stage's policy: a bad one stops here
    input_dir = str(settings.input_dir) if settings.input_dir else None
    if input_dir and not Path(input_dir).is_dir():
        raise CliError(f"--input (HEADROOM_INPUT_DIR) {input_dir} is not a folder", 2)
    # what every scheduled run needs, checked once here rather than failing every run
    check_is_warehouse(Path(settings.db_path), allow_empty=False)
    if Path(settings.db_path).is_file():  # another program's DuckDB file: its tables, not only its bytes
        # a writer holds it (a run, an ingest: ours, most likely): not waited for, not refused
        with contextlib.suppress(WarehouseLockedError), open_warehouse(settings.db_path, read_only=True,
                                                                        lock_timeout_s=0):
            pass
    try:
        configured_sinks(probe=True)
    except ValueError as exc:
        raise CliError(f"{SINK_SETTINGS}: {exc}", 2) from exc
    deployments = build_deployments(str(settings.db_path), input_dir, settings.schedule_timezone)
    if not deployments:
        raise CliError("nothing to serve: pass --input for the ingest deployment", 2)
    crons = {deployment_name(s, str(settings.db_path)): s for s in SCHEDULES}
    for d in deployments:
        s = crons[d.name]
        # flow/deployment: what `prefect deployment run` takes
        print(f"{d.flow_name + '/' + d.name:<52} {s.cron:<14} {s.zone(settings.schedule_timezone)}")
    if args.list:
        return 0
    if not input_dir and not Path(settings.db_path).exists():  # no scheduled run would ever create it
        raise CliError(f"{settings.db_path}: no warehouse, and no --input (HEADROOM_INPUT_DIR) for the hourly "
                       "ingest to fill one: run headroom ingest or headroom run first, or give --input", 2)
    # a closed terminal (SIGHUP) stops serve as Ctrl-C does, so the local server stops with it
    signal.signal(signal.SIGHUP, _interrupt)
    from prefect.settings import PREFECT_API_URL, temporary_settings

    if PREFECT_API_URL.value():
        with _runs_log_to_api(args.verbose):
            _announce(PREFECT_API_URL.value(), len(deployments), settings)
            serve(*deployments, print_starting_message=False)
        return 0
    # the ephemeral API has no scheduler: served deployments would never run
    from pipelines.runtime.prefect_server import local_server

    print("no PREFECT_API_URL: starting a local Prefect server with its scheduler (stopped on exit)")
    with local_server() as url, temporary_settings(updates={PREFECT_API_URL: url}), _runs_log_to_api(args.verbose):
        os.environ["PREFECT_API_URL"] = url  # for the flow-run processes the runner starts
        try:
            _announce(url, len(deployments), settings)
            serve(*deployments, print_starting_message=False)
        finally:
            os.environ.pop("PREFECT_API_URL", None)
    return 0


def _announce(api_url: str, count: int, settings: object) -> None:
    """Where to look: Prefect's own banner links ``<UI>/deployments`` whether or not a UI
    answers there (a server started with ``--no-ui`` says 404), so this says only what answers."""
    from pipelines.runtime.prefect_server import answering_ui_url

    print(f"serving {count} deployments against the Prefect API at {api_url}; "
          "run one now with: prefect deployment run '<flow>/<deployment>' (as listed above)")
    keep, data = settings.keep_days, settings.keep_data_days
    if keep is not None or data is not None:  # what prune-daily deletes, said before it first does
        kept = ", ".join(f"{what} past {days} days" for what, days in (("history", keep), ("readings", data))
                         if days is not None)
        print(f"prune-daily deletes {kept} (HEADROOM_KEEP_DAYS, HEADROOM_KEEP_DATA_DAYS; 'all' keeps them)")
    ui = answering_ui_url()
    if ui:
        print(f"Prefect UI: {ui}/deployments")


@contextmanager
def _runs_log_to_api(verbose: int) -> Iterator[None]:
    """Served runs send INFO to the flow run's logs in the API, headroom's lines among them
    (:mod:`pipelines.runtime.run_logs`); without ``-v`` their console still shows warnings
    only, as every command's does. The runner passes these settings to each run's process."""
    from prefect.settings import PREFECT_LOGGING_EXTRA_LOGGERS, PREFECT_LOGGING_LEVEL, temporary_settings

    from pipelines.runtime.run_logs import EXTRA_LOGGERS

    updates = {PREFECT_LOGGING_EXTRA_LOGGERS: PREFECT_LOGGING_EXTRA_LOGGERS.value() or EXTRA_LOGGERS}
    quiet = not verbose and os.environ.get("PREFECT_LOGGING_LEVEL") == "WARNING"  # the CLI's quiet default
    if quiet:
        updates[PREFECT_LOGGING_LEVEL] = "INFO"
        os.environ.setdefault(CONSOLE_LEVEL, "WARNING")  # Prefect's console handler, in the runs' processes
    with temporary_settings(updates=updates):
        yield
