"""The ``replay`` flow: each planned pool's last days replayed as ``headroom plan replay`` does
(:mod:`pipelines.plan.replay`), stored for the report beside the reactive and static baselines."""
from __future__ import annotations

import logging

import pandas as pd
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from pipelines.plan import replay as plan_replay
from pipelines.plan.config import load_plan_policy
from pipelines.runtime.progress import progress_bar
from pipelines.runtime.settings import Settings
from pipelines.store import warehouse
from planner.plan import PlanPolicy

log = logging.getLogger(__name__)

RUN_DAYS = 7  # the run replays the last week: enough for a daily tide, short enough for every run
RUN_MODELS = ("seasonal_naive", "lgbm")  # the run's: the champion's rivals that refit in seconds


@task(cache_policy=NO_CACHE)
def replay_pool_task(db_path: str, pool: str, days: int, models: tuple[str, ...], policy: PlanPolicy,
                     lock_timeout_s: float) -> dict:
    """Replay one pool's primary series over its last ``days`` and store it; ``{"pool", "skipped":
    why}`` when it cannot be."""
    with warehouse.open_warehouse(db_path, read_only=True, lock_timeout_s=lock_timeout_s) as con:
        try:
            series, node_units = plan_replay.pick_series(con, pool, None)
            end = series.index[-1] + (series.index[1] - series.index[0])
            series, start, end = plan_replay.prepare(series, str(end - pd.Timedelta(days=days)), None)
            units, price = plan_replay.sizing(con, str(series.name), node_units, policy,
                                              peak=float(series.max()))
        except plan_replay.ReplayError as exc:
            log.warning("replay %s: %s", pool, exc)
            return {"pool": pool, "skipped": str(exc)}
    try:
        result = plan_replay.replay(series, start, end, units, policy.prescale, unit_price=price, models=models)
    except plan_replay.ReplayError as exc:
        log.warning("replay %s: %s", pool, exc)
        return {"pool": pool, "skipped": str(exc)}
    with warehouse.open_warehouse(db_path, lock_timeout_s=lock_timeout_s) as con:
        plan_replay.store(con, series, start, end, units, models, result, policy.prescale)
    t = result.table.set_index("strategy")
    return {"unique_id": str(series.name), "start": str(start), "end": str(end),
            **{f"{k}_{m}": float(t.loc[k, m]) for k in ("planned", "reactive_80")
               for m in ("cost_vs_oracle", "underprovisioned_pct")},
            "beyond_frontier": not plan_replay.frontier_verdict(result.table)}


@flow(name="replay")
def replay_flow(db_path: str, days: int = RUN_DAYS, models: tuple[str, ...] = RUN_MODELS,
                config_path: str | None = None) -> dict:
    """Replay every planned pool's last ``days``; returns ``{"replays": [per pool], "not_replayed":
    {pool: why}}``."""
    settings = Settings.from_env()
    policy = load_plan_policy(config_path or (str(settings.plan_config) if settings.plan_config else None))
    with warehouse.open_warehouse(db_path, read_only=True, lock_timeout_s=settings.lock_timeout_s) as con:
        pools = plan_replay.planned_pools(con)
        drained = plan_replay.drained_pools(con, pools)
    pools = [p for p in pools if p not in drained]
    done = [{"pool": p, "skipped": "no running capacity at the data's end (drained, or silent for a day): not planned"} for p in drained]
    with progress_bar("replay", "pools") as bar:
        for p in pools:
            done.append(replay_pool_task(db_path, p, days, tuple(models), policy, settings.lock_timeout_s))
            bar(len(done) - len(drained), len(pools))
    out = {"replays": [d for d in done if "skipped" not in d],
           "not_replayed": {d["pool"]: d["skipped"] for d in done if "skipped" in d}}
    log.info("replay: %s", out)
    return out
