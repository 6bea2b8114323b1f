"""Model selection on one series group: backtest each model, pick the champion by backtest
error, fit it and forecast. The train flow and ``headroom plan replay`` both choose models so;
results are plain dicts and frames (the shell writes them)."""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from forecasters.backtest import cross_validation
from forecasters.base import BaseForecaster
from forecasters.demand import at_points
from forecasters.metrics import evaluate, wape
from forecasters.registry import create
from forecasters.serialize import dumps
from forecasters.validation import HistoryError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainSpec:
    """How a group is backtested and fitted."""

    horizon: int = 24
    freq: str = "h"
    season_length: int = 24
    windows: int = 2
    seed: int = 0


def make_model(name: str, spec: TrainSpec) -> BaseForecaster:
    """A registered forecaster configured by ``spec``."""
    return create(name, horizon=spec.horizon, freq=spec.freq, season_length=spec.season_length,
                              seed=spec.seed)


def min_points(names: list[str], spec: TrainSpec) -> int:
    """The fewest points a series needs for every model in ``names`` to be backtested with
    ``spec`` (held-out windows, then the model's own history and one calibration origin)."""
    held_out = spec.horizon + (spec.windows - 1) * spec.horizon  # windows step one horizon apart
    return held_out + max(make_model(n, spec).min_points() for n in names)


def trainable(history: pd.DataFrame, names: list[str], spec: TrainSpec) -> pd.DataFrame:
    """``history`` without the series too short to backtest with any of ``names`` (the least
    needy model's :func:`min_points`), named in a warning: one young pool must not stop the
    fleet's training. A series long enough for some models only is kept: the others leave it
    out of their backtest (see :func:`backtest_model`). HistoryError when none is long enough."""
    need = min(min_points([n], spec) for n in names)
    sizes = history.groupby("unique_id").size()
    short = sizes[sizes < need]
    if len(short) == len(sizes):
        raise HistoryError(
            f"every series is shorter than the {need} points {' or '.join(names)} need for {spec.windows} backtest "
            f"window(s) of {spec.horizon} (longest: {int(sizes.max())}); use more history (ingest more, or a longer "
            "--lookback-days), fewer backtest windows or a shorter horizon")
    if short.empty:
        return history
    log.warning("%d series shorter than the %d points the backtest needs are left out of this run: %s",
                len(short), need, ", ".join(f"{u} ({n})" for u, n in short.head(5).items()))
    return history[~history["unique_id"].isin(short.index)].reset_index(drop=True)


def backtest_model(history: pd.DataFrame, name: str, spec: TrainSpec, unscored: pd.MultiIndex | None = None
                   ) -> tuple[dict, pd.DataFrame, dict[str, str]]:
    """Cross-validate one model on one group: (metrics dict, backtest frame, {series the model
    could not fit and was scored without: why}). HistoryError when it fits none of them.
    Forecasts of the ``unscored`` (unique_id, ds) points (filled gaps: no actual) are left out
    of the metrics, and their ``y`` is NaN in the frame."""
    model = make_model(name, spec)
    cv = cross_validation(model, history, h=spec.horizon, n_windows=spec.windows, skip_unfit=True)
    skipped = cv.attrs["skipped"]
    scored = cv
    if unscored is not None and len(unscored):
        blank = at_points(cv, unscored)
        cv.loc[blank, "y"] = np.nan
        scored = cv[~blank]
    if scored.empty:
        raise HistoryError(f"{name}: every point its backtest windows forecast is a filled gap, with no reading "
                           "to score against")
    metrics = evaluate(scored, history, spec.season_length).iloc[0].to_dict()
    metrics["seconds"] = cv.attrs["seconds"]
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in metrics.items()}, cv, skipped


