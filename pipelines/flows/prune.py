"""The ``prune`` flow (``serve``'s daily prune): delete the warehouse's history past
``HEADROOM_KEEP_DAYS`` (readings past ``HEADROOM_KEEP_DATA_DAYS`` when set), by the rules of
:mod:`pipelines.store.retention`. It does not compact: DuckDB reuses the space freed, so the
file stops growing; ``headroom prune --compact`` gives it back."""
from __future__ import annotations

import logging
from pathlib import Path

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from pipelines.runtime.run_logs import info_in_deployed_runs
from pipelines.runtime.settings import Settings
from pipelines.store import retention, warehouse

log = logging.getLogger(__name__)


@task(cache_policy=NO_CACHE)
def prune_task(db_path: str, rules: retention.Retention, lock_timeout_s: float) -> dict:
    """Prune as of the data's end (the clock the rows were stamped with); {} on an empty warehouse."""
    with warehouse.open_warehouse(db_path, lock_timeout_s=lock_timeout_s) as con:
        # a reading dated past the wall clock stops it (the run fails, saying so): no history goes
        now = retention.clock(con)
        return {} if now is None else {"clock": now, "tables": retention.prune(con, now, rules)}


@flow(name="prune")
def prune_flow(db_path: str | None = None) -> dict:
    """Delete what the retention settings let go; returns ``{"clock", "tables": {table:
    {"deleted", "kept"}}}``, or ``{"skipped": why}``."""
    info_in_deployed_runs()
    settings = Settings.from_env()
    db_path = db_path or str(settings.db_path)  # a deployment names no path: HEADROOM_DB
    if settings.keep_days is None and settings.keep_data_days is None:
        log.info("prune: HEADROOM_KEEP_DAYS=all and HEADROOM_KEEP_DATA_DAYS=all: the warehouse keeps everything")
        return {"skipped": "HEADROOM_KEEP_DAYS=all"}
    if not Path(db_path).exists():  # nothing to prune, and no empty warehouse made by looking
        return {"skipped": f"no warehouse at {db_path}"}
    out = prune_task(db_path, retention.Retention(settings.keep_days, settings.keep_data_days),
                     settings.lock_timeout_s)
    deleted = {t: c["deleted"] for t, c in out.get("tables", {}).items() if c["deleted"]}
    log.info("prune: as of %s, deleted %s", out.get("clock"), deleted or "nothing")
    return out
