"""The ``detect`` flow: CUSUM bursts, fault and price-spike scoring, alert delivery.

Each task wraps one call of :mod:`pipelines.detect.jobs`, which opens the warehouse per
step (DuckDB allows one writer process, and tasks may run in threads).
"""
from __future__ import annotations

import logging
from datetime import UTC, datetime

import pandas as pd
from prefect import flow, task

from anomaly.cusum import CusumPolicy
from anomaly.fault_features import FaultPolicy
from anomaly.spike_features import SpikeGridTooLarge, SpikePolicy
from pipelines.detect import jobs
from pipelines.detect.sinks import Sink
from pipelines.detect.steps import UNUSED_MARKET_ALERTS
from pipelines.runtime.run_logs import in_deployed_run, info_in_deployed_runs
from pipelines.runtime.settings import Settings

log = logging.getLogger(__name__)

DETECTORS = ("bursts", "faults", "spikes")


@task
def detect_bursts(db_path: str, now: datetime, sink_names: list[str], policy: CusumPolicy,
                  until: datetime | None = None) -> dict[str, int]:
    """Continue the CUSUM states over the demand series; persist states; sync burst alerts."""
    return jobs.detect_bursts(db_path, now, sink_names, policy, until)


@task
def train_fault_model(db_path: str, now: datetime, policy: FaultPolicy, retrain_every: str,
                      until: datetime | None = None) -> bool:
    """Train and register the fault model unless one with this policy is recent enough."""
    return jobs.train_fault_model(db_path, now, policy, retrain_every, until)


@task
def detect_faults(db_path: str, now: datetime, sink_names: list[str], policy: FaultPolicy,
                  until: datetime | None = None) -> dict[str, object]:
    """Score every device's latest telemetry with the registered model; sync fault alerts."""
    return jobs.detect_faults(db_path, now, sink_names, policy, until)


@task
def train_spike_model(db_path: str, now: datetime, policy: SpikePolicy, retrain_every: str,
                      until: datetime | None = None) -> dict[str, object]:
    """Reuse the registered spike model, or retrain it when it is ``retrain_every`` old, the
    prices run that far past its data, or there is none; says which."""
    return jobs.train_spike_model(db_path, now, policy, retrain_every, until)


@task
def detect_spikes(db_path: str, now: datetime, sink_names: list[str], policy: SpikePolicy,
                  until: datetime | None = None, unused_markets: str = "info") -> dict[str, int]:
    """Score the latest grid row per spot market with the registered model; sync alerts (full
    severity on the markets the latest plan uses)."""
    return jobs.detect_spikes(db_path, now, sink_names, policy, until, unused_markets)


@task
def stray_readings(db_path: str, detectors: list[str], until: datetime | None = None,
                   wall: datetime | None = None) -> dict[str, str]:
    return jobs.stray_readings(db_path, detectors, until, wall)


@task
def adopt_sinks(db_path: str, names: list[str], now: datetime) -> int:
    """Deliveries under a bare sink kind become the configured target's; firing alerts a sink
    has never heard of are queued for it."""
    return jobs.adopt_sinks(db_path, names, now)


@task(retries=0)
def deliver(db_path: str, now: datetime, sinks: list[Sink]) -> dict[str, dict]:
    """Send pending deliveries; failures stay pending for the next run."""
    return jobs.deliver(db_path, now, sinks)


@task
def alert_counts(db_path: str, sink_names: list[str], until: datetime | None = None) -> dict[str, object]:
    """Firing alerts (started by a replay's clock) and pending deliveries."""
    return jobs.alert_counts(db_path, sink_names, until)


