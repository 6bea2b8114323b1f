"""``headroom status``: what the warehouse holds, how fresh it is, the flows' last runs,
champions, firing alerts and the latest plan's headline; exit 1 when a source is stale."""
from __future__ import annotations

import argparse
import math
from datetime import UTC, datetime

from pipelines.commands.summaries import json_text


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("status", help="what the warehouse holds, freshness, last runs, champions, alerts",
                              description="Exit 1 when a source that holds data is older than --max-age-hours.")
    p.add_argument("--db", default=None, help="warehouse file (default: $HEADROOM_DB or data/warehouse.duckdb)")
    p.add_argument("--max-age-hours", type=float, default=None,
                   help="a source whose newest row is older is stale (default $HEADROOM_STALE_AFTER_HOURS or 24)")
    p.add_argument("--now", default=None, help="UTC time to measure freshness against (default: now)")
    p.add_argument("--json", action="store_true", help="one JSON document instead of text")
    p.set_defaults(func=run)


def _iso(value: object) -> str | None:
    """UTC with its offset, as every export writes times."""
    return None if value is None else f"{datetime.fromisoformat(str(value)).replace(tzinfo=UTC).isoformat()}"


def _age(hours: float | None) -> str:
    if hours is None:
        return "-"
    if abs(hours) < 48:
        return f"{hours:.1f} h"
    return f"{hours / 24:.1f} days"


EVENTS = ("failures",)  # sources whose age is the time since the last event, never stale


def gather(con: object, now: datetime, max_age_hours: float) -> dict:
    from pipelines.store import status as store

    sources = store.sources(con, now)
    for s in sources:
        # failures are events, not a feed: a healthy fleet goes days without one
        s["stale"] = s["kind"] not in EVENTS and s["age_hours"] is not None and s["age_hours"] > max_age_hours
        s["ahead"] = s["ahead_rows"] > 0  # rows after the clock: their age is not the feed's
    return {"now": now, "max_age_hours": max_age_hours, "sources": sources, "runs": store.last_runs(con),
            "champions": store.champions(con), "alerts": store.firing_alerts(con), "plan": store.plan_headline(con)}


def _text(doc: dict) -> list[str]:
    lines = [f"warehouse at {_iso(doc['now'])} (stale after {doc['max_age_hours']:g} h)"]
    if "file" in doc:
        f = doc["file"]
        kept = (f"history past {f['keep_days']} days pruned daily by serve" if f["keep_days"] is not None
                else "all history kept") + (f", readings past {f['keep_data_days']} days"
                                            if f["keep_data_days"] is not None else ", all readings kept")
        lines.append(f"file: {f['bytes'] / 1e6:,.1f} MB ({kept}; headroom prune)")
    lines.append("sources:")
    for s in doc["sources"]:
        if not s["rows"]:
            lines.append(f"  {s['kind']:<12} empty")
            continue
        flag = ("  STALE" if s["stale"] else "") + (f"  AHEAD ({s['ahead_rows']:,} row(s) after the clock)"
                                                     if s["ahead"] else "")
        lines.append(f"  {s['kind']:<12} {s['rows']:>10,} rows  {_iso(s['first'])} .. {_iso(s['last'])}  "
                     f"age {_age(s['age_hours'])}{flag}")
    lines.append("last written by each flow (plan, detect, replay: the clock they decided at, the data's end "
                 "on a replay):")
    for r in doc["runs"]:
        when = _iso(r["last_written"]) or "never"
        extra = {"ingest": "file(s) in the last ingest", "train": "champion(s)", "plan": "plan run(s) kept",
                 "detect": "alert(s) firing", "replay": "series replayed"}[r["flow"]]
        lines.append(f"  {r['flow']:<7} {when}  ({r['count']} {extra})")
        for status, b in r.get("batches", {}).items():
            lines.append(f"          {status}: {b['batches']} batch(es), {b['rows_loaded']:,} rows loaded, "
                         f"{b['rows_rejected']:,} rejected")
    lines.append("champions:" if doc["champions"] else "champions: none (run headroom train)")
    for c in doc["champions"]:
        wape = "-" if c["wape"] is None else f"{c['wape']:.3f}"
        lines.append(f"  {c['group']}: {c['model']} ({c['model_id']}), backtest WAPE {wape}, data up to "
                     f"{_iso(c['data_cutoff'])}")
    lines.append(f"firing alerts: {len(doc['alerts'])}")
    for a in doc["alerts"][:10]:
        lines.append(f"  {a['severity']:<8} {a['kind']:<14} {a['entity']}: {a['summary']}")
    if len(doc["alerts"]) > 10:
        lines.append(f"  ... and {len(doc['alerts']) - 10} more (headroom status --json lists all)")
    plan = doc["plan"]
    if plan is None:
        lines.append("latest plan: none (run headroom plan)")
    else:
        lines.append(f"latest plan: {plan['run_id']} (data up to {_iso(plan['data_cutoff'])})")
        lines += [f"  {h['unique_id']}: {h['text']}" for h in plan["headline"]]
    return lines


def run(args: argparse.Namespace) -> int:
    from pipelines.commands.errors import CliError
    from pipelines.runtime.settings import Settings
    from pipelines.store import warehouse

    if args.max_age_hours is not None and not 0 < args.max_age_hours < math.inf:
        raise CliError(f"--max-age-hours must be a finite number > 0, got {args.max_age_hours:g}", 2)
    settings = Settings.from_env(db_path=args.db, stale_after_hours=args.max_age_hours)
    max_age = settings.stale_after_hours
    from pipelines.ingest.tables import time_option

    try:  # read as ingest reads a timestamp (an offset or a zone name; none is UTC)
        now = (datetime.now(UTC).replace(tzinfo=None) if args.now is None
               else time_option(args.now).to_pydatetime())
    except ValueError as exc:
        raise CliError(f"--now {args.now!r} {exc}", 2) from None
    if not settings.db_path.exists():
        raise CliError(f"{settings.db_path}: no warehouse (run headroom ingest or headroom run first)", 2)
    with warehouse.open_warehouse(settings.db_path, read_only=True) as con:
        doc = gather(con, now, max_age)
    doc["file"] = {"bytes": settings.db_path.stat().st_size, "keep_days": settings.keep_days,
                   "keep_data_days": settings.keep_data_days}
    stale = [s["kind"] for s in doc["sources"] if s["stale"]]
    if args.json:
        print(json_text(doc, default=lambda v: _iso(v) if isinstance(v, datetime) else str(v), indent=2))
    else:
        print("\n".join(_text(doc)))
        if stale:
            print(f"stale: {', '.join(stale)} (newest row older than {max_age:g} h)")
    return 1 if stale else 0
