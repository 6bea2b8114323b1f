"""The report's inputs and outputs: frames read from the warehouse, recommendation
payloads flattened into columns, and atomic writers for the report files.

Rendering lives in :mod:`pipelines.report.html`; the flow is :mod:`pipelines.flows.report`.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pandas as pd

from forecasters.demand import blank_filled
from pipelines.runtime.outputs import check_writable, write_set
from pipelines.store import demand, replays, warehouse
from pipelines.store.models import CHAMPION_FORECASTS_SQL, LATEST_RUN_FORECASTS_SQL

log = logging.getLogger(__name__)

HISTORY_DAYS = 7
# what every export row carries before its payload: where it comes from and what it means
PROVENANCE = ("run_id", "kind", "key", "model_id", "model_note", "generated_at", "data_cutoff", "lookback_days",
              "currency", "unit", "reason")
CURRENCY = "USD"  # the catalog's prices, as the planner reads them
UNITS = {"gpu": "GPU", "cpu": "vCPU", "mem": "GiB"}  # demand units per resource
# why a row has no model: what it was priced on, "{basis}" the demand path's days (see _model_note)
NO_MODEL = {"allocation": "priced on the demand path: {basis}, no model of its own",
            "reservation": "priced on the demand path: {basis}, no model of its own",
            "spot": "priced on the spot prices of price_lookback and the demand path: {basis}, no model of its own",
            "prescale": "no champion forecast for this series: the schedule follows recent demand",
            "unplanned": "not planned: see reason"}
# AWS Cost Explorer's names for the reservation figures
RESERVATION_NAMES = {"monthly_savings": "estimated_monthly_savings", "savings_pct": "estimated_savings_pct"}
# a CSV cell a spreadsheet would run as a formula (OWASP: CSV injection)
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")

NODE_COUNTS_SQL = """
SELECT resource, count(DISTINCT node_id) AS nodes FROM utilization
WHERE ts >= ?::TIMESTAMP GROUP BY resource
"""

HEATMAP_SQL = """
SELECT cluster, pool, node_id, date_trunc('hour', ts) AS hour,
       avg(CASE WHEN capacity > 0 THEN used / capacity END) AS util
FROM utilization
WHERE resource = ? AND ts >= ?::TIMESTAMP
GROUP BY cluster, pool, node_id, date_trunc('hour', ts)
ORDER BY cluster, pool, node_id, hour
"""

ALERTS_SQL = """
SELECT fingerprint, kind, entity, severity, probability, window_start, window_end, summary, runbook,
       status, starts_at, ends_at, labels
FROM alerts ORDER BY starts_at, fingerprint
"""

LATEST_PLAN_SQL = """
SELECT run_id, kind, key, payload, model_id, data_cutoff, created_at FROM recommendations
WHERE run_id = (SELECT run_id FROM recommendations ORDER BY created_at DESC, run_id DESC LIMIT 1)
ORDER BY kind, key
"""

CHAMPIONS_SQL = """
SELECT target AS "group", kind, model_id, data_cutoff, metrics FROM models
WHERE is_champion ORDER BY target, model_id
"""


# every model the champion's train run backtested on the champion's series: its pooled WAPE
# (as the champion was picked) and the number of backtest windows
RIVALS_SQL = """
WITH champ AS (SELECT model_id FROM models WHERE is_champion),
runs AS (SELECT f.model_id, max(f.run_id) AS run_id FROM forecasts f JOIN champ USING (model_id) GROUP BY f.model_id),
ids AS (SELECT DISTINCT f.model_id, f.run_id, f.unique_id FROM forecasts f JOIN runs USING (model_id, run_id))
SELECT ids.model_id, b.model, sum(abs(b.y - b.mean)) / nullif(sum(abs(b.y)), 0) AS wape,
       count(DISTINCT b.cutoff) AS windows
