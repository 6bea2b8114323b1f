"""``headroom plan``: allocation (3-5-2), reservation and pre-scale recommendations."""
from __future__ import annotations

import argparse
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
    p.set_defaults(func=run)


def require_plan_config(path: str | Path | None) -> None:
    """Load the plan policy file once, so a bad one stops a command (exit 2) before any work."""
    from pipelines.commands.errors import CliError
    from pipelines.plan.config import PlanConfigError, load_plan_policy

    try:
        load_plan_policy(path)
    except PlanConfigError as exc:
        raise CliError(str(exc), 2) from exc


def run(args: argparse.Namespace) -> int:
    from pipelines.commands.errors import CliError
    from pipelines.flows.plan import plan_flow
    from pipelines.plan.planning import current_text, saving_text, split_text, spot_text
    from pipelines.runtime.money import money
    from pipelines.runtime.settings import Settings
    from pipelines.store.warehouse import WarehouseLockedError

    settings = Settings.from_env(db_path=args.db)
    if not 1 <= args.lookback_days <= MAX_LOOKBACK_DAYS:  # beyond, a time span overflows
        raise CliError(f"--lookback-days must be between 1 and {MAX_LOOKBACK_DAYS} (100 years), got "
                       f"{args.lookback_days}", 2)
    if not settings.db_path.exists():
        raise CliError(f"{settings.db_path}: no warehouse (run headroom ingest or headroom run first)", 2)
    config = args.config or (str(settings.plan_config) if settings.plan_config else None)
    require_plan_config(config)
    try:
        out = plan_flow(db_path=str(settings.db_path), lookback_days=args.lookback_days, retune=args.retune,
                        config_path=config)
    except WarehouseLockedError as exc:
        raise CliError(str(exc), 1) from exc
    except ValueError as exc:
        raise CliError(str(exc), 2) from exc
    print(f"plan run {out['run_id']} (data up to {out['data_cutoff']}): " +
          ", ".join(f"{k} {v}" for k, v in out["rows"].items()))
    for a in out["allocation"]:
        print(f"  {a['unique_id']}: split private/public/edge {a['private']:.2f}/{a['public']:.2f}/{a['edge']:.2f} "
              f"({split_text(a)}), {money(a['monthly_cost'])}/month, {saving_text(a['savings_vs_default'])}"
              f"{current_text(a)}")
    for sp in out.get("spot", []):
        print(f"  {sp['unique_id']}: {spot_text(sp)}")
    return 0
