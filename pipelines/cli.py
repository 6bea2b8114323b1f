"""The ``headroom`` command line. Each subcommand lives in ``pipelines/commands/<name>.py``
and exposes ``register(subparsers)``; this module only assembles them and runs one."""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import re
import sys

from pipelines.commands.errors import CliError

# Prefect phones home unless told not to; the embedded default never needs a network.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
# Prefect waits 20 s for its ephemeral API: too short on 2 busy cores (it can take 30 s and more)
EPHEMERAL_WAIT_S = "120"
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", EPHEMERAL_WAIT_S)
# Prefect's per-task INFO lines drown the summary; -v brings them back.
if not any(a.startswith("-v") or a == "--verbose" for a in sys.argv[1:]):
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")

COMMAND_MODULES = (
    "generate",
    "ingest",
    "convert",
    "run",
    "train",
    "backtest",
    "detect",
    "bursts",
    "faults",
    "spikes",
    "plan",
    "report",
    "serve",
    "status",
    "prune",
)


def _version() -> str:
    """The installed distribution's version (``unknown`` when run from a bare checkout)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("headroom")
    except PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="headroom",
        description="Forecasting and capacity planning for GPU/CPU compute fleets.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    parser.add_argument("--version", action="version", version=f"headroom {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        module_name = f"pipelines.commands.{name}"
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue  # a command not built yet
            raise
        module.register(sub)
    _refuse_empty_paths(parser)
    return parser


# options and arguments that name a file or folder: an empty one (``--out "$OUT"`` with OUT
# unset) would mean the current folder, where generate wrote its seven files
PATH_OPTIONS = frozenset({"--out", "--input", "--db", "--config", "--windows", "--labels", "--telemetry",
                          "--failures", "--events", "--devices", "--lifetimes", "--fleet", "--utilization",
                          "--prices", "--on-demand", "--jsonl"})


def _refuse_empty_paths(parser: argparse.ArgumentParser) -> None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _refuse_empty_paths(child)
        elif PATH_OPTIONS & set(action.option_strings) or action.dest == "paths":
            action.type = _not_empty(action.type)
        elif URL_OPTIONS & set(action.option_strings):  # empty, the sink the environment sets went quiet
            action.type = _not_empty(action.type, "URL")


URL_OPTIONS = frozenset({"--webhook", "--alertmanager"})
FOLDER_OUT = frozenset({"generate", "convert", "report"})  # their --out is a folder, its files their own


def _refuse_outputs_over_inputs(args: argparse.Namespace) -> None:
    """An output file that is one of the command's inputs or its warehouse is refused before
    any work: ``plan replay --out`` at the warehouse replaced it with the CSV, exit 0."""
    from pipelines.runtime.settings import Settings

    outs = [(opt, getattr(args, opt[2:], None)) for opt in ("--out", "--jsonl")]
    if hasattr(args, "jsonl") and args.jsonl is None or args.command == "run":  # the alert file's setting
        outs.append(("HEADROOM_ALERT_JSONL", Settings.from_env().alert_jsonl))
    outs = [(o, v) for o, v in outs if v is not None and not (o == "--out" and args.command in FOLDER_OUT)
            and os.path.isfile(v)]
    if not outs:
        return
    inputs = []
    for opt in sorted(PATH_OPTIONS - {"--out", "--jsonl"}) + ["paths"]:
        value = getattr(args, opt.removeprefix("--").replace("-", "_"), None)
        # text and paths only: backtest's --windows is a count, and a number is a file descriptor to os.path
        inputs += [(opt, v) for v in (value if isinstance(value, list) else [value]) if isinstance(v, str | os.PathLike)]
    if hasattr(args, "db"):
        inputs.append(("the warehouse", Settings.from_env(db_path=args.db).db_path))
    for out_opt, out in outs:
        for opt, value in inputs:
            if os.path.isfile(value) and os.path.samefile(out, value):
                what = (opt if opt.startswith("the") else "the warehouse --db" if opt == "--db"
                        else f"the input {'PATH' if opt == 'paths' else opt}")
                harm = "writing it would replace it" if out_opt == "--out" else "alerts appended to it would spoil it"
                raise CliError(f"{out_opt} {out} is {what} ({value}): {harm}; give another path", 2)


def _not_empty(inner: object, what: str = "path"):
    def read(text: str) -> object:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"an empty {what} (an unset variable?)")
        return inner(text) if callable(inner) else text

    return read


_OWN_HANDLERS: list[logging.Handler] = []


def _configure_logging(level: int) -> None:
    """``logging.basicConfig`` to this call's stderr. A second ``main`` in one process (tests)
    first drops the handler the first one added, which may hold a stream closed since; other
    handlers (pytest's, Prefect's) are left alone."""
    root = logging.getLogger()
    while _OWN_HANDLERS:
        root.removeHandler(_OWN_HANDLERS.pop())
    before = set(root.handlers)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _OWN_HANDLERS.extend(h for h in root.handlers if h not in before)
    if level >= logging.WARNING:
        for handler in _OWN_HANDLERS:
            handler.addFilter(_quiet_libraries)
    # httpx logs each request with its whole URL at INFO: an alert webhook's path is its secret
    logging.getLogger("httpx").setLevel(logging.WARNING)
    # third-party warnings (prophet's and pandas' FutureWarnings...) become log records, shown with -v only
    logging.captureWarnings(True)
    logging.getLogger("py.warnings").setLevel(logging.WARNING if level < logging.WARNING else logging.ERROR)


def _quiet_libraries(record: logging.LogRecord) -> bool:
    """Without -v, Prophet's warnings ("Optimization terminated abnormally. Falling back to
    Newton.": it recovers) stay off the console. A filter on our handler, as Prophet sets its
    logger's level when it is imported, after this."""
    return record.levelno >= logging.ERROR or not record.name.startswith("prophet")


