"""``headroom ingest``: load files of one kind into the warehouse."""
from __future__ import annotations

import argparse
import sys
import uuid

from pipelines.ingest.contract import KINDS
from pipelines.ingest.registry import NAMES as FORMATS


def add_db_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=None, help="warehouse file (default: $HEADROOM_DB or data/warehouse.duckdb)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ingest", help="load utilization, telemetry, failures, spot prices or the catalog")
    p.add_argument("--kind", required=True, choices=KINDS)
    p.add_argument("--format", dest="fmt", default="auto", choices=FORMATS)
    p.add_argument("--strict", action="store_true", help="any bad row: write nothing of that file, exit 1")
    p.add_argument("--cluster", default="default", help="cluster label for formats that carry none (gwa-t12, prometheus-json)")
    p.add_argument("--pool", default="default", help="pool label for formats that carry none")
    add_db_argument(p)
    p.add_argument("paths", nargs="+", metavar="PATH", help="files, globs or folders")
    p.set_defaults(func=run_ingest)


def run_ingest(args: argparse.Namespace) -> int:
    from pipelines.commands.errors import CliError
    from pipelines.commands.summaries import skipped_text
    from pipelines.ingest import loading as ingest
    from pipelines.ingest.registry import LABELLED
    from pipelines.ingest.validate import name_problem
    from pipelines.runtime.settings import Settings
    from pipelines.store import warehouse

    for option, value in (("--cluster", args.cluster), ("--pool", args.pool)):
        # checked here, not per row: a file loaded with a bad label is recorded as ingested
        if (why := name_problem(value, slash=True)) is not None:
            raise CliError(f"{option} {value[:40]!r}: {'empty' if why == 'missing' else why}", 2)
    settings = Settings.from_env(db_path=args.db)
    paths = ingest.expand_paths(args.paths, args.kind)
    if not paths:
        raise CliError(f"no files match {' '.join(args.paths)}", 2)
    code = 0
    created = not settings.db_path.exists()
    try:
        con = warehouse.connect(settings.db_path, lock_timeout_s=settings.lock_timeout_s)
    except warehouse.WarehouseLockedError as exc:
        raise CliError(str(exc), 1) from exc
    run_id = uuid.uuid4().hex  # this command's files, for status's "in the last ingest"
    try:
        for path in paths:
            try:
                r = ingest.ingest_file(con, path, args.kind, args.fmt, strict=args.strict,
                                       cluster=args.cluster, pool=args.pool, run_id=run_id)
            except ingest.IngestFileError as exc:
                print(f"error: {exc}")
                code = max(code, exc.code)
                continue
            except ingest.StrictModeError as exc:
                r = exc.result
                print(f"{r.path}: read {r.rows_read}, loaded 0, rejected {r.rows_rejected} (strict: nothing written)")
                for reason in r.sample_reasons:
                    print(f"  {reason}")
                code = max(code, 1)
                continue
            if r.status == "skipped":
                print(f"{r.path}: " + (skipped_text(0) if r.rows_read == 0 else
                                       f"skipped, already ingested as batch {r.batch_id}"))
                continue
            print(f"{r.path}: {ingest.counts_text(r.rows_read, r.rows_loaded, r.rows_rejected, r.swallowed, r.reject_lines)} [{r.fmt}]")
            for reason in r.sample_reasons:
                print(f"  {reason}")
            if (args.cluster, args.pool) != ("default", "default") and r.fmt not in LABELLED:
                print(f"  warning: --cluster/--pool apply only to {' and '.join(LABELLED)} files; its rows keep "
                      f"the labels the {r.fmt} file carries", file=sys.stderr)
        if created and code and not con.execute("SELECT count(*) FROM ingest_batches").fetchone()[0]:
            # no file went in: leave no new, empty warehouse behind (a later command would take it
            # for one ingested into); removed while this process still holds its lock
            for leftover in (settings.db_path, settings.db_path.with_name(settings.db_path.name + ".wal")):
                leftover.unlink(missing_ok=True)
    finally:
        con.close()
    return code
