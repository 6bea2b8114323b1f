"""``headroom plan``: allocation (3-5-2), reservation and pre-scale recommendations."""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
from pathlib import Path

from pipelines.commands.ingest import add_db_argument

MAX_LOOKBACK_DAYS = 36500


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("plan", help="recommend the hybrid split, reservations and pre-scaling")
    add_db_argument(p)
    p.add_argument("--lookback-days", type=int, default=28, help="demand history priced (default 28 days)")
    p.add_argument("--retune", action="store_true", help="re-tune the split even if this month's is set")
    p.add_argument("--config", default=None,
                   help="TOML policy file (default: $HEADROOM_PLAN_CONFIG; see data/samples/plan.toml)")
    p.add_argument("--json", action="store_true", help="the run's result as one JSON document instead of text")
    p.set_defaults(func=run)
    sub = p.add_subparsers(dest="plan_command", required=False, metavar="ACTION")
    add_replay_parser(sub)


def require_plan_config(path: str | Path | None, what: str | None = "HEADROOM_PLAN_CONFIG") -> None:
    """Load the plan policy file once, so a bad one stops a command (exit 2) before any work;
    the error names ``what`` gave the path (the setting; None: the option, typed just now)."""
    from pipelines.commands.errors import CliError
    from pipelines.plan.config import PlanConfigError, load_plan_policy

    try:
        load_plan_policy(path)
    except PlanConfigError as exc:
        raise CliError(f"{what}: {exc}" if what else str(exc), 2) from exc


def run(args: argparse.Namespace) -> int:
    from pipelines.commands.errors import CliError
    from pipelines.flows.plan import plan_flow
    from pipelines.runtime.settings import Settings
    from pipelines.store.warehouse import WarehouseLockedError

    settings = Settings.from_env(db_path=args.db)
    if not 1 <= args.lookback_days <= MAX_LOOKBACK_DAYS:  # beyond, a time span overflows
        raise CliError(f"--lookback-days must be between 1 and {MAX_LOOKBACK_DAYS} (100 years), got "
                       f"{args.lookback_days}", 2)
    if not settings.db_path.exists():
        raise CliError(f"{settings.db_path}: no warehouse (run headroom ingest or headroom run first)", 2)
    config = args.config or (str(settings.plan_config) if settings.plan_config else None)
    require_plan_config(config, None if args.config else "HEADROOM_PLAN_CONFIG")
    try:
        out = plan_flow(db_path=str(settings.db_path), lookback_days=args.lookback_days, retune=args.retune,
                        config_path=config)
    except WarehouseLockedError as exc:
        raise CliError(str(exc), 1) from exc
    except ValueError as exc:
        raise CliError(str(exc), 2) from exc
    from pipelines.commands.summaries import print_result

    print_result(out, args.json, "plan")
    return 0


