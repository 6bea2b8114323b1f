"""The ``plan`` flow: demand, forecasts, capacity, catalog and spot prices -> allocation
(3-5-2, re-tuned monthly), reservation, pre-scale and spot recommendations in the warehouse.

Tasks are thin wrappers of :mod:`pipelines.plan.planning` and :func:`planner.make_plan`.
The run id and timestamps come from the data cutoff, so re-running over the same
warehouse leaves the same rows.
"""
from __future__ import annotations

import logging

import pandas as pd
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from pipelines.plan import planning
from pipelines.plan.config import load_plan_policy
from pipelines.runtime.run_logs import info_in_deployed_runs
from pipelines.runtime.settings import Settings
from pipelines.store import warehouse
from planner.allocation import Split
from planner.plan import PlanPolicy, make_plan

log = logging.getLogger(__name__)


@task(cache_policy=NO_CACHE)
def policy_task(config_path: str | None) -> PlanPolicy:
    """The planner's policy: the config file's, or the defaults."""
    return load_plan_policy(config_path)


@task(cache_policy=NO_CACHE)
def load_task(db_path: str, lookback_days: int, lock_timeout_s: float,
              calibration: str, fill: str = "layered") -> tuple[planning.PlanInputs, dict]:
    """The planner's inputs and this month's tuned splits (those tuned under ``fill``)."""
    with warehouse.open_warehouse(db_path, read_only=True, lock_timeout_s=lock_timeout_s) as con:
        inputs = planning.load_inputs(con, lookback_days, calibration)
        return inputs, planning.kept_splits(con, inputs, fill)


@task(cache_policy=NO_CACHE)
def plan_task(inputs: planning.PlanInputs, splits: dict[str, Split], retune: bool,
              policy: PlanPolicy) -> dict[str, pd.DataFrame]:
    """Recommendations by kind."""
    return make_plan(inputs.history, inputs.forecast, inputs.capacity, inputs.catalog, policy,
                     splits=None if retune else splits,
                     spot_markets=planning.spot_markets(inputs, policy.spot.lookback),
                     spike_probabilities=inputs.spike_probabilities, recent=inputs.recent)


@task(cache_policy=NO_CACHE)
def save_task(db_path: str, plan: dict[str, pd.DataFrame], inputs: planning.PlanInputs,
              lock_timeout_s: float) -> int:
    """Write the run's recommendations in one transaction."""
    rows = planning.recommendation_rows(plan, inputs)
    with warehouse.open_warehouse(db_path, lock_timeout_s=lock_timeout_s) as con:
        return planning.save_plan(con, rows, inputs.run_id)


@flow(name="plan")
def plan_flow(db_path: str | None = None, lookback_days: int = 28, retune: bool = False, config_path: str | None = None) -> dict:
    """Plan every pool; ``retune`` re-tunes the split even if this month's is set;
    ``config_path`` (default: the plan_config setting) is a TOML policy file.

    Returns ``{"run_id", "data_cutoff", "rows": {kind: count}, "allocation": [...]}``.
    """
    info_in_deployed_runs()
    settings = Settings.from_env()
    db_path = db_path or str(settings.db_path)  # a deployment names no path: HEADROOM_DB
    policy = policy_task(config_path or (str(settings.plan_config) if settings.plan_config else None))
    inputs, splits = load_task(db_path, lookback_days, settings.lock_timeout_s, policy.prescale.calibration,
                               policy.allocation.fill)
    if inputs.data_cutoff is None:
        raise ValueError(f"no utilization in {db_path}: ingest some before planning")
    plan = plan_task(inputs, splits, retune, policy)
    written = save_task(db_path, plan, inputs, settings.lock_timeout_s)
    out = planning.summarize(plan, inputs, written)
    log.info("plan: %s", out)
    return out
