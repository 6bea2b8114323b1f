"""The detect flow's steps: each calls the pure core and turns results into Alerts.

Kept out of the flow module so the flow stays thin and these stay testable without
Prefect. Nothing here opens files; all SQL is in :mod:`pipelines.store.detection`.
"""
from __future__ import annotations

import json
import logging
import pickle
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime

import duckdb
import numpy as np
import pandas as pd

from anomaly.alert import Alert, severity_for
from anomaly.base import rough_duration, short_duration
from anomaly.cusum import MIN_RESIDUALS, CusumDetector, CusumPolicy, CusumState
from anomaly.fault_features import FaultPolicy, build_fault_features, feature_span, label_failures
from anomaly.faults import FaultPredictor
from anomaly.spike_features import SERIES_KEY, NoGridStep, SpikePolicy, build_spike_frame
from anomaly.spikes import SpikePredictor, market_probabilities
from pipelines.runtime.settings import Settings
from pipelines.store import detection
from pipelines.store.detection import FAULT_MODEL, SPIKE_MODEL

log = logging.getLogger(__name__)


BURST_RUNBOOK = "Check the pool's queue and recent deploys; pre-scale if the burst persists."
FAULT_RUNBOOK = "Drain the device's node, run diagnostics (dcgmi diag -r 3), open an RMA if it fails."
SPIKE_RUNBOOK = "Move interruptible load off this spot market or fall back to on-demand/other zones."


@dataclass(frozen=True)
class BurstResult:
    """New CUSUM states, alerts that hold now, and bursts that came and went."""

    states: dict[str, CusumState]
    current: list[Alert]
    ended: list[Alert]
    events: int
    history: frozenset[str] = frozenset()  # fingerprints of ended ones that are old news
    silent: tuple[str, ...] = ()  # series with a burst in progress and no data for BURST_SILENCE


BURST_SILENCE = pd.Timedelta(hours=6)  # a burst whose series says nothing for this long resolves
# a burst on a series whose newest data is longer than this before the clock is history, not news:
# old data read for the first time (a live detect over last year's export) records it but pages no
# one. Two days: more than a late node or a day's export delay
BURST_NEWS = pd.Timedelta(days=2)


def run_bursts(series: pd.DataFrame, states: dict[str, CusumState], policy: CusumPolicy,
               first_window: str = "1D", now: datetime | None = None) -> BurstResult:
    """Continue every series from its state; a new series is calibrated on all but its
    last ``first_window`` and then scanned over it. With ``now``, a burst in progress on a
    series whose last data is more than ``BURST_SILENCE`` old is no longer current (it
    resolves: its condition cannot be seen; ``silent`` names those series); and one that came
    and went on a series whose newest data is over ``BURST_NEWS`` old is history (recorded,
    not sent)."""
    states = dict(states)
    # a state calibrated under another season (``detect --season-length``) is recalibrated:
    # its baseline memory and threshold belong to the old policy
    stale = sorted(u for u, st in states.items()
                   if (st.season_length, st.n_seasons) != (policy.season_length, policy.n_seasons))
    if stale:
        log.warning("%d series were calibrated with season %d x %d, not %d x %d: recalibrating them (%s)",
                    len(stale), states[stale[0]].season_length, states[stale[0]].n_seasons,
                    policy.season_length, policy.n_seasons, ", ".join(stale[:3]))
        for uid in stale:
            del states[uid]
    fresh = series[~series["unique_id"].isin(list(states))]
    if not fresh.empty:
        cut = fresh.groupby("unique_id")["ds"].transform("max") - pd.Timedelta(first_window)
        hist = fresh[fresh["ds"] <= cut]
        # a series too young to calibrate waits for a later run: too few readings (hours no node
        # reported are NaN, no reading), or too few that a season before them gives a residual
        counts = hist["y"].notna().groupby(hist["unique_id"]).transform("sum")
        for uid, g in hist[counts >= policy.season_length + MIN_RESIDUALS + 1].groupby("unique_id", sort=True):
            try:
                states.update(CusumDetector(policy).fit(g).states_)
            except ValueError as exc:
                log.info("bursts: %s not calibrated yet: %s", uid, exc)
    events, new_states = CusumDetector(policy).detect(series, states=states)
    current, ended = [], []
    silent = []
    for uid, st in new_states.items():
        if (st.active and now is not None and st.last_ts is not None
                and pd.Timestamp(st.last_ts) < pd.Timestamp(now) - BURST_SILENCE):
            silent.append(uid)
            continue
        if st.active and st.active_onset is not None and st.active_detected is not None:
            current.append(_burst_alert(uid, st.active_onset, st.active_detected, "up" if st.active > 0 else "down",
                                        st.active_peak))
    current_fps = {a.fingerprint for a in current}
    for ev in events.itertuples(index=False):
        alert = _burst_alert(ev.unique_id, ev.onset, ev.detected_at, ev.direction, float(ev.peak_z))
        if alert.fingerprint not in current_fps:
            ended.append(alert)
    # on a series whose newest data is that old (an old export read for the first time, not a
    # schedule paused over fresh data): what it shows came and went long ago
    stale = {uid for uid, st in new_states.items() if now is not None and st.last_ts is not None
             and pd.Timestamp(st.last_ts) < pd.Timestamp(now) - BURST_NEWS}
    history = frozenset(a.fingerprint for a in ended if a.entity in stale)
    if history:
        log.warning("%d burst(s) on series whose newest data is over two days before %s (old data read for the "
                    "first time?): recorded as resolved, sent to no sink", len(history), now)
    return BurstResult(new_states, current, ended, len(events), history, tuple(silent))


