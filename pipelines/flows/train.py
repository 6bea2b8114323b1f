"""The ``train`` flow: demand series -> backtest every enabled model per series group ->
champion by backtest WAPE -> fit, register, forecast.

Tasks are thin wrappers of :mod:`pipelines.store` reads and writes and :mod:`forecasters.selection`.
Backtests and fits of the (group, model) pairs are submitted together, so they fan
out over the task runner: a thread pool by default, Dask (prefect-dask) when the
settings say ``task_runner = "dask"``. Prophet-based models also fit their
per-series Prophets on ``n_jobs`` threads inside each task.
"""
from __future__ import annotations

import logging

import pandas as pd
from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import ThreadPoolTaskRunner

from forecasters import demand, selection
from forecasters.validation import HistoryError
from pipelines.runtime.progress import progress_bar
from pipelines.runtime.run_logs import info_in_deployed_runs
from pipelines.runtime.settings import Settings
from pipelines.store import demand as store_demand
from pipelines.store import models as model_store
from pipelines.store import warehouse

log = logging.getLogger(__name__)

# lean by default so that `headroom run` stays quick; --models enables any registered model
DEFAULT_MODELS = ("seasonal_naive", "lgbm", "prophet_lgbm")


def task_runner_for(settings: Settings) -> object:
    """The task runner the settings ask for (Dask needs the prefect-dask extra)."""
    if settings.task_runner == "dask":
        try:
            from prefect_dask import DaskTaskRunner
        except ImportError as exc:
            raise RuntimeError("task_runner=dask needs prefect-dask: pip install 'headroom[dask]'") from exc
        if settings.dask_address:
            return DaskTaskRunner(address=settings.dask_address)
        return DaskTaskRunner(cluster_kwargs={"n_workers": settings.max_workers, "processes": False})
    return ThreadPoolTaskRunner(max_workers=settings.max_workers)


def check_scheduler(address: str, timeout_s: float = 10.0) -> None:
    """RuntimeError naming HEADROOM_DASK_ADDRESS when nothing accepts a connection there (a
    TCP or TLS address; others are left to Dask): at once, not after the flow's 30 s timeout
    and a Dask traceback."""
    import socket

    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, location = parse_address(address)
        host, port = parse_host_port(location)
    except (ValueError, TypeError) as exc:
        raise RuntimeError(f"HEADROOM_DASK_ADDRESS={address!r} is not a Dask address (tcp://host:port)") from exc
    if scheme not in ("tcp", "tls"):
        return
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        raise RuntimeError(f"HEADROOM_DASK_ADDRESS={address}: no Dask scheduler answers there ({exc}); start one "
                           "(dask scheduler) or unset the setting to train on this machine") from exc


@task(cache_policy=NO_CACHE)
def load_demand_task(db_path: str, lookback_days: int | None) -> pd.DataFrame:
    """Hourly demand per cluster/pool/resource from the warehouse, without the series that
    stopped reporting; ValueError when no series is left."""
    with warehouse.open_warehouse(db_path) as con:
        return store_demand.load_training_demand(con, lookback_days, db_path)


@task(cache_policy=NO_CACHE)
def describe_task(frame: pd.DataFrame) -> dict:
    """Series count and data cutoff."""
    return demand.describe(frame)


@task(cache_policy=NO_CACHE)
def trainable_task(frame: pd.DataFrame, names: list[str], spec: selection.TrainSpec) -> pd.DataFrame:
    """The series long enough to backtest (the others are named in a warning)."""
    return selection.trainable(frame, names, spec)


@task(cache_policy=NO_CACHE)
def split_task(frame: pd.DataFrame, group_by: str) -> dict[str, pd.DataFrame]:
    """Series groups."""
    return demand.split_groups(frame, group_by)


@task(cache_policy=NO_CACHE, task_run_name="backtest {name} on {group}")
def backtest_task(group: str, history: pd.DataFrame, name: str, spec: selection.TrainSpec,
                  unscored: pd.MultiIndex | None = None) -> dict:
    """Cross-validate one model on one group; a model that fits none of its series is left
    out of the group (``error``), one that cannot fit some is scored without them (``skipped``);
    forecasts of the ``unscored`` points (interpolated hours) are not scored."""
    try:
        metrics, cv, skipped = selection.backtest_model(history, name, spec, unscored)
    except HistoryError as exc:
        log.warning("%s left out of group %s: %s", name, group, exc)
        return {"group": group, "model": name, "metrics": {}, "cv": None, "skipped": {}, "error": str(exc)}
    unfit = selection.unfit(history, name, spec, skipped)
    for uid, why in skipped.items():
        log.warning("%s: series %s left out of its backtest%s (%s)", name, uid, " and fit" if uid in unfit else "",
                    why)
    return {"group": group, "model": name, "metrics": metrics, "cv": cv, "skipped": skipped, "unfit": unfit}


