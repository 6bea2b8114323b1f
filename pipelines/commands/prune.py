"""``headroom prune``: delete the warehouse's history no command reads any more (old models,
forecasts, backtests, plan runs, resolved alerts, replays; readings too with
``--keep-data-days``), and with ``--compact`` give the space back. The rules are
:mod:`pipelines.store.retention`'s; ``serve`` prunes daily by the same settings."""
from __future__ import annotations

import argparse
from datetime import UTC, datetime

from pipelines.commands.ingest import add_db_argument
from pipelines.commands.summaries import json_text

ALL = "all"  # keep every row


def _days(text: str) -> int | str:
    """A whole number of days, or ``all``."""
    if text.strip().lower() == ALL:
        return ALL
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of days or 'all'") from None


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "prune", help="delete old models, forecasts, plan runs, resolved alerts and replays; compact the file",
        description="Always kept: champions and the models a detect run or a replay still reuses, the newest "
                    "plan run and this month's split tunings, firing alerts and undelivered ones, each series' "
                    "newest replay, failures and ingest records. Ages count from the newest reading "
                    "(docs/operations.md, Retention).")
    add_db_argument(p)
    p.add_argument("--keep-days", type=_days, default=None,
                   help="days of derived history to keep (default $HEADROOM_KEEP_DAYS or 30; 'all' keeps it all)")
    p.add_argument("--keep-data-days", type=_days, default=None,
                   help="days of readings (utilization, telemetry, spot prices) to keep (default "
                        "$HEADROOM_KEEP_DATA_DAYS or all); failures and ingest records are always kept")
    p.add_argument("--now", default=None, help="UTC time the ages are measured from (default: the newest reading)")
    p.add_argument("--dry-run", action="store_true", help="say what would be deleted; change nothing")
    p.add_argument("--compact", action="store_true",
                   help="then copy the warehouse into a new file to give the freed space back (holds the "
                        "warehouse's lock while it copies)")
    p.add_argument("--json", action="store_true", help="one JSON document instead of text")
    p.set_defaults(func=run)


def _iso(value: datetime) -> str:
    return value.replace(tzinfo=UTC).isoformat()


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def run(args: argparse.Namespace) -> int:
    from pipelines.commands.errors import CliError
    from pipelines.ingest.tables import time_option
    from pipelines.runtime.settings import Settings
    from pipelines.store import retention, warehouse

    settings = Settings.from_env(db_path=args.db)
    keep = _given(args.keep_days, settings.keep_days)
    data = _given(args.keep_data_days, settings.keep_data_days)
    if args.dry_run and args.compact:
        raise CliError("--dry-run changes nothing, and --compact rewrites the file: give one of them", 2)
    try:
        rules = None if keep is None and data is None else retention.Retention(keep, data)
    except ValueError as exc:
        raise CliError(str(exc), 2) from None
    try:
        now = None if args.now is None else time_option(args.now).to_pydatetime()
    except ValueError as exc:
        raise CliError(f"--now {args.now!r} {exc}", 2) from None
    db = settings.db_path
    if not db.exists():
        raise CliError(f"{db}: no warehouse (run headroom ingest or headroom run first)", 2)
    doc: dict = {"warehouse": str(db), "keep_days": keep, "keep_data_days": data, "dry_run": args.dry_run,
                 "tables": {}}
    # read-only first: a dry run, or nothing to do, writes nothing (no migration either)
    with warehouse.open_warehouse(db, read_only=True) as con:
        doc["clock"] = None if rules is None else _clock(con, now)  # compacting alone needs none
        if args.dry_run and rules is not None and doc["clock"] is not None:
            doc["tables"] = retention.prune(con, doc["clock"], rules, dry_run=True)
    if args.compact:  # a copy that could not keep the file's owner: refused before anything is done
        retention.check_owner(db)
    if not args.dry_run and (args.compact or rules is not None and doc["clock"] is not None):
        with warehouse.open_warehouse(db) as con:
            if rules is not None:  # read again under the lock: an ingest may have come between
                doc["clock"] = _clock(con, now)
            if rules is not None and doc["clock"] is not None:
                doc["tables"] = retention.prune(con, doc["clock"], rules)
            if args.compact:
                doc["size_before"], doc["size_after"] = retention.compact(con, db)
    doc.setdefault("size_after", db.stat().st_size)
    if args.json:
        print(json_text(doc, default=lambda v: _iso(v) if isinstance(v, datetime) else str(v), indent=2))
    else:
        print("\n".join(_text(doc)))
    return 0


def _clock(con: object, now: datetime | None) -> datetime | None:
    from pipelines.commands.errors import CliError
    from pipelines.store import retention

    try:
        return retention.clock(con, now)
    except ValueError as exc:
        raise CliError(str(exc), 2) from None


def _given(option: int | str | None, setting: int | None) -> int | None:
    """The option's days (None for ``all``), else the setting's."""
    return setting if option is None else None if option == ALL else int(option)


def _text(doc: dict) -> list[str]:
    verb = "would delete" if doc["dry_run"] else "deleted"
    keep = "all" if doc["keep_days"] is None else f"{doc['keep_days']} days"
    data = "all" if doc["keep_data_days"] is None else f"{doc['keep_data_days']} days"
    if doc["keep_days"] is None and doc["keep_data_days"] is None:
        lines = [f"{doc['warehouse']}: history and readings kept in full (--keep-days all); nothing deleted"]
    elif doc["clock"] is None:
        lines = [f"{doc['warehouse']}: no readings, so no clock to measure ages from (give --now); nothing deleted"]
    else:
        lines = [f"{doc['warehouse']} as of {_iso(doc['clock'])}: history kept {keep}, readings {data}",
                 f"  {'table':<18}{verb:>14}{'kept':>14}"]
        lines += [f"  {t:<18}{c['deleted']:>14,}{c['kept']:>14,}" for t, c in doc["tables"].items()]
    if "size_before" in doc:
        lines.append(f"compacted: {_mb(doc['size_before'])} -> {_mb(doc['size_after'])}")
    elif not doc["dry_run"]:
        lines.append(f"file: {_mb(doc['size_after'])} (DuckDB reuses the space freed; --compact gives it back now)")
    return lines
