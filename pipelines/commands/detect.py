"""``headroom detect``: run the detect flow (bursts, faults, spikes, alert delivery) once."""
from __future__ import annotations

import argparse
import os
import sys

from pipelines.commands.ingest import add_db_argument


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("detect", help="run the detectors over the warehouse and deliver alerts")
    add_db_argument(p)
    p.add_argument("--detectors", default="bursts,faults,spikes", help="comma list (default all three)")
    p.add_argument("--jsonl", default=None, help="append alerts to this JSONL file")
    p.add_argument("--webhook", default=None, help="POST alerts to this URL")
    p.add_argument("--alertmanager", default=None, help="Alertmanager base URL (POST /api/v2/alerts)")
    p.add_argument("--unused-spot-markets", choices=["info", "off"], default=None,
                   help="spike alerts on markets no pool's load is planned on: info (default, "
                        "$HEADROOM_UNUSED_SPOT_MARKETS) or off")
    p.add_argument("--season-length", type=int, default=24, help="hourly points per season (default 24)")
    p.add_argument("--as-of", default="now", help="the detection clock: now (default, live), data (the newest "
                   "reading: a replay of historical data) or a UTC time")
    p.add_argument("--json", action="store_true", help="the run's result as one JSON document instead of text")
    p.set_defaults(func=run)


def _data_end(db_path: str):
    from pipelines.store import detection, warehouse

    with warehouse.open_warehouse(db_path, read_only=True) as con:  # (a stray left out is said by the detectors)
        return detection.data_end(con, warn=False)


def as_of(value: str, db_path: str):
    """The ``--as-of`` clock: None (the wall clock), the warehouse's newest reading, or a time."""
    import pandas as pd

    if value == "now":
        return None
    if value == "data":
        from pipelines.detect.jobs import stray_readings

        # the clock would be the stray's: models dated then, every real alert resolved
        stray = stray_readings(db_path, ["bursts", "faults", "spikes"],
                               wall=pd.Timestamp.now("UTC").tz_localize(None).to_pydatetime())
        if stray:
            raise ValueError(f"--as-of data: {next(iter(stray.values()))}")
        end = _data_end(db_path)
        if end is None:
            raise ValueError("--as-of data: the warehouse holds no readings yet")
        return end
    from pipelines.ingest.tables import time_option

    try:  # read as ingest reads a timestamp: "2026-11-05 01:00 CET" is 00:00 UTC, not 01:00
        t = time_option(value)
    except ValueError as exc:
        raise ValueError(f"--as-of {value!r} is not now or data, and {exc}") from None
    # a clock past both now and the data (a year mistyped: 2062) registers models dated then, which
    # live runs take as fresh until that date; a day's slack for a local "today" ahead of UTC
    end = _data_end(db_path)
    latest = max(pd.Timestamp.now("UTC").tz_localize(None), pd.Timestamp(end) if end is not None else pd.Timestamp.min)
    if t > latest + pd.Timedelta(days=1):
        raise ValueError(f"--as-of {value!r} is after both now and the data's end (the later: {latest:%Y-%m-%d %H:%M} "
                         "UTC): a time replays what was known then; leave --as-of out to run live")
    cut = _alerts_pruned_before(db_path)
    if cut is not None and t < pd.Timestamp(cut):
        # the alerts resolved before the cut are gone: a replay there would fire them again
        raise ValueError(f"--as-of {value!r} is before {cut:%Y-%m-%d %H:%M} UTC, where headroom prune deleted the "
                         "resolved alerts: a replay there would raise them again; give a later time")
    return t.to_pydatetime()


def _alerts_pruned_before(db_path: str):
    from pipelines.store import retention, warehouse

    with warehouse.open_warehouse(db_path, read_only=True) as con:
        return retention.alerts_pruned_before(con)


def run(args: argparse.Namespace) -> int:
    from pipelines.commands.errors import CliError
    from pipelines.detect.jobs import configured_sinks
    from pipelines.flows.detect import DETECTORS, detect_flow
    from pipelines.runtime.settings import Settings
    from pipelines.store.warehouse import WarehouseLockedError

    settings = Settings.from_env(db_path=args.db)
    chosen = [d.strip() for d in args.detectors.split(",") if d.strip()]
    bad = sorted(set(chosen) - set(DETECTORS))
    if bad or not chosen:  # an empty list ran all three
        raise CliError(f"unknown detector(s) {bad}; choose from {', '.join(DETECTORS)}" if bad else
                       f"--detectors {args.detectors!r} names none; choose from {', '.join(DETECTORS)}", 2)
    if not settings.db_path.exists():
        raise CliError(f"{settings.db_path}: no warehouse (run headroom ingest or headroom run first)", 2)
    try:
        configured_sinks(args.jsonl, args.webhook, args.alertmanager, probe=True)
        # the daily refit reads 28 days of hours (672) and needs a season and 24 residuals after it
        if not 1 <= args.season_length <= 648:
            raise ValueError(f"--season-length must be 1 to 648 hours (a season and a day's residuals inside the "
                             f"28-day calibration span), got {args.season_length}")
        now = as_of(args.as_of, str(settings.db_path))
    except ValueError as exc:
        raise CliError(str(exc), 2) from exc
    # the URLs reach the flow through this process's environment, not as flow parameters,
    # which Prefect stores (and shows) in plain text: a webhook's path is often its secret
    # (for this run only: a later call in the same process, a test's, must not inherit them)
    given = {var: url for var, url in (("HEADROOM_ALERT_WEBHOOK", args.webhook),
                                       ("HEADROOM_ALERTMANAGER_URL", args.alertmanager)) if url is not None}
    before = {var: os.environ.get(var) for var in given}
    os.environ.update(given)
    try:
        out = detect_flow(
            db_path=str(settings.db_path), jsonl_path=args.jsonl, detectors=chosen, season_length=args.season_length,
            now=now, unused_spot_markets=args.unused_spot_markets,
        )
    except WarehouseLockedError as exc:
        raise CliError(str(exc), 1) from exc
    finally:
        for var, value in before.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value
    from pipelines.commands.summaries import print_result

    print_result(out, args.json, "detect")
    return failures_said(out)


def failures_said(out: dict) -> int:
    """A detect run's skipped detectors and failed sinks, each an ``error:`` line on stderr;
    the exit code: 1 when there is any (the others' alerts went out, but a scheduler must
    see that a detector or a sink is down), else 0."""
    skipped = {name: r["skipped"] for name, r in out.items() if isinstance(r, dict) and "skipped" in r}
    for name, why in skipped.items():
        print(f"error: {name} detection skipped: {why}", file=sys.stderr)
    failed = out.get("delivery_failed") or {}
    for sink, why in failed.items():  # kept pending and sent on the next run
        print(f"error: alert sink {sink} failed, its alerts stay pending for the next run: {why}", file=sys.stderr)
    return 1 if skipped or failed else 0
