"""The ``replay`` flow: each planned pool's last days replayed as ``headroom plan replay`` does
(:mod:`pipelines.plan.replay`), stored for the report beside the reactive and static baselines."""
from __future__ import annotations

import logging

import pandas as pd
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from pipelines.plan import replay as plan_replay
from pipelines.plan.config import load_plan_policy
from pipelines.runtime.settings import Settings
from pipelines.store import replays, warehouse
from planner.plan import PlanPolicy, instance_units

log = logging.getLogger(__name__)

RUN_DAYS = 7  # the run replays the last week: enough for a daily tide, short enough for every run
RUN_MODELS = ("seasonal_naive", "lgbm")  # the run's: the champion's rivals that refit in seconds


@task(cache_policy=NO_CACHE)
def replay_pool_task(db_path: str, pool: str, days: int, models: tuple[str, ...], policy: PlanPolicy,
                     lock_timeout_s: float) -> dict | None:
    """Replay one pool's primary series over its last ``days`` and store it; None when it cannot be."""
    with warehouse.open_warehouse(db_path, read_only=True, lock_timeout_s=lock_timeout_s) as con:
        try:
            series, node_units = plan_replay.pick_series(con, pool, None)
            end = series.index[-1] + (series.index[1] - series.index[0])
            start, end = plan_replay.span_of(series, str(end - pd.Timedelta(days=days)), None)
        except plan_replay.ReplayError as exc:
            log.warning("replay %s: %s", pool, exc)
            return None
        price = plan_replay.unit_price(con, str(series.name), policy.costs)
        catalog = warehouse.query(con, "SELECT * FROM instance_catalog")
    resource = str(series.name).rsplit("/", 1)[1]
    units = instance_units(catalog, resource, pool.split("/")[-1], node_units, policy.prescale)
    if units is None:
        log.warning("replay %s: no instance size (no catalog offer, no node size)", pool)
        return None
    try:
        result = plan_replay.replay(series, start, end, units, policy.prescale, unit_price=price, models=models)
    except plan_replay.ReplayError as exc:
        log.warning("replay %s: %s", pool, exc)
        return None
    step = series.index[1] - series.index[0]
    with warehouse.open_warehouse(db_path, lock_timeout_s=lock_timeout_s) as con:
        replays.save_replay(con, str(series.name), start, end, step, units, ",".join(models), result.table,
                            result.ts, result.demand, result.capacities, created_at=end)
    t = result.table.set_index("strategy")
    return {"unique_id": str(series.name), "start": str(start), "end": str(end),
            **{f"{k}_{m}": float(t.loc[k, m]) for k in ("planned", "reactive_80")
               for m in ("cost_vs_oracle", "underprovisioned_pct")},
            "beyond_frontier": not plan_replay.frontier_verdict(result.table)}


@flow(name="replay")
def replay_flow(db_path: str, days: int = RUN_DAYS, models: tuple[str, ...] = RUN_MODELS,
                config_path: str | None = None) -> dict:
    """Replay every planned pool's last ``days``; returns ``{"replays": [per pool], "skipped": n}``."""
    settings = Settings.from_env()
    policy = load_plan_policy(config_path or (str(settings.plan_config) if settings.plan_config else None))
    with warehouse.open_warehouse(db_path, read_only=True, lock_timeout_s=settings.lock_timeout_s) as con:
        pools = plan_replay.planned_pools(con)
    done = [replay_pool_task(db_path, p, days, tuple(models), policy, settings.lock_timeout_s) for p in pools]
    out = {"replays": [d for d in done if d is not None], "skipped": sum(d is None for d in done)}
    log.info("replay: %s", out)
    return out