def burst_read_since(states: dict[str, CusumState], policy: CusumPolicy) -> pd.Timestamp | None:
    """The first hour the CUSUM needs to continue ``states``: a refit reads the policy's
    ``calibration_span`` before each refit time, the first of which is a day after a state's
    last calibration; a day more keeps the window's edge (a gap cut in two) out of any refit.
    None (read everything) when some state has never been calibrated or belongs to another
    season (it is calibrated again, on all the history there is). A series whose state is
    more than a calibration span older than the newest (it stopped reporting) does not hold
    the window back: if it comes back, its refits read what the window holds."""
    span = pd.Timedelta(policy.calibration_span)
    anchors = []
    for st in states.values():
        anchor = st.calibrated_at if st.calibrated_at is not None else st.last_ts
        if anchor is None or (st.season_length, st.n_seasons) != (policy.season_length, policy.n_seasons):
            return None
        anchors.append(pd.Timestamp(anchor))
    if not anchors or policy.recalibrate_every is None:
        return None
    newest = max(anchors)
    oldest = min(a for a in anchors if a >= newest - span)
    return oldest + pd.Timedelta(policy.recalibrate_every) - span - pd.Timedelta(days=1)


def states_past(states: dict[str, CusumState], until: datetime | None) -> list[str]:
    """The series whose CUSUM state has already read past ``until`` (a replay's clock behind
    an earlier run): their hours up to the state are not read again."""
    if until is None:
        return []
    return sorted(uid for uid, st in states.items() if st.last_ts is not None and pd.Timestamp(st.last_ts) > until)


def _burst_alert(uid: str, onset: pd.Timestamp, detected: pd.Timestamp, direction: str,
                 peak_z: float | None = None) -> Alert:
    sev = "critical" if peak_z is not None and peak_z >= 6 else "warning"
    return Alert(
        kind="burst", entity=uid, window_start=onset, window_end=detected, severity=sev,
        summary=f"demand {direction}-burst on {uid} since {onset} (detected {detected})",
        runbook=BURST_RUNBOOK, labels=(("direction", direction),),
    )


def _bucket(ts: pd.Timestamp, horizon: pd.Timedelta) -> tuple[pd.Timestamp, pd.Timestamp]:
    """A prediction at ``ts`` for the next ``horizon``: the window starts at ``ts`` floored
    to a multiple of the horizon (so runs within one bucket share a fingerprint) and lasts
    two horizons, so it covers ``[ts, ts + horizon]`` wherever ``ts`` falls in its bucket."""
    start = ts.floor(horizon)
    return start, start + 2 * horizon


