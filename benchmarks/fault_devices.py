"""Device-split fault benchmarks (suites ``pdm-devices`` and ``synthetic-devices`` of
``benchmarks/detection.py``): machines never seen in training.

Each draw splits the devices into ``FOLDS`` random groups; each group in turn is scored
over the whole span by a model trained on the other devices (``evaluate_faults_by_device``,
what ``headroom faults evaluate --split device`` runs). The model's tree settings and alert
threshold are chosen inside its training devices only (inner purged time folds, inner
device folds, or "auto", the default, which scores devices it never saw as the device folds
do: ``threshold_folds``), so no figure comes from a choice that saw the devices
it is reported for. Events and alerts are pooled over the groups and the draws. Each model
scores either with the mean of its out-of-fold models or refit on all its rows
(``FaultPolicy.final_model``), side by side.
"""
from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

FOLDS = 5
DRAWS = (0, 1)
COLUMNS = ["data", "inner_folds", "final_model", "draw", "events", "caught", "recall", "alerts", "precision", "auc",
           "median_lead_hours", "threshold_rule", "recall_lo", "recall_hi", "precision_lo", "precision_hi"]


def wilson(hits: float, n: float) -> tuple[float, float]:
    """90% Wilson score interval of a proportion ``hits / n`` (NaNs when ``n`` is 0)."""
    from statsmodels.stats.proportion import proportion_confint

    if n <= 0:
        return float("nan"), float("nan")
    lo, hi = proportion_confint(hits, n, alpha=0.1, method="wilson")
    return float(lo), float(hi)


def device_split_table(variants: dict[str, dict], out_csv: Path, windows: tuple[str, ...],
                       inner: tuple[str, ...] = ("time", "auto"),
                       finals: tuple[str, ...] = ("folds", "refit"), pool_as: str | None = None) -> pd.DataFrame:
    """One row per (data variant, inner folds, final model, draw), then one pooled row per
    variant, inner folds and final model (and with ``pool_as``, one per inner folds and final
    model over all the variants, named so: draws of one generator); written to ``out_csv``
    and printed. The pooled rows carry 90% Wilson intervals of recall and precision; the
    draws score the same failures again, so each interval is computed on the pooled counts
    divided by the number of draws."""
    from anomaly.evaluate import evaluate_faults_by_device
    from anomaly.fault_features import FaultPolicy

    t0 = time.perf_counter()
    rows = []
    for name, data in variants.items():
        for folds in inner:
            for final in finals:
                policy = FaultPolicy(lead="30min", horizon="24h", windows=windows, threshold_folds=folds,
                                     final_model=final)
                for draw in DRAWS:
                    m = evaluate_faults_by_device(data["telemetry"], data["failures"], policy, FOLDS,
                                                  data.get("events"), data.get("devices"), seed=draw).iloc[0].to_dict()
                    rows.append({"data": name, "inner_folds": folds, "final_model": final, "draw": draw, **m})
    runs = pd.DataFrame(rows)
    keys = ["data", "inner_folds", "final_model"]
    pooled = [_pooled(g, dict(zip(keys, k))) for k, g in runs.groupby(keys, sort=False)]
    if pool_as is not None and len(variants) > 1:
        pooled += [_pooled(g, {"data": pool_as, "inner_folds": k[0], "final_model": k[1]})
                   for k, g in runs.groupby(keys[1:], sort=False)]
    table = pd.concat([runs, pd.DataFrame(pooled)], ignore_index=True)[COLUMNS]
    table.to_csv(out_csv, index=False)
    with pd.option_context("display.width", 250, "display.max_colwidth", 80):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"({time.perf_counter() - t0:.1f} s; {FOLDS} device folds x draws {DRAWS}; auc pooled = mean)\n",
          flush=True)
    return table


def pooled_counts(table: pd.DataFrame, **labels: object) -> dict:
    """Events, catches and alerts summed over ``table``'s runs (precision over all alerts,
    AUC the runs' mean)."""
    correct = (table["precision"].fillna(0) * table["alerts"]).round().sum()
    pooled = {**labels, "events": table["events"].sum(), "caught": table["caught"].sum(),
              "alerts": table["alerts"].sum(), "auc": table["auc"].mean()}
    pooled["recall"] = pooled["caught"] / max(pooled["events"], 1)
    pooled["precision"] = correct / pooled["alerts"] if pooled["alerts"] else float("nan")
    return pooled


def _pooled(g: pd.DataFrame, labels: dict) -> dict:
    """``pooled_counts`` of ``g``'s draws, with the median lead, the rules, and 90% Wilson
    intervals on the counts per draw (draws of one data variant score the same failures again)."""
    row = pooled_counts(g, **labels, draw="pooled")
    correct = row["precision"] * row["alerts"] if row["alerts"] else 0.0
    draws = len(DRAWS)
    r_lo, r_hi = wilson(row["caught"] / draws, row["events"] / draws)
    p_lo, p_hi = wilson(correct / draws, row["alerts"] / draws)
    return {**row, "median_lead_hours": g["median_lead_hours"].median(), "threshold_rule": " ".join(g["threshold_rule"]),
            "recall_lo": r_lo, "recall_hi": r_hi, "precision_lo": p_lo, "precision_hi": p_hi}


def synthetic_fleet(nodes: int, days: int, seed: int) -> dict:
    """The synthetic GPU fleet's telemetry (DCGM metrics) and failures."""
    from pipelines.synth.fleet import generate_fleet

    fleet = generate_fleet(nodes=nodes, days=days, seed=seed)
    print(f"synthetic fleet: {nodes} nodes, {days} days, seed {seed}: "
          f"{fleet['telemetry']['device_id'].nunique()} GPUs, {fleet['failures']['device_id'].nunique()} failed, "
          f"{len(fleet['failures'])} failures", flush=True)
    return {"telemetry": fleet["telemetry"], "failures": fleet["failures"]}
