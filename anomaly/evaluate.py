"""End-to-end evaluations behind ``headroom {bursts,faults,spikes} evaluate`` (pure)."""
from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.metrics import precision_recall_fscore_support, roc_auc_score

from anomaly.base import infer_freq
from anomaly.burst_baselines import PeltDetector, ThresholdDetector
from anomaly.burst_eval import METRIC_COLUMNS as BURST_COLUMNS
from anomaly.burst_eval import score_bursts, thin_events
from anomaly.cusum import CusumDetector, CusumPolicy, events_frame, fit_state, refit_times, refit_window
from anomaly.fault_eval import METRIC_COLUMNS as FAULT_COLUMNS
from anomaly.fault_eval import NEVER, dedup_alerts, point_auc, score_alerts
from anomaly.fault_features import FaultPolicy, build_fault_features, label_failures
from anomaly.faults import FaultPredictor, time_split
from anomaly.spike_features import SpikePolicy, build_spike_frame
from anomaly.spikes import PersistenceSpikeBaseline, SpikePredictor

SPIKE_COLUMNS = ["model", "auc", "base_rate", "threshold", "precision", "recall", "f1", "alerts", "positives", "n",
                 "threshold_rule"]

log = logging.getLogger(__name__)


def split_history(series: pd.DataFrame, train_fraction: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The first ``train_fraction`` of each series' points for calibration, the rest to score."""
    if not 0 < train_fraction < 1:
        raise ValueError("train_fraction must be in (0, 1)")
    hist, test = [], []
    for _uid, g in series.sort_values(["unique_id", "ds"]).groupby("unique_id", sort=True):
        cut = max(int(len(g) * train_fraction), 2)
        hist.append(g.iloc[:cut])
        test.append(g.iloc[cut:])
    return pd.concat(hist, ignore_index=True), pd.concat(test, ignore_index=True)


def evaluate_bursts(
    series: pd.DataFrame,
    windows: Mapping[str, Sequence[tuple[pd.Timestamp, pd.Timestamp]]],
    policy: CusumPolicy,
    train_fraction: float = 0.15,
    pelt_jump: int = 5,
    labels: Mapping[str, Sequence[pd.Timestamp]] | None = None,
    only: Sequence[str] | None = None,
) -> pd.DataFrame:
    """CUSUM vs the 3-sigma rule vs Pelt on the same residuals: one row per detector (``only``:
    those named, of ``cusum``, ``threshold_3sigma``, ``pelt``).

    The baselines' events are thinned with the policy's cooldown too, so all three get
    the same "one alarm per incident" rule. A series whose calibration share is too short
    to calibrate is left out of all three (a warning names it and why, and its windows are
    not counted); when none is left, the first reason is raised as a ``ValueError``.
    Delays run from the labelled anomalies in ``labels`` where given (see ``score_bursts``);
    ``attrs["delays"]`` holds each detector's delays, for pooling over several calls.
    """
    hist, test = split_history(series, train_fraction)
    unfit = uncalibrated(hist, policy)
    if unfit:
        if len(unfit) == hist["unique_id"].nunique():
            raise ValueError(next(iter(unfit.values())))
        log.warning("%d series cannot be calibrated and are left out of every detector, with their windows: %s",
                    len(unfit), "; ".join(list(unfit.values())[:3]) + (" ..." if len(unfit) > 3 else ""))
        series = series[~series["unique_id"].astype(str).isin(unfit)]
        hist, test = split_history(series, train_fraction)
    spans = {
        str(uid): (g["ds"].min(), g["ds"].max(), infer_freq(series.loc[series["unique_id"] == uid, "ds"]))
        for uid, g in test.groupby("unique_id") if len(g)
    }
    detectors = [
        ("cusum", CusumDetector(policy)),
        ("threshold_3sigma", ThresholdDetector(3.0, policy.season_length, policy.n_seasons)),
        ("pelt", PeltDetector(policy.season_length, policy.n_seasons, target_arl=policy.target_arl,
                              jump=pelt_jump)),
    ]
    if only is not None:
        detectors = [(name, det) for name, det in detectors if name in only]
    cooldown = pd.Timedelta(policy.cooldown)
    rows = []
    for name, det in detectors:
        if name == "cusum":  # it skips the history it was fitted on, and recalibrates on it
            events = det.fit(hist).detect(pd.concat([hist, test], ignore_index=True))[0]
        else:
            events = thin_events(_refitted_predictions(det, hist, test, policy), cooldown)
        rows.append(score_bursts(name, events, windows, spans, labels))
    out = pd.DataFrame(rows, columns=BURST_COLUMNS)
    out.attrs["delays"] = {r["detector"]: r["delays"] for r in rows}
    return out


def uncalibrated(hist: pd.DataFrame, policy: CusumPolicy) -> dict[str, str]:
    """Series of ``hist`` the CUSUM cannot calibrate on (too few points, one timestamp),
    each with the reason (the baselines need no more than it does)."""
    fixed = replace(policy, k=0.0, h=0.0)  # as the baselines fit: the length checks, no k/h search
    out: dict[str, str] = {}
    for uid, g in hist.sort_values(["unique_id", "ds"]).groupby("unique_id", sort=True):
        try:
            fit_state(str(uid), g["ds"], g["y"], fixed, warn=False)
        except ValueError as exc:
            out[str(uid)] = str(exc) if str(uid) in str(exc) else f"series {str(uid)!r}: {exc}"
    return out


def _refitted_predictions(det: ThresholdDetector | PeltDetector, hist: pd.DataFrame, test: pd.DataFrame,
                          policy: CusumPolicy) -> pd.DataFrame:
    """A baseline's events over ``test``, refitted as the CUSUM is recalibrated: every
    ``policy.recalibrate_every`` after the end of each series' history, on the
    ``policy.calibration_span`` before that time, so the detectors are compared under the
    same calibration schedule (a window too short to fit keeps the last fit). Pelt keeps
    the penalty of its first fit (refitting it, a bisection over Pelt runs, takes minutes a
    series); its residual scale is refitted like the others'."""
    if policy.recalibrate_every is None:
        return det.fit(hist).predict(test)
    parts = []
    for uid, h in hist.groupby("unique_id", sort=True):
        t = test[test["unique_id"] == uid]
        if t.empty:
            continue
        whole = pd.concat([h, t], ignore_index=True)
        first, last = h["ds"].max(), t["ds"].max()
        series_det = clone(det).fit(h)
        if isinstance(series_det, PeltDetector):
            series_det.set_params(penalty=series_det.penalties_[str(uid)])
        edges = [first, *refit_times(first, last, policy), last]
        for start, end in zip(edges[:-1], edges[1:]):
            if start != first:
                with contextlib.suppress(ValueError):  # too short to fit: it keeps the states it had
                    series_det.fit(whole[refit_window(whole["ds"], start, policy)])
            chunk = t[(t["ds"] > start) & (t["ds"] <= end)]
            if not chunk.empty:
                parts.append(series_det.predict(chunk))
    parts = [p for p in parts if len(p)]  # concat warns of (and will change for) empty frames
    return pd.concat(parts, ignore_index=True) if parts else events_frame([])


FAULT_EVAL_COLUMNS = [*FAULT_COLUMNS, "threshold", "threshold_rule"]


def fault_settings(model: FaultPredictor, new_devices: bool = False) -> dict[str, object]:
    """What a fit chose inside its training rows: tree settings, threshold, rule, OOF metrics;
    with ``new_devices``, those that score devices it never saw (the same where it has no
    predictor of their own)."""
    if new_devices and getattr(model, "new_devices_", None) is not None:
        model = model.new_devices_
    folds = model._policy().threshold_folds
    return {"params": dict(model.params_), "threshold": float(model.threshold_), "threshold_rule": model.threshold_rule_,
            "oof_metrics": dict(model.oof_metrics_), "threshold_folds": "time" if folds == "auto" else folds}


def fit_for(policy: FaultPolicy, train: pd.DataFrame, failures: pd.DataFrame, scored: pd.DataFrame,
            n_jobs: int = 1) -> FaultPredictor:
    """The predictor ``policy`` trains on ``train``, fitting under ``"auto"`` only the half that
    scores ``scored``'s devices: the time-fold one when the fit sees all of them, the
    device-fold one when it sees none (unless no device fold scored a failure, where "auto"
    scores new devices as known ones). The same scores as the whole "auto" fit, half the fits."""
    if policy.threshold_folds != "auto":
        return FaultPredictor(policy, n_jobs=n_jobs).fit(train, failures)
    seen = set(train["device_id"].astype(str))
    wanted = set(scored["device_id"].astype(str))
    if wanted <= seen:
        return FaultPredictor(replace(policy, threshold_folds="time"), n_jobs=n_jobs).fit(train, failures)
    if not wanted & seen and len(seen) >= 2:
        model = FaultPredictor(replace(policy, threshold_folds="device"), n_jobs=n_jobs)
        model.scope_ = "on devices new to the model"  # as "auto" fits it: a fit set aside says so at INFO only
        model.fit(train, failures)
        if model.threshold_rule_ != "default":
            return model
        return FaultPredictor(replace(policy, threshold_folds="time"), n_jobs=n_jobs).fit(train, failures)
    return FaultPredictor(policy, n_jobs=n_jobs).fit(train, failures)


def evaluate_faults(
    telemetry: pd.DataFrame,
    failures: pd.DataFrame,
    policy: FaultPolicy,
    test_fraction: float = 0.3,
    events: pd.DataFrame | None = None,
    devices: pd.DataFrame | None = None,
    test_devices: Sequence[str] | None = None,
    n_jobs: int = 1,
) -> pd.DataFrame:
    """Train on the early span, score alerts on the late span: one metrics row.

    With ``test_devices`` those devices are held out of training too (time and device split).
    The fit sees the training rows and the failures they can know only (its settings and
    threshold are chosen inside them: ``attrs["settings"]``).
    """
    feats = build_fault_features(telemetry, policy, events=events, devices=devices)
    lead, horizon = pd.Timedelta(policy.lead), pd.Timedelta(policy.horizon)
    held = list(test_devices) if test_devices is not None else None
    train, test, _cut = time_split(feats, test_fraction, horizon, held)
    model = fit_for(policy, feats[train], failures, feats[test], n_jobs)
    scored = model.predict(feats[test])
    # each row at its own threshold (a device the fit never saw: its predictor's)
    alerts = dedup_alerts(scored.assign(score=scored["score"] - scored["threshold"]), 0.0, horizon)
    test_rows = feats[test]
    devs = sorted(test_rows["device_id"].astype(str).unique())
    span = (test_rows["ts"].min(), test_rows["ts"].max())
    row = score_alerts(alerts, failures, lead, horizon, span, devs)
    row["auc"] = point_auc(label_failures(test_rows, failures, policy), scored["score"].to_numpy())
    new = scored["new_device"].to_numpy(dtype=bool)
    # the settings that scored the test rows: the known devices', and new ones' where any
    chosen = [fault_settings(model, new_devices=all_new) for all_new in (False, True) if (new == all_new).any()]
    if len(chosen) == 2:
        chosen[1]["new_devices"] = sorted(scored.loc[new, "device_id"].astype(str).unique())
    row.update(threshold=chosen[0]["threshold"],
               threshold_rule=" ".join([chosen[0]["threshold_rule"]] + [f"new:{c['threshold_rule']}" for c in chosen[1:]]))
    out = pd.DataFrame([row], columns=FAULT_EVAL_COLUMNS)
    out.attrs["censored_alerts"] = int(row["censored_alerts"])  # left out of alerts and precision
    out.attrs["settings"] = chosen[0]
    out.attrs["new_device_settings"] = chosen[1] if len(chosen) == 2 else None
    out.attrs.update(scored_span=span, scored_devices=devs)  # what was scored, for a caller's comparison
    return out


def device_folds(device_ids: Sequence[str], folds: int, seed: int = 0) -> list[list[str]]:
    """``folds`` groups of the devices, drawn at random (``seed``), as even in size as can be."""
    unique = np.unique(np.asarray([str(d) for d in device_ids], dtype=object))
    k = min(folds, len(unique))
    if k < 2:
        raise ValueError(f"a device split needs two devices or more, got {len(unique)}")
    order = np.random.default_rng(seed).permutation(unique)
    return [sorted(str(d) for d in order[f::k]) for f in range(k)]


def evaluate_faults_by_device(
    telemetry: pd.DataFrame,
    failures: pd.DataFrame,
    policy: FaultPolicy,
    folds: int = 5,
    events: pd.DataFrame | None = None,
    devices: pd.DataFrame | None = None,
    seed: int = 0,
    n_jobs: int = 1,
) -> pd.DataFrame:
    """Devices never seen: ``folds`` groups of devices in turn are held out, a model is trained
    on the others (rows whose labels are known: up to one horizon before the data end) and
    scores the held-out devices over the whole span; alerts and failures are pooled into one
    metrics row (AUC over the pooled rows). Each fold's choices (settings, threshold, rule)
    are made inside its training devices only: ``attrs["folds"]``. ``threshold`` is the
    median of the folds' thresholds, ``threshold_rule`` the rules with their counts."""
    feats = build_fault_features(telemetry, policy, events=events, devices=devices)
    lead, horizon = pd.Timedelta(policy.lead), pd.Timedelta(policy.horizon)
    ids = feats["device_id"].astype(str)
    known = (feats["ts"] <= feats["ts"].max() - horizon).to_numpy()
    parts, per_fold = [], []
    for group in device_folds(ids.unique(), folds, seed):
        held = ids.isin(group).to_numpy()
        try:
            model = fit_for(policy, feats[~held & known], failures, feats[held], n_jobs)
        except ValueError as exc:
            if "nothing to learn" not in str(exc):
                raise
            log.warning("device fold %s: no failure among the other devices; its devices get no alert", group)
            parts.append(feats.loc[held, ["device_id", "ts"]].assign(score=0.0, threshold=NEVER))
            per_fold.append({"devices": group, "params": None, "threshold": NEVER, "threshold_rule": "none"})
            continue
        parts.append(model.predict(feats[held])[["device_id", "ts", "score", "threshold"]])
        per_fold.append({"devices": group, **fault_settings(model, new_devices=True)})
    scored = pd.concat(parts, ignore_index=True)
    # each fold's alerts at its own threshold: pooled as alerts, not as scores
    alerts = dedup_alerts(scored.assign(score=scored["score"] - scored["threshold"]), 0.0, horizon)
    devs = sorted(ids.unique())
    span = (feats["ts"].min(), feats["ts"].max())
    row = score_alerts(alerts, failures, lead, horizon, span, devs)
    order = feats.set_index(["device_id", "ts"]).index
    pooled = scored.set_index(["device_id", "ts"])["score"].reindex(order).to_numpy()
    row["auc"] = point_auc(label_failures(feats, failures, policy), pooled)
    rules = pd.Series([f["threshold_rule"] for f in per_fold]).value_counts()
    row.update(threshold=float(np.median([f["threshold"] for f in per_fold])),
               threshold_rule=" ".join(f"{r}x{n}" for r, n in rules.items()))
    out = pd.DataFrame([row], columns=FAULT_EVAL_COLUMNS)
    out.attrs["censored_alerts"] = int(row["censored_alerts"])
    out.attrs["folds"] = per_fold
    out.attrs.update(scored_span=span, scored_devices=devs)
    return out


def evaluate_spikes(
    prices: pd.DataFrame,
    policy: SpikePolicy,
    on_demand: pd.DataFrame | None = None,
    test_fraction: float = 0.3,
) -> pd.DataFrame:
    """Time split (with a horizon-long embargo): the predictor (``headroom``) and persistence,
    one row each. Each model's alert threshold is chosen on the training span only (the
    predictor's out-of-fold scores, persistence's own), for ``policy.target_precision``,
    else the best F1 there (``threshold_rule``); the metrics are per market-hour of the
    test span at that threshold: ``base_rate`` is the share of them with a spike ahead,
    ``alerts`` how many the model flags."""
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    frame = build_spike_frame(prices, policy, on_demand)
    start, end = frame["ts"].min(), frame["ts"].max()
    cut = start + (end - start) * (1 - test_fraction)
    labelled = frame["label"].notna()
    train = frame[labelled & (frame["ts"] < cut - pd.Timedelta(policy.horizon))]
    test = frame[labelled & (frame["ts"] >= cut)]
    y = test["label"].to_numpy(dtype=int)
    rows = []
    models = (("headroom", SpikePredictor(policy)),
              ("persistence", PersistenceSpikeBaseline(policy.k, policy.target_precision)))
    for name, model in models:
        model.fit(train)
        score, pred = model.predict_proba(test), model.predict(test)
        p, r, f, _ = precision_recall_fscore_support(y, pred, average="binary", zero_division=0)
        auc = float(roc_auc_score(y, score)) if 0 < y.sum() < len(y) else float("nan")
        rows.append({"model": name, "auc": auc, "base_rate": float(y.mean()) if len(y) else float("nan"),
                     # no alert: precision is 0/0, not "every alert wrong" (as faults evaluate leaves it)
                     "threshold": float(model.threshold_), "precision": float(p) if pred.sum() else float("nan"),
                     "recall": float(r),
                     "f1": float(f), "alerts": int(pred.sum()), "positives": int(y.sum()), "n": int(len(y)),
                     "threshold_rule": model.threshold_rule_})
    return pd.DataFrame(rows, columns=SPIKE_COLUMNS)