FROM backtests b JOIN ids ON b.run_id = ids.run_id AND b.unique_id = ids.unique_id
WHERE b.y IS NOT NULL GROUP BY ids.model_id, b.model ORDER BY ids.model_id, wape, b.model
"""


@dataclass(frozen=True)
class ReportData:
    """Everything the report shows, read from the warehouse at one moment."""

    data_cutoff: pd.Timestamp | None
    counts: dict[str, int]
    forecasts: pd.DataFrame
    history: pd.DataFrame
    heatmap: pd.DataFrame
    heatmap_resource: str | None
    alerts: pd.DataFrame
    champions: pd.DataFrame
    plan_run: str | None
    plan_cutoff: pd.Timestamp | None = None  # the plan's data cutoff: its last complete hour of demand
    recommendations: dict[str, pd.DataFrame] = field(default_factory=dict)
    replays: pd.DataFrame = field(default_factory=pd.DataFrame)  # latest replay per series, a row per strategy
    replay_capacity: dict[str, pd.DataFrame] = field(default_factory=dict)  # by replay_id: ts, demand, planned, ...


def no_negative_zero(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` whose float values are never ``-0.0`` (a rounded tiny negative,
    an old payload): exports show ``0.0``. NaN stays NaN."""
    out = frame.copy()
    for col in out.columns:
        if pd.api.types.is_float_dtype(out[col]):
            out[col] = out[col] + 0.0  # -0.0 + 0.0 is 0.0 in IEEE arithmetic
        elif out[col].dtype == object:
            out[col] = out[col].map(lambda v: v + 0.0 if isinstance(v, float) else v)
    return out


def _read(con: duckdb.DuckDBPyConnection, table: str, sql: str, params: list | None = None) -> pd.DataFrame:
    """``sql`` over ``table``, or an empty frame when the table does not exist yet."""
    if not warehouse.has_table(con, table):
        return pd.DataFrame()
    return warehouse.query(con, sql, params)


def load_report_data(con: duckdb.DuckDBPyConnection, history_days: int = HISTORY_DAYS) -> ReportData:
    """Read the report's frames: champion forecasts with recent actuals, the node-by-hour
    utilization of the widest resource, alerts, champions and the latest plan run."""
    counts = {}
    if warehouse.has_table(con, "utilization"):
        tables = warehouse.table_counts(con)
        counts = {str(t): int(n) for t, n in zip(tables["table"], tables["rows"])}
    last = con.execute("SELECT max(ts) FROM utilization").fetchone()[0] if counts else None
    cutoff = None if last is None else pd.Timestamp(last)

    forecasts = _read(con, "forecasts", CHAMPION_FORECASTS_SQL)
    if forecasts.empty:
        forecasts = _read(con, "forecasts", LATEST_RUN_FORECASTS_SQL)
    history = pd.DataFrame(columns=["unique_id", "ds", "y"])
    if not forecasts.empty and cutoff is not None:
        since = min(forecasts["ds"].min(), cutoff) - pd.Timedelta(days=history_days)
        # an interpolated hour is no reading: the chart leaves a gap there
        history = blank_filled(demand.load_demand(con, since=since))
        history = history[history["unique_id"].isin(set(forecasts["unique_id"]))].reset_index(drop=True)

    resource, heatmap = None, pd.DataFrame()
    if cutoff is not None:
        since = cutoff.floor("h") - pd.Timedelta(days=history_days) + pd.Timedelta(hours=1)
        resource = pick_heatmap_resource(warehouse.query(con, NODE_COUNTS_SQL, [since]))
        if resource is not None:
            heatmap = warehouse.query(con, HEATMAP_SQL, [resource, since])

    plan = _read(con, "recommendations", LATEST_PLAN_SQL)
    replayed, drawn = replays.latest_replays(con) if warehouse.has_table(con, "replays") else (pd.DataFrame(), {})
    return ReportData(
        data_cutoff=cutoff,
        counts=counts,
        forecasts=forecasts,
        history=history,
        heatmap=heatmap,
        heatmap_resource=resource,
        alerts=_read(con, "alerts", ALERTS_SQL),
        champions=champion_metrics(_read(con, "models", CHAMPIONS_SQL),
                                   _read(con, "backtests", RIVALS_SQL) if warehouse.has_table(con, "forecasts") else None),
        plan_run=None if plan.empty else str(plan["run_id"].iloc[0]),
        plan_cutoff=None if plan.empty or plan["data_cutoff"].isna().all()
        else pd.Timestamp(plan["data_cutoff"].dropna().iloc[0]),
        recommendations=flatten_recommendations(plan),
        replays=replayed,
        replay_capacity=drawn,
    )


