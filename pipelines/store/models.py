"""The forecasting model registry in the warehouse: ``models``, ``forecasts`` and ``backtests``.

A model id is a hash of what defines the model (kind, group, series, data cutoff,
params), so re-running training over the same data upserts the same rows.
"""
from __future__ import annotations

import hashlib
import json
import logging
from datetime import UTC, datetime

import duckdb
import pandas as pd

import forecasters
from pipelines.store import warehouse

log = logging.getLogger(__name__)

# the champions' newest forecasts, read by the planner and the report
CHAMPION_FORECASTS_SQL = """
WITH champ AS (SELECT model_id, target FROM models WHERE is_champion),
runs AS (
    SELECT f.model_id, max(f.run_id) AS run_id
    FROM forecasts f JOIN champ USING (model_id) GROUP BY f.model_id
)
SELECT f.run_id, champ.target AS "group", f.unique_id, f.ds, f.model, f.model_id,
       f.mean, f.lo_80, f.hi_80, f.lo_95, f.hi_95
FROM forecasts f JOIN runs USING (model_id, run_id) JOIN champ USING (model_id)
ORDER BY "group", f.unique_id, f.ds
"""

# forecasts written without a registered champion: the newest run, grouped by model
LATEST_RUN_FORECASTS_SQL = """
SELECT run_id, model AS "group", unique_id, ds, model, model_id, mean, lo_80, hi_80, lo_95, hi_95
FROM forecasts WHERE run_id = (SELECT max(run_id) FROM forecasts)
ORDER BY "group", unique_id, ds
"""


def train_run_id(data_cutoff: pd.Timestamp, settings: dict) -> str:
    """``train-<cutoff>-<digest of the run's settings>``: the same data and settings give the
    same id (a re-run replaces its rows), other models, groupings or horizons another."""
    blob = json.dumps(settings, sort_keys=True, default=str)
    return f"train-{pd.Timestamp(data_cutoff):%Y%m%dT%H%M}-{hashlib.sha256(blob.encode()).hexdigest()[:8]}"


def model_id_for(kind: str, target: str, series: list[str], data_cutoff: pd.Timestamp, params: dict) -> str:
    """Deterministic model id."""
    blob = json.dumps([kind, target, sorted(series), str(data_cutoff), params], sort_keys=True, default=str)
    return f"{kind}-{hashlib.sha256(blob.encode()).hexdigest()[:16]}"


def register_model(
    con: duckdb.DuckDBPyConnection,
    *,
    kind: str,
    target: str,
    series: list[str],
    data_cutoff: pd.Timestamp,
    params: dict,
    metrics: dict,
    artifact: bytes,
    champion: bool = False,
) -> str:
    """Upsert one model row (inside the caller's transaction if any); returns its id.

    A new champion demotes the previous champion of ``target`` and any champion that
    serves one of the same series under another grouping (``train --group-by`` changed),
    so each series has one champion; but it never replaces a champion fitted on newer data
    (a slow train that started before new data came in finishes after one that saw it): it
    is then registered without the flag (see :func:`is_champion`). The same model again
    (same kind, target, series, cutoff and params: the same id) fitted to the same artifact
    keeps its row, created_at included; its champion flag is set, and its metrics replaced
    only when its scores changed (another backtest setting), not for wall times alone."""
    model_id = model_id_for(kind, target, series, data_cutoff, params)
    if champion:
        current = con.execute(
            "SELECT model_id, target, series, data_cutoff FROM models WHERE is_champion AND model_id <> ?",
            [model_id],
        ).fetchall()
        mine = set(series)
        rivals = [(mid, cut) for mid, tgt, ser, cut in current
                  if tgt == target or mine & set(json.loads(ser or "[]"))]
        if any(pd.Timestamp(cut) > pd.Timestamp(data_cutoff) for _, cut in rivals):
            champion = False
        elif rivals:
            con.execute("UPDATE models SET is_champion = FALSE WHERE model_id IN (SELECT unnest(?))",
                        [[mid for mid, _ in rivals]])
    stored = con.execute("SELECT artifact, metrics FROM models WHERE model_id = ?", [model_id]).fetchone()
    if stored is not None and stored[0] is not None and bytes(stored[0]) == bytes(artifact):
        text = json.dumps(metrics, sort_keys=True, default=str)
        if _scores(stored[1]) != _scores(text):
            con.execute("UPDATE models SET metrics = ? WHERE model_id = ?", [text, model_id])
        con.execute("UPDATE models SET is_champion = ? WHERE model_id = ?", [champion, model_id])
        return model_id  # a refit that is not bit-identical replaces the row: artifact and forecasts agree
    row = pd.DataFrame([{
        "model_id": model_id, "kind": kind, "target": target, "series": json.dumps(sorted(series)),
        "data_cutoff": pd.Timestamp(data_cutoff), "params": json.dumps(params, sort_keys=True, default=str),
        "metrics": json.dumps(metrics, sort_keys=True, default=str), "artifact": artifact,
        "is_champion": champion, "created_at": datetime.now(UTC).replace(tzinfo=None),
    }])
    warehouse.upsert(con, "models", row)
    return model_id


