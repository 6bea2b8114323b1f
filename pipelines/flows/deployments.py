"""Scheduled deployments of the flows: ingest hourly, train daily, detect every 15
minutes, plan, report and prune daily. ``headroom serve`` serves them from one process;
``prefect.yaml`` at the repository root declares the same ones for ``prefect deploy --all``
and a process work pool (a test checks the two agree)."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from pipelines.flows.run import stage_flow


@dataclass(frozen=True)
class Schedule:
    """One deployment: which flow, its cron, and which of its parameters come from settings."""

    name: str
    stage: str  # "ingest", "prune" or a stage of pipelines.flows.run.STAGES
    cron: str

    @property
    def daily(self) -> bool:
        """Whether the cron names an hour (a daily run): only those are read in the schedule's
        zone. One that runs every hour or quarter stays on UTC, where no hour repeats or goes
        missing: read in a zone, Prefect skips the hour a DST change repeats."""
        return self.cron.split()[1].isdigit()

    def zone(self, timezone: str) -> str:
        """The time zone this schedule's cron is read in, given the setting's."""
        return timezone if self.daily else "UTC"

    @property
    def entrypoint(self) -> str:
        """The flow, as ``prefect.yaml`` names it: the hourly ingest is the run flow with no
        later stages (it takes a folder; the ingest flow takes a list of files). A module path,
        not ``pipelines/flows/x.py:x_flow``: Prefect loads a file path as a second module named
        for the file (``report``), whose loggers are then not headroom's (``pipelines.*``)."""
        module = "run" if self.stage == "ingest" else self.stage
        return f"pipelines.flows.{module}:{module}_flow"


SCHEDULES = (
    Schedule("ingest-hourly", "ingest", "5 * * * *"),
    Schedule("train-daily", "train", "30 1 * * *"),
    Schedule("detect-15min", "detect", "*/15 * * * *"),
    Schedule("plan-daily", "plan", "30 3 * * *"),
    Schedule("report-daily", "report", "0 4 * * *"),
    Schedule("prune-daily", "prune", "30 4 * * *"),  # HEADROOM_KEEP_DAYS (pipelines/flows/prune.py)
)


def warehouse_tag(db_path: str) -> str:
    """``<file stem>-<6 hex of its absolute path>``: deployments are named for their warehouse,
    so two ``serve`` processes on one Prefect server, each with its own warehouse, never
    take over (and run) each other's."""
    resolved = str(Path(db_path).expanduser().resolve())
    stem = re.sub(r"[/%&<>]", "_", Path(db_path).stem)  # what Prefect refuses in a name ('ops&cap.duckdb')
    return f"{stem}-{hashlib.sha256(resolved.encode()).hexdigest()[:6]}"


def deployment_name(schedule: Schedule, db_path: str) -> str:
    return f"{schedule.name}-{warehouse_tag(db_path)}"


def build_deployments(db_path: str, input_dir: str | None, timezone: str = "UTC") -> list:
    """RunnerDeployments for every available flow (ingest only when an input folder is set),
    each named ``<schedule>-<warehouse tag>``, a daily cron read in ``timezone`` (an IANA name;
    see :meth:`Schedule.daily`)."""
    from prefect.schedules import Cron
    from prefect.types.entrypoint import EntrypointType

    from pipelines.flows.run import run_flow

    out = []
    for s in SCHEDULES:
        # an explicit zone: whoever reads the deployment sees which clock its cron is on
        schedules = [Cron(s.cron, timezone=s.zone(timezone))]
        # by module, as prefect.yaml does (Schedule.entrypoint): the run's loggers are headroom's
        common = {"name": deployment_name(s, db_path), "schedules": schedules,
                  "entrypoint_type": EntrypointType.MODULE_PATH}
        if s.stage == "ingest":
            if input_dir is None:
                continue
            out.append(run_flow.to_deployment(
                **common, parameters={"db_path": db_path, "input_dir": input_dir, "stages": []}))
            continue
        fn = stage_flow(s.stage)
        if fn is not None:
            out.append(fn.to_deployment(**common, parameters={"db_path": db_path}))
    return out