def pick_heatmap_resource(node_counts: pd.DataFrame) -> str | None:
    """gpu when any node reports GPUs (the expensive, failure-prone part of the fleet),
    else the resource reported by the most nodes."""
    if node_counts.empty:
        return None
    ranked = node_counts.assign(_not_gpu=node_counts["resource"] != "gpu").sort_values(
        ["_not_gpu", "nodes", "resource"], ascending=[True, False, True]
    )
    return str(ranked["resource"].iloc[0])


def champion_metrics(models: pd.DataFrame, rivals: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per champion with its backtest metrics parsed out of the JSON column, and, from
    ``rivals`` (:data:`RIVALS_SQL`), the backtest windows and every model's WAPE beside it."""
    cols = ["group", "kind", "model_id", "data_cutoff", "wape", "mase", "smape", "msis", "coverage_80", "coverage_95"]
    if models.empty:
        return pd.DataFrame(columns=cols)
    parsed = [json_object(m) for m in models["metrics"]]
    out = models.drop(columns=["metrics"]).reset_index(drop=True)
    for name in cols[4:]:
        out[name] = pd.to_numeric(pd.Series([p.get(name) for p in parsed], dtype=object), errors="coerce")
    if rivals is None or rivals.empty:
        return out[cols]
    by = {m: g for m, g in rivals.groupby("model_id", sort=False)}
    out["windows"] = [int(by[m]["windows"].max()) if m in by else None for m in out["model_id"]]
    # a WAPE with no demand to weigh it (a drained pool's all-zero series) is none, not "nan"
    out["all_models_wape"] = [", ".join(f"{r.model} {r.wape:.3f}" if pd.notna(r.wape) else f"{r.model} - (no demand)"
                                        for r in by[m].itertuples()) if m in by else "" for m in out["model_id"]]
    return out[[*cols, "windows", "all_models_wape"]]


def json_object(text: object) -> dict:
    """A JSON-object column value (metrics, payload, labels), or {} (unparseable ones logged)."""
    if not isinstance(text, str) or not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        log.warning("unparseable JSON in the warehouse: %.80s", text)
        return {}
    return value if isinstance(value, dict) else {}


def flatten_recommendations(plan: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Per recommendation kind, the provenance columns (:data:`PROVENANCE`: run, kind, key,
    model or ``none`` with ``model_note`` saying why, generation time and data cutoff (naive
    UTC, as everywhere inside; :func:`export_frame` writes them with their offset), lookback,
    currency, unit, a one-sentence reason), then the payload as columns (a payload field
    with one of those names gets a ``payload_`` prefix)."""
    out: dict[str, pd.DataFrame] = {}
    if plan.empty:
        return out
    for kind, rows in plan.groupby("kind", sort=True):
        rows = rows.sort_values("key").reset_index(drop=True)
        payloads = [json_object(p) for p in rows["payload"]]
        lookback = pd.Series([p.pop("lookback_days", None) for p in payloads], dtype="Int64")
        reason = pd.Series([p.pop("reason", None) or p.get("headline") or None for p in payloads], dtype=object)
        payload = pd.json_normalize(payloads, sep="_") if any(payloads) else pd.DataFrame(index=rows.index)
        payload = payload.rename(columns={c: f"payload_{c}" for c in payload.columns if c in PROVENANCE})
        for col in [c for c in payload.columns if c == "ts" or c.endswith(("_ts", "_at"))]:
            payload[col] = pd.to_datetime(payload[col], errors="coerce")  # typed like data_cutoff in Parquet
        # every kind's key starts with its series, cluster/pool/resource
        resource = payload["resource"] if "resource" in payload else rows["key"].str.split("/").str[2]
        model = rows["model_id"].where(rows["model_id"].notna() & (rows["model_id"].astype(str) != ""), None)
        meta = pd.DataFrame({
            "run_id": rows["run_id"], "kind": str(kind), "key": rows["key"],
            "model_id": model.fillna("none"),
            "model_note": [_model_note(str(kind), p) if m is None else "" for m, p in zip(model, payloads)],
            "generated_at": pd.to_datetime(rows["created_at"] if "created_at" in rows else rows["data_cutoff"]),
            "data_cutoff": pd.to_datetime(rows["data_cutoff"]), "lookback_days": lookback,
            "currency": CURRENCY, "unit": [UNITS.get(r, r) if isinstance(r, str) else None for r in resource],
            "reason": reason,
        })
        out[str(kind)] = no_negative_zero(pd.concat([meta, payload.reset_index(drop=True)], axis=1))
    return out


def _model_note(kind: str, payload: dict) -> str:
    """Why a row has no model, and the demand path it was priced on: the lookback's history and
    the forecast after it, the history alone, or the days since a level shift."""
    if payload.get("shift_days") is not None:
        basis = f"the {payload['shift_days']} day(s) since the pool's level shifted"
    elif payload.get("forecast_hours") == 0:
        basis = "the lookback's history alone (no forecast beyond the data cutoff)"
    else:
        basis = "the lookback's history and the champions' forecast mean after it"
    return NO_MODEL.get(kind, "no model").format(basis=basis)


def export_frame(kind: str, frame: pd.DataFrame) -> pd.DataFrame:
    """A kind's rows as the exports write them: timestamps timezone-aware UTC (written with
    ``+00:00``), reservation figures under AWS Cost Explorer's names."""
    out = no_negative_zero(frame)  # whatever the caller passes: no -0.0 in a file
    for col in out.columns:
        if pd.api.types.is_datetime64_dtype(out[col]):
            out[col] = out[col].dt.tz_localize("UTC")
    return out.rename(columns=RESERVATION_NAMES) if kind == "reservation" else out


def spreadsheet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """Text cells that start as a formula would (``=``, ``+``, ``-``, ``@``, tab, return)
    prefixed with ``'``, so a spreadsheet shows them as text instead of running them."""
    out = frame.copy()
    for col in out.columns:
        if out[col].dtype == object or pd.api.types.is_string_dtype(out[col]):
            out[col] = out[col].map(lambda v: f"'{v}" if isinstance(v, str) and v.startswith(FORMULA_START) else v)
    return out


REPORT_KINDS = ("allocation", "prescale", "reservation", "spot", "unplanned")


def check_out_dir(out_dir: str | Path) -> None:
    """Refuse an output folder the report cannot be written into whole: a file in its place,
    or a folder where report.html or an export goes (checked before anything is written, so
    a failure never leaves new exports beside an old page)."""
    folder = Path(out_dir)
    for p in (folder, *folder.parents):
        if p.exists() and not p.is_dir():
            raise NotADirectoryError(f"report folder {folder}: {p} is a file, not a folder")
    names = ["report.html", *(f"recommendations_{k}.{ext}" for k in REPORT_KINDS for ext in ("csv", "parquet"))]
    blocked = [n for n in names if (folder / n).is_dir()]
    if blocked:
        raise IsADirectoryError(f"report folder {folder}: {blocked[0]} is a folder; the report writes a file there")
    check_writable(folder / "report.html")  # the folder (or the nearest that exists) is writable


def write_report(out_dir: str | Path, html: str, recommendations: dict[str, pd.DataFrame]) -> dict:
    """Write report.html and recommendations_<kind>.csv/.parquet; return the paths."""
    folder = Path(out_dir)
    check_out_dir(folder)
    writes: dict[Path, Callable[[Path], object]] = {}
    for kind, frame in sorted(recommendations.items()):
        frame = export_frame(kind, frame)
        safe = spreadsheet_safe(frame)  # CSV only: Parquet cells are typed, never run
        writes[folder / f"recommendations_{kind}.csv"] = lambda tmp, f=safe: f.to_csv(tmp, index=False)
        writes[folder / f"recommendations_{kind}.parquet"] = lambda tmp, f=frame: f.to_parquet(tmp, index=False)
    page = folder / "report.html"
    writes[page] = lambda tmp: tmp.write_text(html, encoding="utf-8")
    # exports are the latest plan run's: a kind it does not have leaves no file behind
    stale = tuple(folder / f"recommendations_{k}.{ext}" for k in REPORT_KINDS if k not in recommendations
                  for ext in ("csv", "parquet"))
    # one set: a failure (a full disk) leaves the old page and its exports, never a mix
    files = write_set(writes, remove=stale)
    return {"html": str(page), "files": [str(f) for f in files if f != page]}