@task(cache_policy=NO_CACHE, task_run_name="fit {name} on {group}")
def fit_task(group: str, history: pd.DataFrame, name: str, spec: selection.TrainSpec, metrics: dict,
             skipped: list[str]) -> dict:
    """Fit the champion on all of the group's data (but the series it left out) and forecast."""
    return selection.fit_champion(group, history, name, spec, metrics, skipped)


@task(cache_policy=NO_CACHE)
def save_task(db_path: str, run_id: str, champions: list[dict], backtests: list[pd.DataFrame],
              data_cutoff: pd.Timestamp) -> dict:
    """Write models, forecasts and backtests in one transaction."""
    with warehouse.open_warehouse(db_path) as con:
        return model_store.save_run(con, run_id, champions, backtests, data_cutoff)


@task(cache_policy=NO_CACHE)
def champions_task(results: list[dict]) -> dict[str, str]:
    """Champion model per group by backtest WAPE."""
    return selection.champions_from(results)


def _gather(futures: list, what: str) -> list:
    """The futures' results in order; a progress bar on a terminal."""
    with progress_bar(what, "done") as bar:
        out = []
        for f in futures:
            out.append(f.result())
            bar(len(out), len(futures))
    return out


@flow(name="train", task_runner=ThreadPoolTaskRunner(max_workers=2))
def train_flow(
    db_path: str | None = None,
    horizon: int = 24,
    models: list[str] | None = None,
    windows: int = 2,
    season_length: int = 24,
    group_by: str = "resource",
    lookback_days: int | None = 56,
    run_id: str | None = None,
    seed: int = 0,
) -> dict:
    """Backtest ``models`` (default DEFAULT_MODELS) per series group, pick champions by
    WAPE, fit them on all data and write forecasts for ``horizon`` hours.

    Returns ``{"run_id", "series", "groups": {group: {"champion", "model_id"?, "wape",
    "scores": {model: wape}}}, "rows": {"models", "forecasts", "backtests"}, "superseded":
    [group whose champion a run on newer data holds], "retired": n}`` (champions of older
    data this run did not replace, retired: see :func:`model_store.save_run`).
    """
    info_in_deployed_runs()
    db_path = db_path or str(Settings.from_env().db_path)  # a deployment names no path: HEADROOM_DB
    names = list(models or DEFAULT_MODELS)
    spec = selection.TrainSpec(horizon=horizon, freq="h", season_length=season_length, windows=windows, seed=seed)
    history = load_demand_task(db_path, lookback_days)
    unscored = demand.filled_points(history)  # interpolated hours: no actual to score against
    history = trainable_task(history, names, spec)
    info = describe_task(history)
    groups = split_task(history, group_by)
    futures = [backtest_task.submit(g, frame, n, spec, unscored) for g, frame in groups.items() for n in names]
    results = _gather(futures, "backtests")
    best = champions_task(results)
    metrics = {(r["group"], r["model"]): r["metrics"] for r in results}
    skipped = {(r["group"], r["model"]): sorted(r.get("unfit", {})) for r in results}  # left out of the fit
    fits = [fit_task.submit(g, groups[g], n, spec, metrics[(g, n)], skipped[(g, n)]) for g, n in best.items()]
    champions = _gather(fits, "fits")
    run = run_id or model_store.train_run_id(info["data_cutoff"], {
        "horizon": horizon, "models": sorted(names), "windows": windows, "season_length": season_length,
        "group_by": group_by, "lookback_days": lookback_days, "seed": seed})
    unscored = sorted(set(groups) - set(best))
    if unscored:
        log.warning("no model scored on group(s) %s: no champion, no forecast", ", ".join(unscored))
    backtests = [r["cv"] for r in results if r["cv"] is not None]  # a model left out of a group has none
    saved = save_task(db_path, run, champions, backtests, info["data_cutoff"])
    if saved["superseded"]:
        log.warning("a train on newer data holds the champions of %s: this run's models (data up to %s) are "
                    "registered, not champions", ", ".join(saved["superseded"]), info["data_cutoff"])
    summary = selection.run_summary(run, info, groups, names, best, metrics, saved,
                                    selection.left_out_lines(results))
    log.info("train: %s", summary)
    return summary