def train_faults(telemetry: pd.DataFrame | dict[str, pd.DataFrame], failures: pd.DataFrame, policy: FaultPolicy
                 ) -> tuple[FaultPredictor | None, pd.Timestamp | None]:
    """Fit on the history whose labels are known (rows at least one horizon old). Given a
    dict, its ``telemetry`` is taken out of it, so the raw readings (the bulk of the memory)
    are freed once the features are built."""
    if isinstance(telemetry, dict):
        telemetry = telemetry.pop("telemetry")
    if telemetry.empty or failures.empty:
        log.info("fault model not trained: %d telemetry rows, %d failures", len(telemetry), len(failures))
        return None, None
    feats = build_fault_features(telemetry, policy, max_rows=policy.max_train_rows)
    del telemetry
    cutoff = feats["ts"].max() - pd.Timedelta(policy.horizon)
    known = feats["ts"] <= cutoff
    if label_failures(feats[known], failures, policy).sum() == 0:
        log.info("fault model not trained: no failure inside a labelled horizon yet")
        return None, None
    # the fold models fit at once on HEADROOM_MAX_WORKERS threads, each alone giving the same model
    return FaultPredictor(policy, n_jobs=Settings.from_env().max_workers).fit(feats[known], failures), cutoff


def score_faults(model: FaultPredictor, telemetry: pd.DataFrame, policy: FaultPolicy,
                 failures: pd.DataFrame | None = None) -> list[Alert]:
    """Alerts for the devices whose latest row scores at or above the model's threshold,
    leaving out a device with a failure recorded at or after that row, up to the fleet's
    newest reading: what the row would predict has happened (a GPU that failed stops
    reporting, and its last row, just before the failure, scores high: it would be announced
    as about to fail for a day after it did). A failure recorded beyond the newest reading
    (history loaded whole) is what the row should predict, and does not hide it."""
    if telemetry.empty:
        return []
    latest = build_fault_features(telemetry, policy, latest_only=True).sort_values("ts", kind="stable")
    if failures is not None and not failures.empty:
        seen = failures[failures["ts"] <= latest["ts"].max()]
        last_failure = seen.groupby(seen["device_id"].astype(str))["ts"].max()
        failed = (latest["device_id"].astype(str).map(last_failure) >= latest["ts"]).to_numpy()
        if failed.any():
            log.info("fault scoring: %d device(s) failed after their latest reading, not scored (such as %s)",
                     int(failed.sum()), ", ".join(latest.loc[failed, "device_id"].astype(str).head(3)))
            latest = latest[~failed]
            if latest.empty:
                return []
    scored = model.predict(latest)
    scored["node_id"] = latest["node_id"].to_numpy() if "node_id" in latest else None
    horizon = pd.Timedelta(policy.horizon)
    hours = horizon / pd.Timedelta(hours=1)
    alerts = []
    # a threshold short of the target precision (the best-F1 fallback) warns, never pages
    new = scored["new_device"].to_numpy(dtype=bool)
    if new.any():
        log.info("fault scoring: %d device(s) new to the model (such as %s), scored at the threshold set for "
                 "devices it never saw", int(new.sum()), ", ".join(scored.loc[new, "device_id"].astype(str).head(3)))
    for r in scored[scored["alert"]].itertuples(index=False):
        fallback = r.rule == "max_f1_fallback"
        start, end = _bucket(pd.Timestamp(r.ts), horizon)
        node = getattr(r, "node_id", None)
        has_node = isinstance(node, str) and node != ""
        alerts.append(Alert(
            kind="hardware_fault", entity=str(r.device_id), window_start=start, window_end=end,
            severity="warning" if fallback else severity_for(float(r.score)),
            probability=float(np.clip(r.score, 0, 1)),
            summary=f"{r.device_id}{f' on {node}' if has_node else ''} likely to fail within {hours:g}h "
                    f"(p={r.score:.2f} at {r.ts}{'; below the target precision' if fallback else ''})",
            runbook=FAULT_RUNBOOK, labels=(("node", node),) if has_node else (),
        ))
    return alerts


def run_faults(telemetry: pd.DataFrame, failures: pd.DataFrame, policy: FaultPolicy) -> list[Alert]:
    """Train on the labelled history, then score each device's latest row."""
    model, _cutoff = train_faults(telemetry, failures, policy)
    return [] if model is None else score_faults(model, telemetry, policy, failures)


