"""The whole pipeline once, in order: ingest -> train -> detect -> plan -> replay -> report.

Later stages are optional modules (pipelines/flows/<stage>.py exposing ``<stage>_flow``);
a stage whose module is absent is skipped, so each issue can land on its own."""
from __future__ import annotations

import importlib
import logging
import time
from pathlib import Path

from prefect import flow, task

from pipelines.flows.ingest import ingest_flow
from pipelines.ingest.loading import inputs_in
from pipelines.runtime import progress
from pipelines.runtime.run_logs import info_in_deployed_runs
from pipelines.runtime.settings import Settings
from pipelines.runtime.signals import is_interrupt
from pipelines.store import detection, warehouse

log = logging.getLogger(__name__)

STAGES = ("train", "detect", "plan", "replay", "report")



def stage_flow(stage: str):
    """The flow function of an optional stage, or None when it is not built."""
    name = f"pipelines.flows.{stage}"
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name:
            return None
        raise
    fn = getattr(module, f"{stage}_flow")
    if stage == "train":  # run and serve fan the fits out as `headroom train` does: threads, or Dask
        from pipelines.runtime.settings import Settings

        fn = fn.with_options(task_runner=module.task_runner_for(Settings.from_env()))
    return fn


@task
def data_end_task(db_path: str):
    """The newest reading in the warehouse (utilization, telemetry or spot prices)."""
    with warehouse.open_warehouse(db_path) as con:
        return detection.data_end(con)


@flow(name="headroom-run")
def run_flow(db_path: str | None = None, input_dir: str | None = None, stages: list[str] | None = None,
             strict: bool = False) -> dict:
    """Ingest every input in ``input_dir``, then run each available stage on the warehouse
    (``db_path`` and ``input_dir`` not given: the HEADROOM_DB and HEADROOM_INPUT_DIR settings).

    A stage that fails (data too short to forecast, say) is recorded as ``{"failed":
    message}`` and the later stages still run: a plan or a report does not need this run's
    forecasts. Ingest failing stops the run."""
    info_in_deployed_runs()
    settings = Settings.from_env()
    db_path = db_path or str(settings.db_path)
    input_dir = input_dir or (str(settings.input_dir) if settings.input_dir else None)
    if input_dir is None:
        raise ValueError("no input folder: pass input_dir, or set HEADROOM_INPUT_DIR where the flow runs")
    inputs = inputs_in(Path(input_dir))
    hourly = stages == []  # serve's ingest-hourly: a drop folder, watched
    if not inputs:
        if hourly:  # nothing dropped yet is a normal hour
            log.info("no input files in %s yet", input_dir)
            return {"ingest": {"files": [], "summary": None}}
        raise FileNotFoundError(f"no input files (utilization.csv, telemetry.csv, ...) in {input_dir}")
    # in a watched folder one bad file must not hold back the others, hour after hour
    started = time.monotonic()
    out = {"ingest": ingest_flow(db_path, inputs, strict=strict, keep_going=hourly)}
    progress.stage_done("ingest", out["ingest"], time.monotonic() - started)
    for stage in stages if stages is not None else STAGES:
        fn = stage_flow(stage)
        if fn is None:
            log.info("stage %s not available, skipped", stage)
            continue
        started = time.monotonic()
        try:
            # a run replays its inputs: detection is as of the data's end, not the wall clock
            # (a prediction about a window already past is not raised by a live detect)
            extra = {"now": data_end_task(db_path)} if stage == "detect" else {}
            out[stage] = fn(db_path=db_path, **extra)
        except Exception as exc:  # any stage's failure: the others still run, the caller reports it
            if is_interrupt(exc):
                raise  # Ctrl-C inside a DuckDB query: the run stops, as on any other interrupt
            log.error("stage %s failed: %s: %s", stage, type(exc).__name__, exc)
            log.info("stage %s failed", stage, exc_info=True)  # the traceback, with -v
            out[stage] = {"failed": f"{type(exc).__name__}: {exc}"}
        progress.stage_done(stage, out[stage], time.monotonic() - started)
    return out
