"""The ``detect`` flow: CUSUM bursts, fault and price-spike scoring, alert delivery.

Each task wraps one library call; the warehouse is opened per task (DuckDB allows one
writer process, and tasks may run in threads).
"""
from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
from prefect import flow, task

from anomaly.cusum import CusumPolicy
from anomaly.fault_features import FaultPolicy
from anomaly.spike_features import SpikeGridTooLarge, SpikePolicy
from pipelines import alerts as alerting
from pipelines import detect_steps, detect_store
from pipelines.settings import Settings
from pipelines.warehouse import open_warehouse

log = logging.getLogger(__name__)

DETECTORS = ("bursts", "faults", "spikes")


@task
def detect_bursts(db_path: str, now: datetime, sink_names: list[str], policy: CusumPolicy,
                  until: datetime | None = None) -> dict[str, int]:
    """Continue the CUSUM states over the demand series (up to ``until``); persist states;
    sync burst alerts."""
    with open_warehouse(db_path) as con:
        states = detect_store.load_states(con, "cusum")
        # only what the states still need (a year of history is not re-read every 15 minutes),
        # unless a series has no state yet: its first calibration reads all of its history
        since = detect_steps.burst_read_since(states, policy)
        series = detect_store.demand_series(con, until, since)
        if since is not None and not set(series["unique_id"]) <= set(states):
            series = detect_store.demand_series(con, until)
        ahead = detect_steps.states_past(states, until)
        if ahead:
            log.warning("bursts: %d series' CUSUM already read past %s (%s ...): those hours are not read "
                        "again, a replay goes forward only", len(ahead), until, ahead[0])
        result = detect_steps.run_bursts(series, states, policy, now=now)
        # alerts first: if saving the states fails, the next run re-detects the same bursts,
        # which have the same fingerprints, so nothing is lost and nothing doubles
        counts = alerting.sync_alerts(con, "burst", result.current, now, sink_names, ended=result.ended)
        detect_store.save_states(con, "cusum", result.states, now)
    return {"events": result.events, **counts}


@task
def train_fault_model(db_path: str, now: datetime, policy: FaultPolicy, retrain_every: str,
                      until: datetime | None = None) -> bool:
    """Train and register the fault model unless one with this policy is recent enough."""
    with open_warehouse(db_path, read_only=True) as con:
        job = detect_steps.fault_model_job(con, now, policy, retrain_every, until)
    return _train(db_path, job, now)


@task
def detect_faults(db_path: str, now: datetime, sink_names: list[str], policy: FaultPolicy,
                  until: datetime | None = None) -> dict[str, int]:
    """Score every device's latest telemetry with the registered model; sync fault alerts."""
    with open_warehouse(db_path) as con:
        found = _still_ahead(detect_steps.score_latest_faults(con, policy, until), now, "hardware-fault")
        return alerting.sync_alerts(con, "hardware_fault", found, now, sink_names)


@task
def train_spike_model(db_path: str, now: datetime, policy: SpikePolicy, retrain_every: str,
                      until: datetime | None = None) -> bool:
    """Train and register the spike model unless one with this policy is recent enough."""
    with open_warehouse(db_path, read_only=True) as con:
        job = detect_steps.spike_model_job(con, now, policy, retrain_every, until)
    return _train(db_path, job, now)


def _train(db_path: str, job: detect_steps.ModelJob | None, now: datetime) -> bool:
    """Fit with the warehouse closed (minutes on a large fleet: an hourly ingest must not wait
    for it, nor fail), then open it to register the model."""
    if job is None:
        return False
    model, cutoff = detect_steps.run_model_job(job)
    with open_warehouse(db_path) as con:
        return detect_steps.register_model(con, job, model, cutoff, now)


@task
def detect_spikes(db_path: str, now: datetime, sink_names: list[str], policy: SpikePolicy,
                  until: datetime | None = None) -> dict[str, int]:
    """Score the latest grid row per spot market with the registered model; sync alerts."""
    with open_warehouse(db_path) as con:
        found = _still_ahead(detect_steps.score_latest_spikes(con, policy, now, until), now, "price-spike")
        return alerting.sync_alerts(con, "price_spike", found, now, sink_names)


def _still_ahead(found: list, now: datetime, what: str) -> list:
    """The predictions whose window has not ended by ``now``. One about a window already past
    (the newest data is older than the horizon: a feed that stopped) is not raised, and one
    still firing from earlier resolves, rather than firing on stale data for ever."""
    ahead = [a for a in found if a.window_end is None or pd.Timestamp(a.window_end) > pd.Timestamp(now)]
    if len(ahead) < len(found):
        log.warning("%d %s prediction(s) are about windows that ended before %s (their data is older than the "
                    "horizon: is the feed stale?); not raised", len(found) - len(ahead), what, now)
    return ahead


@task
def adopt_sinks(db_path: str, names: list[str], now: datetime) -> int:
    """Deliveries recorded under a bare sink kind become the configured target's; then a
    sink that has never heard of an alert still firing (of any kind, whichever detectors
    this run has) gets its firing queued."""
    with open_warehouse(db_path) as con:
        moved = alerting.adopt_kind_named(con, names)
        alerting.catch_up_sinks(con, names, now)
        return moved


