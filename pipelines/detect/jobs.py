"""Detection runs against a warehouse path: each opens the warehouse for as long as it reads or
writes, runs one detection step, and syncs its alerts. The detect flow's tasks wrap these."""
from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path

import pandas as pd

from anomaly.base import short_duration
from anomaly.cusum import CusumPolicy
from anomaly.fault_features import FaultPolicy
from anomaly.spike_features import SpikePolicy
from pipelines.detect import alerts, notes, steps, upgrade
from pipelines.detect.sinks import check_appendable
from pipelines.runtime.settings import Settings
from pipelines.store import detection
from pipelines.store.warehouse import open_warehouse

log = logging.getLogger(__name__)


def stray_readings(db_path: str, detectors: list[str], until: datetime | None = None,
                   wall: datetime | None = None) -> dict[str, str]:
    """Per detector, why it must not run: its newest reading is a stray, dated far past all
    others, or (live, given the ``wall`` clock) past that (:func:`detection.stray_reading`)."""
    with open_warehouse(db_path, read_only=True) as con:
        found = {d: detection.stray_reading(con, d, until, wall) for d in detectors}
    return {d: why for d, why in found.items() if why is not None}


def detect_bursts(db_path: str, now: datetime, sink_names: list[str], policy: CusumPolicy,
                  until: datetime | None = None) -> dict[str, int]:
    """Continue the CUSUM states over the demand series (up to ``until``); persist states;
    sync burst alerts."""
    with open_warehouse(db_path) as con:
        states = detection.load_states(con, "cusum")
        # only what the states still need (a year of history is not re-read every 15 minutes),
        # unless a series has no state yet: its first calibration reads all of its history
        since = steps.burst_read_since(states, policy)
        series = detection.demand_series(con, until, since)
        if since is not None and not set(series["unique_id"]) <= set(states):
            series = detection.demand_series(con, until)
        ahead = steps.states_past(states, until)
        if ahead:
            log.warning("bursts: %d series' CUSUM already read past %s (%s ...): those hours are not read "
                        "again, a replay goes forward only", len(ahead), until, ahead[0])
        firing = alerts.firing_entities(con, "burst")
        result = steps.run_bursts(series, states, policy, now=now)
        # said once, by the run that resolves their alerts (a series silent for days is not news every run)
        gone = [u for u in result.silent if u in firing]
        if gone:
            log.warning("%d series with a burst in progress have had no data for over %s (%s ...): their burst "
                        "alerts resolve, the condition can no longer be seen", len(gone),
                        short_duration(steps.BURST_SILENCE), gone[0])
        # alerts first: if saving the states fails, the next run re-detects the same bursts,
        # which have the same fingerprints, so nothing is lost and nothing doubles
        counts = alerts.sync_alerts(con, "burst", result.current, now, sink_names, ended=result.ended,
                                    history=result.history)
        detection.save_states(con, "cusum", result.states, now)
    return {"events": result.events, **counts}


def train_fault_model(db_path: str, now: datetime, policy: FaultPolicy, retrain_every: str,
                      until: datetime | None = None) -> bool:
    """Train and register the fault model unless one with this policy is recent enough."""
    with open_warehouse(db_path, read_only=True) as con:
        job = steps.fault_model_job(con, now, policy, retrain_every, until)
    return _train(db_path, job, now)


def detect_faults(db_path: str, now: datetime, sink_names: list[str], policy: FaultPolicy,
                  until: datetime | None = None) -> dict[str, object]:
    """Score every device's latest telemetry with the registered model; sync fault alerts
    (``threshold_note`` says when its threshold is the best-F1 fallback)."""
    with open_warehouse(db_path) as con:
        model = steps.latest_fault_model(con, policy, until)
        found = _still_ahead(steps.score_latest_faults(con, policy, until, model), now, "hardware-fault")
        out = alerts.sync_alerts(con, "hardware_fault", found, now, sink_names)
        # "trained 0, fired 0" alone reads like a fleet with no fault ahead: say there is no model
        note = (notes.no_fault_model_note(*detection.fault_input_counts(con, until)) if model is None
                else notes.fault_threshold_note(model, policy))
    return {**out, "threshold_note": note} if note else out


def train_spike_model(db_path: str, now: datetime, policy: SpikePolicy, retrain_every: str,
                      until: datetime | None = None) -> dict[str, object]:
    """Reuse the registered spike model, or retrain it (:func:`steps.spike_model_status`).
    Returns ``trained`` (a new model was registered), ``model`` (``reused``, ``retrained`` or
    ``none``: nothing to learn yet), ``model_id`` and ``trained_at`` of the model scoring
    now, and ``why`` it was retrained."""
    with open_warehouse(db_path, read_only=True) as con:
        _row, why = steps.spike_model_status(con, now, policy, retrain_every, until)
        job = steps.spike_model_job(con, now, policy, retrain_every, until) if why is not None else None
    trained = _train(db_path, job, now)
    with open_warehouse(db_path, read_only=True) as con:
        row = detection.latest_model_row(con, detection.SPIKE_MODEL, detection.spike_params(con, policy), until)
        # nothing learnt: say from what, as the fault line does
        why = notes.no_spike_model_note(*detection.spike_input_counts(con, until)) if row is None else why
    out: dict[str, object] = {"trained": trained, "model": "retrained" if trained else "reused" if why is None
                              else "none"}
    if why is not None:
        out["why"] = why
    if row is not None:
        out.update(model_id=row["model_id"], trained_at=row["created_at"].isoformat(sep=" ", timespec="minutes"))
    return out