def add_replay_parser(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser(
        "replay", help="replay pre-scaling decisions on history beside reactive and static baselines",
        description="Walk forward through [start, end) of one pool's demand at the data's own resolution. "
        "At each decision point only data before it is used: the train flow's models and champion choice "
        "(refit daily, forecasts refreshed hourly) and the plan's capacity rule. Every strategy is scored on "
        "the same demand; one row per strategy. A replay of the warehouse's own utilization is stored in it "
        "for the report.")
    r.add_argument("--utilization", type=Path, default=None,
                   help="utilization file in the input contract (default: the warehouse's utilization)")
    add_db_argument(r)
    r.add_argument("--pool", default=None, help="cluster/pool (or pool) to replay (default: the only one)")
    r.add_argument("--resource", default=None, choices=["gpu", "cpu", "mem"],
                   help="resource (default: gpu where the pool has GPUs, else cpu)")
    r.add_argument("--start", default=None, help="first decision (UTC; default: 30 days before the end)")
    r.add_argument("--end", default=None, help="end of the span, exclusive (default: the data's end)")
    r.add_argument("--instance-units", type=float, default=None,
                   help="units one instance adds (default: the catalog machine of the pool, else the config's "
                        "[prescale] instance_units, else the node size the data reports)")
    r.add_argument("--unit-price", type=float, default=None,
                   help="price of one unit-hour, for cost_usd (default: the pool's machine in the catalog)")
    r.add_argument("--lead", default=None, help="how late demand is seen and capacity serves (default 5m)")
    r.add_argument("--models", default=None, help="models to choose from (default: the train flow's)")
    r.add_argument("--config", default=None,
                   help="TOML policy file ([prescale] sets the rule; default: $HEADROOM_PLAN_CONFIG)")
    r.add_argument("--out", type=Path, default=None, help="write the table as CSV here")
    r.set_defaults(func=run_replay)


def run_replay(args: argparse.Namespace) -> int:
    from pipelines.commands.errors import CliError, model_names
    from pipelines.plan import replay as plan_replay
    from pipelines.plan.config import MAX_LEAD, PlanConfigError, load_plan_policy
    from pipelines.runtime.durations import parse_duration
    from pipelines.runtime.outputs import check_writable, write_csv
    from pipelines.runtime.progress import progress_bar
    from pipelines.runtime.settings import Settings
    from pipelines.store import warehouse

    if args.instance_units is not None and not 0 < args.instance_units <= 1e9:  # as plan.toml's: no cost overflows
        raise CliError(f"--instance-units must be a number > 0 and at most 1e9, got {args.instance_units:g}", 2)
    if args.unit_price is not None and not 0 < args.unit_price <= 1e6:  # so no cost overflows to inf
        raise CliError(f"--unit-price must be a number > 0 and at most 1e6 (per unit-hour), got {args.unit_price:g}", 2)
    settings = Settings.from_env(db_path=args.db)
    try:  # --config, else HEADROOM_PLAN_CONFIG, as plan and run read it
        plan_policy = load_plan_policy(args.config or (str(settings.plan_config) if settings.plan_config else None))
        policy = plan_policy.prescale
        if args.lead is not None:
            parse_duration(args.lead, most=MAX_LEAD)  # checked; kept as written, as the report shows it
            policy = dataclasses.replace(policy, lead=args.lead.strip())
    except PlanConfigError as exc:
        raise CliError(str(exc), 2) from exc
    except ValueError as exc:
        raise CliError(f"--lead: {exc}", 2) from exc
    if args.out is not None:
        check_writable(args.out)
    models = model_names(args.models, list(plan_replay.DEFAULT_MODELS))
    start, end = (_time_option(args.start), _time_option(args.end))
    stack = contextlib.ExitStack()  # holds the source open while the series and sizing are read
    con = _replay_source(args, settings, stack)
    try:
        series, node_units = plan_replay.pick_series(con, args.pool, args.resource)
        series, start, end = plan_replay.prepare(series, start, end)
        units, price = plan_replay.sizing(con, str(series.name), node_units, plan_policy, args.instance_units,
                                          args.unit_price, peak=float(series.max()))
    except plan_replay.ReplayError as exc:
        raise CliError(str(exc), 2) from exc
    finally:
        stack.close()  # not held through the replay's minutes: other writers go on meanwhile
    try:
        with progress_bar("replay", "days") as bar:
            result = plan_replay.replay(series, start, end, units, policy, unit_price=price, models=models,
                                        progress=bar)
    except plan_replay.ReplayError as exc:
        raise CliError(str(exc), 2) from exc
    table = result.table
    print(f"replay of {series.name} from {start} to {end} ({len(result.demand)} steps of "
          f"{series.index[1] - series.index[0]}, instances of {units:g} units; "
          f"{plan_replay.rule_text(policy, price)}):")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}", na_rep="-"))
    if "cost_vs_oracle" in table and table["cost_vs_oracle"].isna().all():
        print("cost_vs_oracle is -: the oracle holds no capacity (no demand in the span), so no cost is a "
              "multiple of it")
    beaten = plan_replay.frontier_verdict(table)
    print("planned is beyond the reactive frontier" if not beaten else
          f"planned is matched or beaten by {', '.join(beaten)} (no dearer and no more under-provisioned)")
    if args.utilization is None:  # the warehouse's own data: stored for the report (after the table is shown)
        with warehouse.open_warehouse(settings.db_path, lock_timeout_s=settings.lock_timeout_s) as w:
            rid = plan_replay.store(w, series, start, end, units, models, result, policy)
        print(f"stored as {rid} in {settings.db_path} (headroom report shows, for each pool, the stored "
              "replay whose span ends latest)")
    if args.out is not None:  # last: a store that fails (the warehouse locked) leaves no table file behind
        write_csv(table, args.out)
        print(f"table: {args.out}")
    return 0


def _time_option(text: str | None) -> str | None:
    """--start/--end read as ingest reads a timestamp ("01:00 CET" is 00:00 UTC), as UTC ISO text."""
    from pipelines.commands.errors import CliError
    from pipelines.ingest.tables import time_option

    try:
        return None if text is None else time_option(text).isoformat()
    except ValueError as exc:
        raise CliError(f"--start/--end: {text!r} {exc}", 2) from None


def _replay_source(args: argparse.Namespace, settings, stack: contextlib.ExitStack) -> object:
    """A connection holding the utilization to replay: ``--utilization`` ingested into a
    memory warehouse (its bad rows said, as ingest says them), else the warehouse read-only."""
    from pipelines.commands.errors import CliError
    from pipelines.ingest.adapters import IngestFileError
    from pipelines.ingest.loading import ingest_file
    from pipelines.store import warehouse

    if args.utilization is None:
        if not settings.db_path.exists():
            raise CliError(f"{settings.db_path}: no warehouse; pass --utilization FILE", 2)
        return stack.enter_context(warehouse.open_warehouse(settings.db_path, read_only=True,
                                                            lock_timeout_s=settings.lock_timeout_s))
    if not args.utilization.is_file():
        raise CliError(f"{args.utilization}: no such file", 2)
    con = warehouse.connect(":memory:")
    stack.callback(con.close)
    try:
        r = ingest_file(con, args.utilization, "utilization")
    except IngestFileError as exc:
        stack.close()
        raise CliError(str(exc), exc.code) from exc
    if r.rows_rejected:
        print(f"{args.utilization}: {r.rows_rejected} row(s) rejected; " + "; ".join(r.sample_reasons[:3]))
    return con
