"""``headroom train``: backtest, pick champions, fit, register and forecast demand."""
from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("train", help="backtest models on warehouse demand, register champions, forecast")
    p.add_argument("--db", default=None, help="warehouse file (default: $HEADROOM_DB or data/warehouse.duckdb)")
    p.add_argument("--horizon", type=int, default=24, help="forecast horizon in hours (default 24)")
    p.add_argument("--models", default=None, help="comma-separated models (default: the flow's set)")
    p.add_argument("--windows", type=int, default=2, help="backtest windows (default 2)")
    p.add_argument("--group-by", default="resource", choices=["resource", "cluster", "pool", "all"],
                   help="series group that shares one global model and one champion (default resource)")
    p.add_argument("--lookback-days", type=int, default=56, help="history used (default 56 days)")
    p.add_argument("--seed", type=int, default=0, help="seed of the models that use one (default 0)")
    p.add_argument("--json", action="store_true", help="the run's summary as one JSON document instead of text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import forecasters
    from pipelines.commands.errors import CliError, check_seed, model_names
    from pipelines.commands.plan import MAX_LOOKBACK_DAYS
    from pipelines.flows.train import check_scheduler, task_runner_for, train_flow
    from pipelines.runtime.settings import Settings
    from pipelines.store.warehouse import WarehouseLockedError

    settings = Settings.from_env(db_path=args.db)
    names = model_names(args.models, None)
    check_seed(args.seed)
    if args.horizon < 1 or args.windows < 1:
        raise CliError("--horizon and --windows must be >= 1", 2)
    if not 1 <= args.lookback_days <= MAX_LOOKBACK_DAYS:  # beyond, a time span overflows
        raise CliError(f"--lookback-days must be between 1 and {MAX_LOOKBACK_DAYS} (100 years), got "
                       f"{args.lookback_days}", 2)
    if not settings.db_path.exists():
        raise CliError(f"{settings.db_path}: no warehouse (run headroom ingest or headroom run first)", 2)
    try:
        runner = task_runner_for(settings)
        if settings.dask_address:
            check_scheduler(settings.dask_address)
    except RuntimeError as exc:
        raise CliError(str(exc), 2) from exc
    try:
        summary = train_flow.with_options(task_runner=runner)(
            db_path=str(settings.db_path), horizon=args.horizon, models=names, windows=args.windows,
            group_by=args.group_by, lookback_days=args.lookback_days, seed=args.seed,
        )
    except WarehouseLockedError as exc:
        raise CliError(str(exc), 1) from exc
    except (ValueError, forecasters.HistoryError) as exc:
        raise CliError(str(exc), 2) from exc
    from pipelines.commands.summaries import print_result

    print_result(summary, args.json, "train")
    return 0