@dataclass
class ModelJob:
    """A model to train: what it is registered as, and ``train``, which reads nothing from the
    warehouse (its data was read with the job), so no connection is open while it fits."""

    kind: str
    target: str
    params: str
    train: Callable[[], tuple[object | None, pd.Timestamp | None]]
    inputs_mark: str | None = None  # the inputs read (detection.inputs_mark), kept with the model


def _model_job(con: duckdb.DuckDBPyConnection, kind: str, target: str, params: str, now: datetime,
               retrain_every: str, read: Callable[[], Callable[[], tuple[object | None, pd.Timestamp | None]]],
               until: datetime | None = None) -> ModelJob | None:
    """None when a ``kind`` model with ``params`` is younger than ``retrain_every`` (and, with
    ``until``, not from after it), or live and no input came in since it was trained; else the
    job, its data read now (``read`` returns the fit)."""
    if detection.latest_model(con, kind, params, now - pd.Timedelta(retrain_every), until) is not None:
        return None
    if until is None and _inputs_unchanged(con, kind, detection.latest_model_row(con, kind, params)):
        return None
    return ModelJob(kind, target, params, read(), detection.inputs_mark(con, kind))


def _inputs_unchanged(con: duckdb.DuckDBPyConnection, kind: str, row: dict | None) -> bool:
    """Whether no batch of ``kind``'s inputs was loaded since ``row``'s model read them: live,
    a retrain would learn from the very same rows, so the old model stands (and keeps its time)."""
    return row is not None and detection.model_inputs_mark(con, row["model_id"]) == detection.inputs_mark(con, kind)


def run_model_job(job: ModelJob) -> tuple[object | None, pd.Timestamp | None]:
    """Train ``job``'s model (no warehouse needed); (None, None) when there is nothing to learn."""
    return job.train()


def _finite(metrics: dict) -> dict:
    """``metrics`` with NaN and infinities as None (JSON has no such numbers)."""
    return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in metrics.items()}


def register_model(con: duckdb.DuckDBPyConnection, job: ModelJob, model: object | None,
                   cutoff: pd.Timestamp | None, now: datetime) -> bool:
    """Register a trained model; True when one was registered (False for nothing learnt)."""
    if model is None or cutoff is None:
        return False
    # with the out-of-fold alert metrics the threshold was set on (what to expect of the alerts)
    oof = _finite(getattr(model, "oof_metrics_", {}))
    rule = getattr(model, "threshold_rule_", None)
    newer = getattr(model, "new_devices_", None)  # the fault model's predictor of devices it never saw
    metrics = json.dumps({"threshold": model.threshold_, **({"threshold_rule": rule} if rule else {}),
                          **({"new_devices": {"threshold": newer.threshold_, "threshold_rule": newer.threshold_rule_,
                                              "out_of_fold": _finite(newer.oof_metrics_)}}
                             if newer is not None else {}),
                          **({"inputs_mark": job.inputs_mark} if job.inputs_mark else {}),
                          **({"params": model.params_} if hasattr(model, "params_") else {}),
                          **({"out_of_fold": oof} if oof else {})})
    # pickle: our own estimator, stored in and read back from our own warehouse only
    detection.save_model(con, job.kind, job.target, job.params, cutoff.to_pydatetime(), pickle.dumps(model),
                            metrics, now)
    return True


def _ensure(con: duckdb.DuckDBPyConnection, job: ModelJob | None, now: datetime) -> bool:
    if job is None:
        return False
    model, cutoff = run_model_job(job)
    return register_model(con, job, model, cutoff, now)


def fault_model_job(con: duckdb.DuckDBPyConnection, now: datetime, policy: FaultPolicy,
                    retrain_every: str, until: datetime | None = None) -> ModelJob | None:
    """The fault model to train on the data up to ``until`` (when given), its data read, or
    None when one with ``policy`` is younger than ``retrain_every``."""
    def read() -> Callable[[], tuple[object | None, pd.Timestamp | None]]:
        inputs = {"telemetry": detection.telemetry(con, until, newest=detection.TRAIN_READINGS)}
        failures = detection.failures(con, until)
        return lambda: train_faults(inputs, failures, policy)
    return _model_job(con, FAULT_MODEL, "device_telemetry", detection.policy_params(policy), now, retrain_every, read, until)