def unfit(history: pd.DataFrame, name: str, spec: TrainSpec, skipped: dict[str, str]) -> dict[str, str]:
    """Of the series a backtest left out (``skipped``), those its champion fit would leave
    without a forecast too: too short for the model's fit on all of the history, or long
    enough for its backtest (left out for another reason: an optimiser that failed). A young
    pool of 96 hours fits ``lgbm`` (72), though its backtest needs 120."""
    if not skipped:
        return {}
    need, backtest_need = make_model(name, spec).min_points(), min_points([name], spec)
    sizes = history.groupby(history["unique_id"].astype(str)).size()
    return {u: why for u, why in skipped.items()
            if not need <= int(sizes.get(str(u), 0)) < backtest_need}


def fit_model(history: pd.DataFrame, name: str, spec: TrainSpec) -> tuple[bytes, pd.DataFrame, dict]:
    """Fit on all of ``history`` and forecast: (artifact bytes, forecast frame, params)."""
    model = make_model(name, spec).fit(history)
    return dumps(model), model.predict(spec.horizon), model.flat_params()


def fit_champion(group: str, history: pd.DataFrame, name: str, spec: TrainSpec, metrics: dict,
                 skipped: list[str] | tuple[str, ...] = ()) -> dict:
    """Fit a group's champion and forecast, without the series its backtest left out
    (``skipped``): the dict :func:`save_run` takes."""
    if skipped:
        history = history[~history["unique_id"].astype(str).isin(list(skipped))]
    while True:  # a series the fit cannot take after all is left out, with a line, as backtests do
        try:
            artifact, forecast, params = fit_model(history, name, spec)
            break
        except HistoryError as exc:
            ids = set(history["unique_id"].astype(str))
            if exc.series is None or exc.series not in ids or len(ids) < 2:
                raise
            log.warning("%s: series %s left out of its fit (%s)", name, exc.series, exc)
            history = history[history["unique_id"].astype(str) != exc.series]
    return {
        "group": group, "kind": name, "series": sorted(history["unique_id"].unique().tolist()),
        "data_cutoff": history["ds"].max(), "params": params, "metrics": metrics,
        "artifact": artifact, "forecast": forecast,
    }


FALLBACK_SCORE = "mae"  # WAPE is undefined where the actuals sum to 0 (a pool idle all along)


def pick_champions(metrics: pd.DataFrame, score: str = "wape") -> dict[str, str]:
    """Best model per group (columns ``group, model, <score>``, and ``mae``); lower is
    better, ties go to the earlier row. A group whose ``score`` is missing for every model
    (WAPE of a series idle in every window) is ranked by MAE instead; one with neither gets none."""
    out: dict[str, str] = {}
    for group, g in metrics.groupby("group", sort=True):
        for col in (score, FALLBACK_SCORE):
            valid = g.dropna(subset=[col]) if col in g else g.iloc[0:0]
            if not valid.empty:
                out[str(group)] = valid.loc[valid[col].idxmin(), "model"]
                break
    return out


def _common_series(mine: list[dict]) -> set[str] | None:
    """The series every one of a group's backtests (results, ``cv`` frames) scored, where some
    left series out; None where they did not, a frame is missing, or they share none (they
    left out different series between them: each is judged on its own, as before)."""
    if len(mine) < 2 or not any(r.get("skipped") for r in mine) or any(r.get("cv") is None for r in mine):
        return None
    common = set.intersection(*(set(r["cv"].loc[r["cv"]["y"].notna(), "unique_id"].astype(str)) for r in mine))
    return common or None


def _on_common_series(rows: list[dict], results: list[dict], score: str) -> list[dict]:
    """``rows`` rescored, group by group, on the series every one of its models' backtests
    scored (:func:`_common_series`): a WAPE on fewer series is no rival's."""
    scored = {(r["group"], r["model"]): r for r in results if not r.get("error")}
    out = []
    for group in dict.fromkeys(row["group"] for row in rows):
        mine = [row for row in rows if row["group"] == group]
        common = _common_series([scored[(group, row["model"])] for row in mine])
        if common is None:
            out += mine
            continue
        for row in mine:
            cv = scored[(group, row["model"])]["cv"]
            f = cv[cv["y"].notna() & cv["unique_id"].astype(str).isin(common)]
            y, yhat = f["y"].to_numpy(dtype=float), f["mean"].to_numpy(dtype=float)
            out.append({**row, score: wape(y, yhat), FALLBACK_SCORE: float(np.mean(np.abs(y - yhat)))})
    return out