def _scores(metrics_json: str | None) -> dict:
    """A stored metrics object without its wall times (which differ on every run)."""
    found = json.loads(metrics_json or "{}")
    return {k: v for k, v in found.items() if "second" not in k}


def is_champion(con: duckdb.DuckDBPyConnection, model_id: str) -> bool:
    found = con.execute("SELECT is_champion FROM models WHERE model_id = ?", [model_id]).fetchone()
    return bool(found and found[0])


def load_model(con: duckdb.DuckDBPyConnection, model_id: str) -> forecasters.BaseForecaster:
    """The fitted forecaster stored under ``model_id``."""
    found = con.execute("SELECT artifact FROM models WHERE model_id = ?", [model_id]).fetchone()
    if found is None or found[0] is None:
        raise KeyError(f"no model artifact {model_id!r} in the registry")
    return forecasters.loads(bytes(found[0]))


def champion_id(con: duckdb.DuckDBPyConnection, target: str) -> str | None:
    """The current champion's model id for a series group, if any."""
    found = con.execute(
        "SELECT model_id FROM models WHERE target = ? AND is_champion ORDER BY created_at DESC LIMIT 1", [target]
    ).fetchone()
    return None if found is None else str(found[0])


def save_run(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    champions: list[dict],
    backtests: list[pd.DataFrame],
    run_cutoff: pd.Timestamp | None = None,
) -> dict:
    """Register each group's champion and write its forecasts and all backtests, in one
    transaction. Each champion dict has group, kind, series, data_cutoff, params, metrics,
    artifact and forecast; returns row counts and ``model_ids`` per group. Rows an earlier
    run under the same id wrote are replaced as a whole (a series or model it had and this
    one lacks does not linger).

    Champions stay with the newest data: a group whose champion another run fitted on newer
    data keeps it (the group is listed under ``superseded``); once this run holds its
    champions, those of older data that it did not replace (a series left out since, or a
    group with no champion now) retire, so no forecast from stale data stays current."""
    counts: dict = {"models": 0, "forecasts": 0, "backtests": 0, "model_ids": {}, "superseded": [],
                    "retired": 0}
    with warehouse.transaction(con):
        for table in ("forecasts", "backtests"):
            con.execute(f"DELETE FROM {table} WHERE run_id = ?", [run_id])
        for champ in champions:
            model_id = register_model(
                con, kind=champ["kind"], target=champ["group"], series=champ["series"],
                data_cutoff=champ["data_cutoff"], params=champ["params"], metrics=champ["metrics"],
                artifact=champ["artifact"], champion=True,
            )
            rows = champ["forecast"].assign(run_id=run_id, model_id=model_id)
            # a model's forecasts are those of the run that fitted it last: another run with the
            # same champion (same data and params, other settings) must not leave a second set
            con.execute("DELETE FROM forecasts WHERE model_id = ? AND run_id <> ?", [model_id, run_id])
            counts["models"] += 1
            counts["model_ids"][champ["group"]] = model_id
            counts["forecasts"] += warehouse.upsert(con, "forecasts", rows)
            if not is_champion(con, model_id):
                counts["superseded"].append(champ["group"])
        if run_cutoff is not None and not counts["superseded"]:
            mine = list(counts["model_ids"].values())
            retired = con.execute(
                "UPDATE models SET is_champion = FALSE WHERE is_champion AND data_cutoff < ? "
                "AND model_id NOT IN (SELECT unnest(?::VARCHAR[])) RETURNING model_id",
                [pd.Timestamp(run_cutoff), mine]).fetchall()
            counts["retired"] = len(retired)
        for cv in backtests:
            counts["backtests"] += warehouse.upsert(con, "backtests", cv.assign(run_id=run_id))
    return counts