def ensure_fault_model(con: duckdb.DuckDBPyConnection, now: datetime, policy: FaultPolicy,
                       retrain_every: str, until: datetime | None = None) -> bool:
    """Train and register a fault model (on the data up to ``until``, when given) unless one
    with ``policy`` is younger than ``retrain_every``; True when a new model was registered.
    (The detect flow runs :func:`fault_model_job`'s steps itself, with no connection open
    while the model fits.)"""
    return _ensure(con, fault_model_job(con, now, policy, retrain_every, until), now)


def latest_fault_model(con: duckdb.DuckDBPyConnection, policy: FaultPolicy,
                       until: datetime | None = None) -> FaultPredictor | None:
    """The newest registered fault model for ``policy`` (none after ``until``), None before one."""
    blob = detection.latest_model(con, FAULT_MODEL, detection.policy_params(policy), datetime.min, until)
    return None if blob is None else pickle.loads(blob)


def score_latest_faults(con: duckdb.DuckDBPyConnection, policy: FaultPolicy,
                        until: datetime | None = None, model: FaultPredictor | None = None) -> list[Alert]:
    """Score the recent telemetry (as much as the feature windows need; none after ``until``)
    with ``model``, by default the newest registered one for ``policy``; no model yet means
    no alerts."""
    model = model if model is not None else latest_fault_model(con, policy, until)
    if model is None:
        return []
    recent = detection.recent_telemetry(con, feature_span(policy), until=until)
    if recent.empty:
        return []
    return score_faults(model, recent, policy, detection.last_failures(con, until))


def train_spikes(prices: pd.DataFrame, on_demand: pd.DataFrame, policy: SpikePolicy
                 ) -> tuple[SpikePredictor | None, pd.Timestamp | None]:
    """Fit on the grid rows whose label is known; (None, None) when there is nothing to learn."""
    if prices.empty:
        return None, None
    try:
        frame = build_spike_frame(prices, policy, on_demand if not on_demand.empty else None)
    except NoGridStep:  # prices yet to reach one grid step: nothing to learn, as with none
        return None, None
    labelled = frame[frame["label"].notna()]
    if labelled["label"].nunique() < 2:
        log.info("spike model not trained: labels have a single class")
        return None, None
    return SpikePredictor(policy).fit(labelled), pd.Timestamp(labelled["ts"].max())


def score_spikes(model: SpikePredictor, prices: pd.DataFrame, on_demand: pd.DataFrame,
                 policy: SpikePolicy, at: pd.Timestamp | None = None) -> list[Alert]:
    """Alerts for the spot markets whose grid row at ``at`` (default: their latest) scores at
    or above the threshold."""
    if prices.empty or (at is not None and prices["ts"].min() > at):
        return []
    try:
        latest = market_probabilities(model, prices, on_demand, policy, at)
    except NoGridStep:  # no market has a price at a grid step yet: none to rate
        return []
    horizon = pd.Timedelta(policy.horizon)
    alerts = []
    for r, p in zip(latest.itertuples(index=False), latest["p_spike"].to_numpy()):
        if p < model.threshold_:
            continue
        entity = "/".join(str(getattr(r, c)) for c in SERIES_KEY)
        start, end = _bucket(pd.Timestamp(r.ts), horizon)
        alerts.append(Alert(
            kind="price_spike", entity=entity, window_start=start, window_end=end,
            severity=severity_for(float(p)), probability=float(np.clip(p, 0, 1)),
            summary=f"spot price spike predicted on {entity} within {policy.horizon} (p={p:.2f}; price now ${r.price:g} an hour per instance)",
            runbook=SPIKE_RUNBOOK,
        ))
    return alerts


UNUSED_MARKET_ALERTS = ("info", "off")  # what a spike alert on a market no pool uses becomes


def rank_spike_alerts(found: list[Alert], in_use: set[str], unused: str = "info") -> list[Alert]:
    """Spike alerts as severe as their probability only on the markets in ``in_use`` (those the
    plan puts load on); on any other market at most ``info`` (``unused="info"``), or none
    (``"off"``): a spike where nothing runs changes nothing for the fleet."""
    if unused not in UNUSED_MARKET_ALERTS:
        raise ValueError(f"unused spot market alerts must be one of {', '.join(UNUSED_MARKET_ALERTS)}, "
                         f"not {unused!r}")
    out = []
    for a in found:
        if a.entity in in_use:
            out.append(a)
        elif unused == "info":
            out.append(replace(a, severity="info", summary=f"{a.summary}; no pool's load is planned on this market"))
    return out