def champions_from(results: list[dict], score: str = "wape") -> dict[str, str]:
    """Champions from backtest results (dicts with group, model and metrics; ``error`` when the
    model fit none of the group's series, ``skipped`` when its backtest left some out,
    ``unfit`` those its fit on all of the history would leave out too, and ``cv`` its backtest
    frame). Where a backtest left series out, the group's models are compared on the series
    all of them scored; a model whose fit would leave series without a forecast is champion
    only where no model forecasts all of them. (One young pool that ``lgbm`` backtests
    without moved every pool of its group to seasonal naive.)"""
    rows = [{"group": r["group"], "model": r["model"], score: r["metrics"].get(score),
             FALLBACK_SCORE: r["metrics"].get(FALLBACK_SCORE), "skipped": bool(r.get("skipped")),
             "whole": not r.get("unfit", r.get("skipped"))}
            for r in results if not r.get("error")]
    if not rows:
        return {}
    rows = _on_common_series(rows, results, score)
    table = pd.DataFrame(rows).astype({score: float, FALLBACK_SCORE: float})
    whole = pick_champions(table[table["whole"]], score)
    rest = pick_champions(table[~table["group"].isin(list(whole))], score)
    return {g: (whole | rest)[g] for g in sorted(whole | rest)}


def left_out_lines(results: list[dict]) -> dict[str, list[str]]:
    """Per group, one line for each model left out of it (``error``) and each series a model
    left out (``skipped``): what the train summary says."""
    out: dict[str, list[str]] = {}
    for r in results:
        unfit = r.get("unfit", r.get("skipped", {}))
        lines = ([f"{r['model']}: left out ({r['error']})"] if r.get("error") else
                 [f"{r['model']}: series {u} left out{'' if u in unfit else ' of its backtest, not its fit'} ({why})"
                  for u, why in r.get("skipped", {}).items()])
        out.setdefault(r["group"], []).extend(lines)
    for group, n in _compared_on(results).items():  # the champion's choice is not the WAPEs shown
        out[group].append(f"champion chosen on the {n} series every model's backtest scored (each WAPE above is "
                          "over the model's own series)")
    return out


def _compared_on(results: list[dict]) -> dict[str, int]:
    """Per group whose models were compared on their common series, how many those were."""
    scored = [r for r in results if not r.get("error")]
    out = {}
    for group in dict.fromkeys(r["group"] for r in scored):
        common = _common_series([r for r in scored if r["group"] == group])
        if common is not None:
            out[group] = len(common)
    return out


def run_summary(run_id: str, info: dict, groups: dict[str, pd.DataFrame], names: list[str],
                best: dict[str, str], metrics: dict[tuple[str, str], dict], saved: dict,
                left_out: dict[str, list[str]] | None = None) -> dict:
    """What the train flow returns: the run, its series, each group's champion and scores,
    what each group's models left out (``left_out``: one line each), and the rows written
    (the rows ``save_run`` wrote)."""
    return {
        "run_id": run_id,
        "series": info["series"],
        "data_cutoff": str(info["data_cutoff"]),
        "groups": {
            g: {"champion": best.get(g), "model_id": saved["model_ids"].get(g),
                "wape": metrics.get((g, best.get(g)), {}).get("wape"),
                "scores": {n: metrics.get((g, n), {}).get("wape") for n in names},
                "left_out": (left_out or {}).get(g, [])}
            for g in groups
        },
        "rows": {k: v for k, v in saved.items() if k in ("models", "forecasts", "backtests")},
        "superseded": saved["superseded"],
        "retired": saved["retired"],
    }
