"""headroom's log lines in a deployed flow run's logs in the Prefect API.

Prefect sends its own ``prefect.*`` loggers to the API. ``PREFECT_LOGGING_EXTRA_LOGGERS``
(set to :data:`EXTRA_LOGGERS` by ``prefect.yaml`` and ``headroom serve``) hands headroom's
loggers the same API handler, but in Prefect 3 it leaves their level alone: they stay at
the root's WARNING, and their INFO lines (what each flow did) never reach the API.
:func:`info_in_deployed_runs` raises them to INFO in a run of a deployment only, so a
command's console (``headroom run`` and the rest, quiet without ``-v``) is untouched.
"""
from __future__ import annotations

import logging

HEADROOM_LOGGERS = ("pipelines", "forecasters", "anomaly", "planner")
EXTRA_LOGGERS = ",".join(HEADROOM_LOGGERS)


def in_deployed_run() -> bool:
    """Whether this is a run of a deployment (served, or from ``prefect.yaml`` on a worker)."""
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    return not (ctx is None or ctx.flow_run is None or ctx.flow_run.deployment_id is None)


def info_in_deployed_runs() -> None:
    """In a run of a deployment (served, or from ``prefect.yaml`` on a worker), headroom's
    loggers log at INFO; elsewhere nothing changes. Call it inside the flow."""
    if not in_deployed_run():
        return
    for name in HEADROOM_LOGGERS:
        logger = logging.getLogger(name)
        if logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)