def _train(db_path: str, job: steps.ModelJob | None, now: datetime) -> bool:
    """Fit with the warehouse closed (minutes on a large fleet: an hourly ingest must not wait
    for it, nor fail), then open it to register the model."""
    if job is None:
        return False
    model, cutoff = steps.run_model_job(job)
    with open_warehouse(db_path) as con:
        return steps.register_model(con, job, model, cutoff, now)


def detect_spikes(db_path: str, now: datetime, sink_names: list[str], policy: SpikePolicy,
                  until: datetime | None = None, unused_markets: str = "info") -> dict[str, int]:
    """Score the latest grid row per spot market with the registered model; sync alerts, at
    full severity only on the markets the latest plan uses (see :func:`steps.rank_spike_alerts`)."""
    with open_warehouse(db_path) as con:
        found = _still_ahead(steps.score_latest_spikes(con, policy, now, until), now, "price-spike")
        found = steps.rank_spike_alerts(found, detection.spot_markets_in_use(con), unused_markets)
        return alerts.sync_alerts(con, "price_spike", found, now, sink_names)


def _still_ahead(found: list, now: datetime, what: str) -> list:
    """The predictions whose window has not ended by ``now``. One about a window already past
    (the newest data is older than the horizon: a feed that stopped) is not raised, and one
    still firing from earlier resolves, rather than firing on stale data for ever."""
    ahead = [a for a in found if a.window_end is None or pd.Timestamp(a.window_end) > pd.Timestamp(now)]
    if len(ahead) < len(found):
        log.warning("%d %s prediction(s) are about windows that ended before %s (their data is older than the "
                    "horizon: is the feed stale?); not raised", len(found) - len(ahead), what, now)
    return ahead


def adopt_sinks(db_path: str, names: list[str], now: datetime) -> int:
    """Deliveries recorded under a bare sink kind become the configured target's; then a
    sink that has never heard of an alert still firing (of any kind, whichever detectors
    this run has) gets its firing queued."""
    with open_warehouse(db_path) as con:
        moved = upgrade.adopt_kind_named(con, names)
        alerts.catch_up_sinks(con, names, now)
        return moved


def deliver(db_path: str, now: datetime, sinks: list[alerts.Sink]) -> dict[str, dict]:
    """Send pending deliveries; failures stay pending for the next run. The warehouse is
    open to read what to send and to record what went, not while sending: a receiver that
    takes its time does not hold the write lock (and time out an ingest) meanwhile. So
    another run (the schedule and a ``detect`` by hand) can read the deliveries while they
    are sent: reading them claims them for this run (:class:`alerts.Claim`), and that run
    leaves them alone until this one records the outcome or its claim lapses. Returns
    ``{"delivered": {sink: n}, "failed": {sink: error}}``."""
    batches: list[alerts.Batch] = []
    recorded = False
    try:
        with open_warehouse(db_path) as con:
            batches = alerts.pending_batches(con, sinks, now)
        alerts.send_batches(batches)
        with open_warehouse(db_path) as con:
            delivered = alerts.record_batches(con, batches, now)
            recorded = True
    except BaseException:  # Ctrl-C, SIGTERM: what went is recorded, the rest released for the next run
        if batches and not recorded:
            for b in batches:
                if not b.sent and b.error is None:
                    b.error = "interrupted before the receiver answered"
            with open_warehouse(db_path) as con:
                alerts.record_batches(con, batches, now)
        raise
    return {"delivered": delivered, "failed": {b.sink.name: b.error for b in batches if b.error is not None}}


SINK_SETTINGS = "alert sink setting (HEADROOM_ALERT_JSONL, HEADROOM_ALERT_WEBHOOK or HEADROOM_ALERTMANAGER_URL)"


def configured_sinks(
    jsonl_path: str | None = None, webhook_url: str | None = None, alertmanager_url: str | None = None,
    probe: bool = False,
) -> list[alerts.Sink]:
    """The sinks given here, each one not given from its HEADROOM_ALERT_* setting (a flag
    for one sink does not switch the others off). ValueError for a setting that cannot work;
    ``probe`` (a command's check before any work) also for a JSONL file this user cannot
    append to now (a flow run keeps such alerts pending instead)."""
    env = Settings.from_env()
    if jsonl_path is None and env.alert_jsonl:
        jsonl_path = str(env.alert_jsonl)
    webhook_url = webhook_url if webhook_url is not None else env.alert_webhook_url
    alertmanager_url = alertmanager_url if alertmanager_url is not None else env.alertmanager_url
    found = alerts.sinks_from_settings(Path(jsonl_path) if jsonl_path else None, webhook_url, alertmanager_url)
    if probe and jsonl_path:
        check_appendable(Path(jsonl_path))
    return found


def alert_counts(db_path: str, sink_names: list[str], until: datetime | None = None) -> dict[str, object]:
    """Firing alerts and pending deliveries, as :func:`pipelines.store.detection.alert_counts`."""
    with open_warehouse(db_path) as con:
        return detection.alert_counts(con, sink_names, until)