def run_spikes(prices: pd.DataFrame, on_demand: pd.DataFrame, policy: SpikePolicy) -> list[Alert]:
    """Train on labelled history, score every series' latest grid row."""
    model, _cutoff = train_spikes(prices, on_demand, policy)
    return [] if model is None else score_spikes(model, prices, on_demand, policy)


def spike_model_status(con: duckdb.DuckDBPyConnection, now: datetime, policy: SpikePolicy,
                       retrain_every: str, until: datetime | None = None) -> tuple[dict | None, str | None]:
    """The newest registered spike model for ``policy`` (``model_id, created_at, data_cutoff``,
    or None) and why it must be retrained, or None to reuse it: there is none; it is
    ``retrain_every`` old (live: and a prices or catalog file came in since); or the prices now run more than ``retrain_every`` past the data it
    learnt from (beyond the horizon its last labels need: prices loaded late, a backfill)."""
    age = pd.Timedelta(retrain_every)
    row = detection.latest_model_row(con, SPIKE_MODEL, detection.spike_params(con, policy), until)
    if row is None:  # a newer headroom, or another --horizon, trains under other settings
        return None, ("no model for these settings yet (the registered ones were trained under others)"
                      if detection.has_model(con, SPIKE_MODEL) else "no model yet")
    old = pd.Timestamp(now) - row["created_at"]
    if old >= age and not (until is None and _inputs_unchanged(con, SPIKE_MODEL, row)):
        return row, f"the model is {rough_duration(old)} old; retrain age {short_duration(age)}"
    end = detection.spot_prices_end(con, until)
    past = None if end is None else end - row["data_cutoff"] - pd.Timedelta(policy.horizon)
    if past is not None and past > age:
        return row, (f"the prices run {rough_duration(past)} past the model's data (cutoff {row['data_cutoff']}; "
                     f"retrain age {short_duration(age)})")
    return row, None


def spike_model_job(con: duckdb.DuckDBPyConnection, now: datetime, policy: SpikePolicy,
                    retrain_every: str, until: datetime | None = None) -> ModelJob | None:
    """The spike model to train on the prices up to ``until`` (when given), its data read, or
    None when the registered one is reused (:func:`spike_model_status`)."""
    _row, why = spike_model_status(con, now, policy, retrain_every, until)
    if why is None:
        return None
    prices, on_demand = detection.spot_prices(con, until), detection.on_demand(con)
    return ModelJob(SPIKE_MODEL, "spot_prices", detection.spike_params(con, policy),
                    lambda: train_spikes(prices, on_demand, policy), detection.inputs_mark(con, SPIKE_MODEL))


def ensure_spike_model(con: duckdb.DuckDBPyConnection, now: datetime, policy: SpikePolicy,
                       retrain_every: str, until: datetime | None = None) -> bool:
    """Train and register a spike model (on the prices up to ``until``, when given) unless one
    that :func:`spike_model_status` reuses; True when a new model was registered."""
    return _ensure(con, spike_model_job(con, now, policy, retrain_every, until), now)


# Spot prices are change events: hours without a change are the price holding, so markets are
# rated as of the detection time with the last prices carried forward, unless no market at all
# changed for this long (then the feed itself has likely stopped, and its last ratings stand).
SPOT_FEED_STALE = pd.Timedelta(days=1)


def score_latest_spikes(con: duckdb.DuckDBPyConnection, policy: SpikePolicy,
                        at: datetime | None = None, until: datetime | None = None) -> list[Alert]:
    """Score every spot market as of ``at`` (its last price carried forward; default: the last
    change of any market) with the newest registered model for ``policy`` (none from after
    ``until``, nor prices); no model yet means no alerts."""
    blob = detection.latest_model(con, SPIKE_MODEL, detection.spike_params(con, policy), datetime.min, until)
    if blob is None:
        return []
    prices = detection.spot_prices(con, until)
    when = None
    if at is not None and not prices.empty:
        last = prices["ts"].max()
        when = pd.Timestamp(at) if pd.Timestamp(at) - last <= SPOT_FEED_STALE else None
    return score_spikes(pickle.loads(blob), prices, detection.on_demand(con), policy, when)