def _verbose_first(argv: list[str]) -> list[str]:
    """``-v`` is an option of ``headroom`` itself; accept it after the subcommand too
    (``headroom run -vv``), as users type it; nothing after ``--`` is touched."""
    end = argv.index("--") if "--" in argv else len(argv)
    head, tail = argv[:end], argv[end:]
    flags = [a for a in head if re.fullmatch(r"-v+|--verbose", a)]
    return flags + [a for a in head if a not in flags] + tail


def _fault(exc: BaseException, args: argparse.Namespace) -> Exception | None:
    """An error no command worded that is a fault of the machine (a full disk met while
    writing, say) or of the warehouse file (corrupt): as one line, else None."""
    from pipelines.runtime import faults
    from pipelines.store import warehouse

    try:
        from pipelines.runtime.settings import Settings

        db = Settings.from_env(db_path=getattr(args, "db", None)).db_path
    except Exception:  # noqa: BLE001 - the settings' own error was reported already, or is beside the point
        db = getattr(args, "db", None)
    return warehouse.corrupt_warehouse(exc, db) or faults.environment_fault(exc, warehouse=db)


def main(argv: list[str] | None = None) -> int:
    from pipelines.runtime.signals import terminate_as_interrupt

    try:
        with terminate_as_interrupt():  # SIGTERM, SIGHUP in the seconds of imports too, as Ctrl-C there
            return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C before the command began (its imports take seconds)
        print("headroom: interrupted", file=sys.stderr)
        return 130


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(_verbose_first(list(sys.argv[1:] if argv is None else argv)))
    # errors name the command as argparse does: "headroom plan replay", not "headroom plan"
    action = getattr(args, f"{args.command}_command", None)
    name = f"{args.command} {action}" if action else args.command
    level = logging.WARNING - 10 * min(args.verbose, 2)
    _configure_logging(level)
    if not args.verbose and args.command != "serve":  # served runs have no command to report their errors
        # a failed flow or task run is reported once, as this command's error (or traceback);
        # Prefect's own copy of every traceback on the console comes back with -v
        for run_logger in ("FLOW_RUNS", "TASK_RUNS"):
            os.environ.setdefault(f"PREFECT_LOGGING_LOGGERS_PREFECT_{run_logger}_LEVEL", "CRITICAL")
        os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")  # a local Dask cluster's start-up chatter
    import atexit
    import contextlib

    from pipelines.runtime.faults import EnvironmentFault
    from pipelines.runtime.outputs import OutputError
    from pipelines.runtime.signals import (
        ignore_late_signals,
        is_interrupt,
        isolate_ephemeral_api,
        quiet_shutdown,
        terminate_as_interrupt,
    )

    stopping = contextlib.nullcontext()
    if args.command != "serve":  # serve runs and stops a server of its own (see commands/serve.py)
        isolate_ephemeral_api()
        stopping = terminate_as_interrupt()
        if argv is None:  # a process of its own: last at its exit, after Prefect's API stop
            atexit.register(ignore_late_signals)
    from pipelines.runtime.settings import SettingsError
    from pipelines.store.warehouse import READ_BEHIND, NotAWarehouseError, WarehouseLockedError

    READ_BEHIND.clear()  # this command's reads only
    try:
        _refuse_outputs_over_inputs(args)
        with stopping:
            code = int(args.func(args) or 0)
        if args.command != "serve" and argv is None:  # the process exits next: its work is done
            quiet_shutdown()
        return code
    except (CliError, EnvironmentFault) as exc:
        print(f"headroom {name}: error: {exc}", file=sys.stderr)
        return exc.code
    except WarehouseLockedError as exc:  # every command, whether or not it words it itself
        print(f"headroom {name}: error: {exc}", file=sys.stderr)
        return 1
    except (SettingsError, NotAWarehouseError, OutputError) as exc:
        print(f"headroom {name}: error: {exc}", file=sys.stderr)
        return getattr(exc, "code", 2)
    except KeyboardInterrupt:
        print(f"headroom {name}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `headroom ... | head` closed the pipe: stop quietly, as Unix tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes stdout at exit
        return 141
    except Exception as exc:
        # Ctrl-C inside a DuckDB query surfaces as its InterruptException (or, through a
        # worker thread, a RuntimeError "Query interrupted"): the same interruption, no traceback;
        # the transaction it was in is rolled back, so nothing half-written stays
        fault = _fault(exc, args)
        if fault is not None:  # a full disk, a read-only file system, a corrupt warehouse...
            print(f"headroom {name}: error: {fault}", file=sys.stderr)
            return fault.code
        if is_interrupt(exc):
            print(f"headroom {name}: interrupted (the step in progress was rolled back)", file=sys.stderr)
            return 130
        if READ_BEHIND and type(exc).__name__ in ("CatalogException", "BinderException"):
            lacks = " ".join(str(exc).split("\n")[0].split())[:200]
            print(f"headroom {name}: error: warehouse {sorted(READ_BEHIND)[0]} is behind this headroom's "
                  f"schema and lacks what this command reads ({lacks}); a command that writes to it (ingest, train or "
                  "run) brings it up to date", file=sys.stderr)
            return 2
        if isinstance(exc, RuntimeError) and "ephemeral Prefect API" in str(exc):
            wait = os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", EPHEMERAL_WAIT_S)
            print(f"headroom {name}: error: Prefect's ephemeral API did not start within {wait} s (a busy "
                  "machine); raise PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS, or point PREFECT_API_URL at a "
                  "running server (prefect server start)", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
