"""The ``report`` flow: read the warehouse, render report.html, write it and the
recommendation exports (CSV and Parquet per kind) atomically.

Tasks are thin wrappers of :mod:`pipelines.report.data` and :mod:`pipelines.report.html`.
The page is dated by the warehouse's data cutoff, not the wall clock, so re-running
over the same warehouse writes byte-identical files.
"""
from __future__ import annotations

import logging
from pathlib import Path

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from pipelines.report import data as report_io
from pipelines.report import html as report_html
from pipelines.runtime.run_logs import info_in_deployed_runs
from pipelines.runtime.settings import Settings
from pipelines.store import warehouse

log = logging.getLogger(__name__)


@task(cache_policy=NO_CACHE)
def load_task(db_path: str, lock_timeout_s: float) -> report_io.ReportData:
    """The report's frames, from a read-only connection."""
    if not Path(db_path).exists():
        raise FileNotFoundError(f"{db_path}: no warehouse (run headroom ingest or headroom run first)")
    with warehouse.open_warehouse(db_path, read_only=True, lock_timeout_s=lock_timeout_s) as con:
        return report_io.load_report_data(con)


@task(cache_policy=NO_CACHE)
def render_task(data: report_io.ReportData) -> str:
    """The HTML page."""
    return report_html.render_report(data)


@task(cache_policy=NO_CACHE)
def write_task(out_dir: str, html: str, data: report_io.ReportData) -> dict:
    """report.html and recommendations_<kind>.csv/.parquet, each written atomically."""
    return report_io.write_report(out_dir, html, data.recommendations)


@flow(name="report")
def report_flow(db_path: str | None = None, out_dir: str | None = None) -> dict:
    """Write the HTML report and the latest plan run's recommendation exports to
    ``out_dir`` (default: the report_dir setting). Works on a partial warehouse: sections
    without data say which stage to run.

    Returns ``{"html": path, "files": [export paths], "sections": {name: count}}``.
    """
    info_in_deployed_runs()
    settings = Settings.from_env()
    db_path = db_path or str(settings.db_path)  # a deployment names no path: HEADROOM_DB
    folder = str(out_dir or settings.report_dir)
    data = load_task(db_path, settings.lock_timeout_s)
    page = render_task(data)
    written = write_task(folder, page, data)
    out = {**written, "sections": report_html.section_counts(data)}
    log.info("report: %s", out)
    return out
