"""``headroom report``: write report.html and the recommendation exports."""
from __future__ import annotations

import argparse

from pipelines.commands.ingest import add_db_argument


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("report", help="write the HTML report and recommendation exports (CSV, Parquet)")
    add_db_argument(p)
    p.add_argument("--out", default=None, help="output folder (default: $HEADROOM_REPORT_DIR or reports/)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipelines.commands.errors import CliError
    from pipelines.flows.report import report_flow
    from pipelines.runtime.settings import Settings
    from pipelines.store.warehouse import WarehouseLockedError

    if args.out is not None and not args.out.strip():  # Path("") is the current folder: not what was meant
        raise CliError("--out is empty: give the folder to write the report to", 2)
    settings = Settings.from_env(db_path=args.db, report_dir=args.out)
    if not settings.db_path.exists():
        raise CliError(f"{settings.db_path}: no warehouse (run headroom ingest or headroom run first)", 2)
    from pipelines.report.data import check_out_dir

    try:
        check_out_dir(settings.report_dir)
    except OSError as exc:  # a file in the way: 2; the machine (permissions, a read-only mount): 1
        raise CliError(str(exc), getattr(exc, "code", 2)) from exc
    try:
        out = report_flow(db_path=str(settings.db_path), out_dir=str(settings.report_dir))
    except WarehouseLockedError as exc:
        raise CliError(str(exc), 1) from exc
    print(f"report: {out['html']}")
    for path in out["files"]:
        print(f"export: {path}")
    shown = ", ".join(f"{k} {v}" for k, v in out["sections"].items())
    print(f"sections: {shown}")
    return 0
