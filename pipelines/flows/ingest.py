"""The ``ingest`` flow: one task per input file, run in order (DuckDB has one writer); the
files loaded already (same path, size and modification time) are found by one task first
and skipped without one of their own.

Tasks are thin: each opens the warehouse, calls :func:`pipelines.ingest.loading.ingest_file`
and closes it. Only I/O failures (a locked or unreachable file) are retried; a bad
file fails at once with its message."""
from __future__ import annotations

import logging
import time
import uuid
from dataclasses import asdict
from pathlib import Path

from prefect import flow, task
from prefect.client.schemas.objects import TaskRun
from prefect.states import State

from pipelines.ingest import loading as ingest
from pipelines.runtime import progress
from pipelines.store import warehouse

log = logging.getLogger(__name__)


def _io_only(_task: object, _run: TaskRun, state: State) -> bool:
    """Retry on passing I/O trouble, never on a bad file, and never on a lock: the connect has
    waited ``HEADROOM_LOCK_TIMEOUT`` already (retried, the wait was three times what the
    setting and the message say)."""
    exc = state.data if isinstance(state.data, BaseException) else state.result(raise_on_failure=False)
    if isinstance(exc, warehouse.WarehouseLockedError):
        return False
    return isinstance(exc, OSError) and not isinstance(exc, (ingest.IngestFileError, FileNotFoundError))


@task(retries=2, retry_delay_seconds=2, retry_condition_fn=_io_only, task_run_name="ingest {kind}: {path}")
def ingest_file_task(db_path: str, path: str, kind: str, fmt: str = "auto", strict: bool = False,
                     cluster: str = "default", pool: str = "default", lock_timeout_s: float | None = None,
                     run_id: str | None = None) -> dict:
    """Ingest one file; returns the IngestResult as a dict."""
    with warehouse.open_warehouse(db_path, lock_timeout_s=lock_timeout_s) as con:
        return asdict(ingest.ingest_file(con, path, kind, fmt, strict=strict, cluster=cluster, pool=pool,
                                         run_id=run_id))


@task
def unchanged_task(db_path: str, inputs: list[dict], lock_timeout_s: float | None = None) -> dict[int, dict]:
    """The inputs (by position) loaded already from the same path, size and modification
    time: skipped without a task of their own or a byte read."""
    if not Path(db_path).exists():
        return {}
    with warehouse.open_warehouse(db_path, lock_timeout_s=lock_timeout_s) as con:
        return {i: asdict(r) for i, r in ingest.unchanged_files(con, inputs).items()}


@task
def summary_task(db_path: str) -> dict:
    """Rows per table and the time span of each kind."""
    with warehouse.open_warehouse(db_path) as con:
        return warehouse.summary(con)


@flow(name="ingest", log_prints=False)
def ingest_flow(db_path: str, inputs: list[dict], strict: bool = False, lock_timeout_s: float | None = None,
                keep_going: bool = False) -> dict:
    """Ingest ``inputs`` (each ``{"kind", "path", "format"?, "cluster"?, "pool"?}``) in order.

    A file that cannot be used stops the flow, unless ``keep_going`` (the hourly ingest of a
    drop folder): then the other files are ingested (each file is its own transaction), and
    the flow fails at the end naming the files that did not go in, which are tried again
    next time."""
    results, failed = [], []
    run_id = uuid.uuid4().hex  # the files of this run, for status's "in the last ingest"
    known = unchanged_task(db_path, inputs, lock_timeout_s) if inputs else {}
    for i, item in enumerate(inputs):
        started = time.monotonic()
        if i in known:
            results.append(known[i])
            progress.stage_done("ingest-file", known[i], 0.0)
            continue
        try:
            results.append(
                ingest_file_task(db_path, str(item["path"]), item["kind"], item.get("format", "auto"), strict,
                                 item.get("cluster", "default"), item.get("pool", "default"), lock_timeout_s,
                                 run_id)
            )
        except (ingest.IngestFileError, ingest.StrictModeError) as exc:
            if not keep_going:
                raise
            log.error("%s not ingested: %s", item["path"], exc)
            failed.append(str(exc))  # the error names its file
            continue
        progress.stage_done("ingest-file", results[-1], time.monotonic() - started)
    summary = summary_task(db_path)
    if failed:
        raise IngestBatchError(f"{len(failed)} of {len(inputs)} file(s) not ingested (the others were): "
                               + "; ".join(failed))
    return {"files": results, "summary": summary}


class IngestBatchError(RuntimeError):
    """Some files of a batch could not be ingested; the rest were."""