@task(retries=0)
def deliver(db_path: str, now: datetime, sinks: list[alerting.Sink]) -> dict[str, dict]:
    """Send pending deliveries; failures stay pending for the next run. The warehouse is
    open to read what to send and to record what went, not while sending: a receiver that
    takes its time does not hold the write lock (and time out an ingest) meanwhile. So
    another run (the schedule and a ``detect`` by hand) can read the deliveries while they
    are sent: reading them claims them for this run (:class:`alerting.Claim`), and that run
    leaves them alone until this one records the outcome or its claim lapses. Returns
    ``{"delivered": {sink: n}, "failed": {sink: error}}``."""
    with open_warehouse(db_path) as con:
        batches = alerting.pending_batches(con, sinks, now)
    alerting.send_batches(batches)
    with open_warehouse(db_path) as con:
        delivered = alerting.record_batches(con, batches, now)
    return {"delivered": delivered, "failed": {b.sink.name: b.error for b in batches if b.error is not None}}


def configured_sinks(
    jsonl_path: str | None = None, webhook_url: str | None = None, alertmanager_url: str | None = None
) -> list[alerting.Sink]:
    """The sinks given here, each one not given from its HEADROOM_ALERT_* setting (a flag
    for one sink does not switch the others off). ValueError for a setting that cannot work."""
    env = Settings.from_env()
    if jsonl_path is None and env.alert_jsonl:
        jsonl_path = str(env.alert_jsonl)
    webhook_url = webhook_url if webhook_url is not None else env.alert_webhook_url
    alertmanager_url = alertmanager_url if alertmanager_url is not None else env.alertmanager_url
    return alerting.sinks_from_settings(Path(jsonl_path) if jsonl_path else None, webhook_url, alertmanager_url)


@flow(name="detect")
def detect_flow(
    db_path: str,
    now: datetime | None = None,
    jsonl_path: str | None = None,
    webhook_url: str | None = None,
    alertmanager_url: str | None = None,
    detectors: list[str] | None = None,
    season_length: int = 24,
    fault_horizon: str = "24h",
    fault_lead: str = "30min",
    spike_horizon: str = "6h",
    retrain_every: str = "1D",
) -> dict:
    """Run the detectors over the warehouse at ``db_path`` and deliver alerts.

    ``now`` is the clock (None: the wall clock, live). A given ``now`` is a replay: readings,
    failures and prices after it are not read, no model trained after it is used, and
    models trained in it learn only from what was known by then.

    Sinks not given come from the ``HEADROOM_ALERT_JSONL`` / ``HEADROOM_ALERT_WEBHOOK`` /
    ``HEADROOM_ALERTMANAGER_URL`` settings. Returns ``{"bursts": {"events", "fired",
    "updated", "resolved"}, "faults": {...}, "spikes": {...}, "delivered": {sink: n},
    "firing": n, "pending_deliveries": n}`` (a detector not run is absent; pending counts the
    configured sinks' deliveries), ``"delivery_failed": {sink: error}`` when a sink failed (its
    alerts stay pending), and ``"pending_unconfigured": {sink: n}`` when deliveries wait for a
    sink not configured now (kept: they go out if it is configured again). The fault and
    spike models are retrained when the newest registered one (``models``, kinds
    ``fault_predictor`` and ``spike_predictor``) is older than ``retrain_every``; between
    retrains each run only scores. Fault scoring reads only the recent telemetry its
    feature windows need.
    """
    run_at = now or datetime.now(UTC).replace(tzinfo=None, microsecond=0)
    # a given clock is a replay: no data after it is read, no model trained after it is used
    until = now
    chosen = list(detectors or DETECTORS)
    unknown = sorted(set(chosen) - set(DETECTORS))
    if unknown:
        raise ValueError(f"unknown detector(s) {unknown}; choose from {DETECTORS}")
    sinks = configured_sinks(jsonl_path, webhook_url, alertmanager_url)
    names = [s.name for s in sinks]
    adopt_sinks(str(db_path), names, run_at)
    out: dict = {}
    if "bursts" in chosen:
        policy = CusumPolicy(season_length=season_length)  # 4 seasons, one false alarm a week, 6 h cooldown
        out["bursts"] = detect_bursts(str(db_path), run_at, names, policy, until)
    if "faults" in chosen:
        # canonical durations, so "30m" and "30min" find the same registered model
        fault_policy = FaultPolicy(lead=str(pd.Timedelta(fault_lead)), horizon=str(pd.Timedelta(fault_horizon)))
        trained = train_fault_model(str(db_path), run_at, fault_policy, retrain_every, until)
        out["faults"] = {"trained": int(trained), **detect_faults(str(db_path), run_at, names, fault_policy, until)}
    if "spikes" in chosen:
        spike_policy = SpikePolicy(horizon=spike_horizon)
        try:
            trained = train_spike_model(str(db_path), run_at, spike_policy, retrain_every, until)
            out["spikes"] = {"trained": int(trained),
                             **detect_spikes(str(db_path), run_at, names, spike_policy, until)}
        except SpikeGridTooLarge as exc:  # the other detectors' alerts are still delivered
            log.error("spike detection skipped: %s", exc)
            out["spikes"] = {"skipped": str(exc)}
    sent = deliver(str(db_path), run_at, sinks)
    out["delivered"] = sent["delivered"]
    if sent["failed"]:  # pending for the next run; said, so that a scheduler sees a sink is down
        out["delivery_failed"] = sent["failed"]
    with open_warehouse(str(db_path)) as con:
        out.update(detect_store.alert_counts(con, names))
    return out