@flow(name="detect")
def detect_flow(
    db_path: str | None = None,
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
    unused_spot_markets: str | None = None,
    spike_retrain_every: str | None = None,
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
    spike models are cached in ``models`` (kinds ``fault_predictor`` and ``spike_predictor``);
    between retrains each run only scores. The fault model is retrained once the newest is
    older than ``retrain_every``; the spike model once it is older than
    ``spike_retrain_every`` (default: the ``HEADROOM_SPIKE_RETRAIN_EVERY`` setting, 7D), or
    the prices run that far past its data cutoff, or there is none (live, an old model stands
    while no input file was loaded since it was trained); ``spikes`` says
    ``model: reused`` or ``retrained``, with the model's id and training time. Fault scoring reads only the recent telemetry its
    feature windows need. A spike alert is as severe as its probability only on a market the
    latest plan puts load on; elsewhere it is ``info``, or not raised with
    ``unused_spot_markets="off"`` (default: the ``HEADROOM_UNUSED_SPOT_MARKETS`` setting).
    """
    info_in_deployed_runs()
    db_path = db_path or str(Settings.from_env().db_path)  # a deployment names no path: HEADROOM_DB
    run_at = now or datetime.now(UTC).replace(tzinfo=None, microsecond=0)
    # a given clock is a replay: no data after it is read, no model trained after it is used
    until = now
    chosen = list(detectors or DETECTORS)
    unknown = sorted(set(chosen) - set(DETECTORS))
    if unknown:
        raise ValueError(f"unknown detector(s) {unknown}; choose from {DETECTORS}")
    unused_spot_markets = unused_spot_markets or Settings.from_env().unused_spot_markets
    spike_retrain_every = spike_retrain_every or Settings.from_env().spike_retrain_every
    if not pd.Timedelta(spike_retrain_every) > pd.Timedelta(0):
        raise ValueError(f"spike_retrain_every must be a positive duration, not {spike_retrain_every!r}")
    if unused_spot_markets not in UNUSED_MARKET_ALERTS:  # before any work, not after the models train
        raise ValueError(f"unused_spot_markets must be one of {UNUSED_MARKET_ALERTS}, not {unused_spot_markets!r}")
    sinks = jobs.configured_sinks(jsonl_path, webhook_url, alertmanager_url)
    names = [s.name for s in sinks]
    adopt_sinks(str(db_path), names, run_at)
    out: dict = {}
    # a detector whose newest reading is a stray (a date mistyped by a year) is skipped, said
    for name, why in stray_readings(str(db_path), chosen, until, None if until is not None else run_at).items():
        log.error("%s detection skipped: %s", name, why)
        out[name] = {"skipped": why}
    if "bursts" in chosen and "bursts" not in out:
        policy = CusumPolicy(season_length=season_length)  # 4 seasons, one false alarm a week, 6 h cooldown
        out["bursts"] = detect_bursts(str(db_path), run_at, names, policy, until)
    if "faults" in chosen and "faults" not in out:
        # canonical durations, so "30m" and "30min" find the same registered model
        fault_policy = FaultPolicy(lead=str(pd.Timedelta(fault_lead)), horizon=str(pd.Timedelta(fault_horizon)))
        trained = train_fault_model(str(db_path), run_at, fault_policy, retrain_every, until)
        out["faults"] = {"trained": int(trained), **detect_faults(str(db_path), run_at, names, fault_policy, until)}
    if "spikes" in chosen and "spikes" not in out:
        spike_policy = SpikePolicy(horizon=spike_horizon)
        try:
            model = train_spike_model(str(db_path), run_at, spike_policy, spike_retrain_every, until)
            out["spikes"] = {"trained": int(model.pop("trained")), "model": model,
                             **detect_spikes(str(db_path), run_at, names, spike_policy, until,
                                             unused_spot_markets)}
        except SpikeGridTooLarge as exc:  # the other detectors' alerts are still delivered
            log.error("spike detection skipped: %s", exc)
            out["spikes"] = {"skipped": str(exc)}
    sent = deliver(str(db_path), run_at, sinks)
    out["delivered"] = sent["delivered"]
    if sent["failed"]:  # pending for the next run; said, so that a scheduler sees a sink is down
        out["delivery_failed"] = sent["failed"]
    out.update(alert_counts(str(db_path), names, until))
    down = what_is_down(out)
    if down and in_deployed_run():
        # a scheduler watches the run's state: Failed, once every alert is recorded and the others sent
        raise DetectDown(f"{'; '.join(down)} (the other detectors ran and their alerts went out)")
    return out


def what_is_down(out: dict) -> list[str]:
    """A detect run's skipped detectors and failed sinks, in words (none: all ran and delivered)."""
    down = [f"{n} detection skipped" for n, r in out.items() if isinstance(r, dict) and "skipped" in r]
    return down + [f"alert sink {sink} failed" for sink in out.get("delivery_failed") or {}]


class DetectDown(RuntimeError):
    """A served detect run in which a detector was skipped or a sink failed."""
