"""Synthetic GPU devices: load-driven sensors, benign noise, precursor drift and failures.

Metric semantics (DCGM names in brackets): ``gpu_temp`` degC [GPU_TEMP], ``power_usage`` W
[POWER_USAGE], ``ecc_sbe`` / ``ecc_dbe`` volatile cumulative counts, reset when a repaired
device returns [ECC_SBE_VOL_TOTAL, ECC_DBE_VOL_TOTAL], ``xid`` the Xid code seen in the
interval or 0 [XID_ERRORS], ``gpu_util`` percent [GPU_UTIL]. A failed device sends nothing
until it is repaired.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from pipelines.synth.config import (
    FAILURE_COLUMNS,
    FAILURE_TYPES,
    STEP_MINUTES,
    STEPS_PER_DAY,
    STEPS_PER_HOUR,
    TELEMETRY_COLUMNS,
    TELEMETRY_METRICS,
    FleetConfig,
    Node,
    ar1,
)

BENIGN_XID = np.array([13, 31, 43])  # application faults: noise, not hardware precursors
PRECURSOR_XID = {
    "xid_79_fell_off_bus": np.array([74, 119, 45, 62]),
    "dbe_ecc": np.array([63, 92, 64]),
    "thermal": np.array([62, 45]),
}
FINAL_XID = {"xid_79_fell_off_bus": 79, "dbe_ecc": 48, "thermal": 0}
# precursor intensity at full strength: temperature rise (degC), SBE per step, Xid per step, power jitter
PRECURSOR = {
    "xid_79_fell_off_bus": (8.0, 0.8, 0.35, 0.04),
    "dbe_ecc": (6.0, 4.0, 0.08, 0.04),
    "thermal": (18.0, 0.2, 0.03, 0.15),
}


@dataclass(frozen=True)
class FaultModel:
    """Rates of failures and of the benign look-alikes that make detection non-trivial."""

    failures_per_device_day: float = 0.05
    failure_mix: tuple[float, float, float] = (0.4, 0.35, 0.25)  # as FAILURE_TYPES
    lead_hours: tuple[float, float] = (3.0, 16.0)
    repair_hours: tuple[float, float] = (6.0, 30.0)
    weak_precursor_share: float = 0.1
    sbe_healthy_per_step: float = 0.0015
    weak_device_share: float = 0.1  # chronic SBE emitters that never fail
    sbe_weak_per_step: float = 0.03
    xid_benign_per_step: float = 0.0008
    node_crash_per_step: float = 0.001  # a job crash: benign Xid on every GPU of a node
    episodes_per_device_day: float = 0.1  # temperature bumps that recover
    cooling_events_per_node_day: float = 0.07


@dataclass(frozen=True)
class DeviceSim:
    """Per-device arrays (steps, devices) and the long frames built from them."""

    device_ids: np.ndarray
    device_node: np.ndarray
    device_util: np.ndarray
    device_up: np.ndarray
    telemetry: pd.DataFrame
    failures: pd.DataFrame


def _schedule(cfg: FleetConfig, n_dev: int, fm: FaultModel, rng: np.random.Generator
              ) -> tuple[list[tuple], list[tuple[int, int]]]:
    """Failures as (device, step, type, lead_steps, repair_steps), precursors fully in range,
    and the next failure of each device when it falls within a precursor's length after the
    data end, as (device, step): it has not happened yet, but its precursor may have begun."""
    rate = fm.failures_per_device_day / STEPS_PER_DAY
    max_lead = int(fm.lead_hours[1] * STEPS_PER_HOUR)
    out, pending = [], []
    for d in range(n_dev):
        t = max_lead + STEPS_PER_HOUR * 2
        while True:
            t += int(rng.exponential(1.0 / rate))
            if t >= cfg.steps:
                if t < cfg.steps + max_lead:
                    pending.append((d, t))
                break
            kind = FAILURE_TYPES[int(rng.choice(len(FAILURE_TYPES), p=fm.failure_mix))]
            lead = int(rng.uniform(*fm.lead_hours) * STEPS_PER_HOUR)
            repair = int(rng.uniform(*fm.repair_hours) * STEPS_PER_HOUR)
            out.append((d, t, kind, lead, repair))
            t += repair + max_lead + 1  # back in service, and the next precursor starts after
    return out, pending


def _bump(steps: int, start: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices and a triangular 0..1..0 shape for a transient episode."""
    idx = np.arange(start, min(start + length, steps))
    x = (idx - start) / max(length, 1)
    return idx, 1.0 - np.abs(2.0 * x - 1.0)


def simulate_devices(
    cfg: FleetConfig,
    fleet: list[Node],
    gpu_frac: np.ndarray,
    rng: np.random.Generator,
    fm: FaultModel = FaultModel(),
    telemetry: bool = True,
) -> DeviceSim:
    """Sensors for every GPU of every GPU node, with precursors before injected failures.

    With ``telemetry=False`` the telemetry frame is left empty (the costly part at scale).
    """
    steps = cfg.steps
    gpu_nodes = [i for i, n in enumerate(fleet) if n.spec.gpus]
    device_node = np.repeat(gpu_nodes, [fleet[i].spec.gpus for i in gpu_nodes]).astype(int)
    device_ids = np.array(
        [f"{fleet[i].node_id}-gpu{k}" for i in gpu_nodes for k in range(fleet[i].spec.gpus)], dtype=object
    )
    n_dev = len(device_ids)
    schedule, pending = _schedule(cfg, n_dev, fm, rng)

    up = np.ones((steps, n_dev), dtype=bool)
    returns: list[tuple[int, int]] = []
    for d, t, _, _, repair in schedule:
        up[t + 1 : t + 1 + repair, d] = False
        if t + 1 + repair < steps:
            returns.append((d, t + 1 + repair))

    util = np.clip(gpu_frac[:, device_node] * np.exp(ar1(rng, steps, n_dev, 3.0, 0.12)), 0.0, 1.0)
    util = np.where(up, util, 0.0)

    idle = np.array([fleet[i].spec.idle_watts for i in device_node])
    peak = np.array([fleet[i].spec.max_watts for i in device_node])
    hours = np.arange(steps) * STEP_MINUTES / 60.0
    ambient = 24.0 + 1.5 * np.sin(2 * np.pi * (hours - 9.0) / 24.0)
    node_offset = rng.uniform(-2.0, 2.0, len(fleet))[device_node]
    dev_offset = rng.uniform(-3.0, 3.0, n_dev)
    slope = 30.0 + 0.02 * peak
    temp_add = np.zeros((steps, n_dev))
    sbe_rate = np.full((steps, n_dev), fm.sbe_healthy_per_step)
    weak = rng.random(n_dev) < fm.weak_device_share
    sbe_rate[:, weak] = fm.sbe_weak_per_step
    xid_p = np.full((steps, n_dev), fm.xid_benign_per_step)
    jitter = np.full((steps, n_dev), 0.02)
    xid_code = rng.choice(BENIGN_XID, size=(steps, n_dev))

    # Benign look-alikes: per-device temperature bumps (some with SBE), node cooling hiccups.
    for d in range(n_dev):
        for _ in range(rng.poisson(fm.episodes_per_device_day * cfg.days)):
            idx, shape = _bump(steps, int(rng.integers(0, steps)), int(rng.uniform(1, 5) * STEPS_PER_HOUR))
            temp_add[idx, d] += rng.uniform(4.0, 12.0) * shape
            if rng.random() < 0.4:
                sbe_rate[idx, d] += 0.05 * shape
    for node in gpu_nodes:
        mine = np.flatnonzero(device_node == node)
        for _ in range(rng.poisson(fm.cooling_events_per_node_day * cfg.days)):
            idx, shape = _bump(steps, int(rng.integers(0, steps)), int(rng.uniform(1, 3) * STEPS_PER_HOUR))
            temp_add[np.ix_(idx, mine)] += rng.uniform(5.0, 10.0) * shape[:, None]
    crash = rng.random((steps, len(fleet))) < fm.node_crash_per_step
    forced_xid = crash[:, device_node]

    # Precursors: drift that grows as p = ((t - start) / lead) ** gamma towards the failure.
    def precursor(d: int, t: int, kind: str, lead: int, draw: np.random.Generator,
                  sbe_rate: np.ndarray, xid_p: np.ndarray) -> None:
        strength = draw.uniform(0.3, 0.5) if draw.random() < fm.weak_precursor_share else draw.uniform(0.6, 1.3)
        gamma = draw.uniform(1.0, 2.0)
        idx = np.arange(max(t - lead, 0), min(t + 1, steps))
        p = ((idx - (t - lead)) / lead) ** gamma
        d_temp, d_sbe, d_xid, d_jit = PRECURSOR[kind]
        temp_add[idx, d] += d_temp * strength * p
        sbe_rate[idx, d] += d_sbe * strength * p
        xid_p[idx, d] += d_xid * strength * p
        jitter[idx, d] += d_jit * p
        xid_code[idx, d] = draw.choice(PRECURSOR_XID[kind], size=len(idx))

    final_xid = np.zeros((steps, n_dev))
    dbe_inc = np.zeros((steps, n_dev))
    failure_rows = []
    for d, t, kind, lead, _ in schedule:
        precursor(d, t, kind, lead, rng, sbe_rate, xid_p)
        final_xid[t, d] = FINAL_XID[kind]
        dbe_inc[t, d] = 1.0 if kind == "dbe_ecc" else 0.0
        failure_rows.append((d, t, kind, int(rng.integers(0, STEP_MINUTES * 60))))
    # A failure still to come: a fleet is never between failures everywhere at once, so a
    # device whose next failure follows the data end may already drift (its failure is in no
    # table). Drawn from a child generator, its SBE and Xid from rates of their own: the rest
    # of the fleet is the same with or without it.
    later = rng.spawn(1)[0]
    sbe_later, xid_later = np.zeros((steps, n_dev)), np.zeros((steps, n_dev))
    for d, t in pending:
        kind = FAILURE_TYPES[int(later.choice(len(FAILURE_TYPES), p=fm.failure_mix))]
        lead = int(later.uniform(*fm.lead_hours) * STEPS_PER_HOUR)
        if t - lead < steps:
            precursor(d, t, kind, lead, later, sbe_later, xid_later)

    temp = (
        ambient[:, None] + node_offset + dev_offset + slope * util + temp_add
        + ar1(rng, steps, n_dev, 3.0, 0.8) + ar1(rng, steps, n_dev, 36.0, 0.6)
    )
    power = idle + (peak - idle) * util**0.9
    power = np.clip(power * (1.0 + jitter * rng.standard_normal((steps, n_dev))), 0.5 * idle, 1.05 * peak)
    sbe = rng.poisson(sbe_rate).astype(float) + later.poisson(sbe_later)
    events = (rng.random((steps, n_dev)) < xid_p) | forced_xid | (later.random((steps, n_dev)) < xid_later)
    xid = np.where(events, xid_code, 0.0)
    xid = np.where(final_xid > 0, final_xid, xid)
    sbe_cum = _counter(np.where(up, sbe, 0.0), returns)
    dbe_cum = _counter(dbe_inc, returns)

    values = np.stack(
        [np.round(temp, 1), np.round(power, 1), sbe_cum, dbe_cum, xid, np.round(util * 100.0, 1)], axis=2
    )
    util = np.round(util * 100.0, 1) / 100.0  # what gpu_util reports, so utilization agrees with it
    if telemetry:
        frame = _telemetry_frame(cfg, fleet, device_ids, device_node, values, up)
    else:
        frame = _telemetry_frame(cfg, fleet, device_ids, device_node, values[:0], up[:0])
    failures = _failures_frame(cfg, fleet, device_ids, device_node, failure_rows)
    return DeviceSim(device_ids, device_node, util, up, frame, failures)


def _counter(increments: np.ndarray, returns: list[tuple[int, int]]) -> np.ndarray:
    """Cumulative counter per device that restarts at 0 when a repaired device returns."""
    cum = np.cumsum(increments, axis=0)
    for d, r in sorted(returns, key=lambda x: x[1]):
        cum[r:, d] -= cum[r - 1, d]
    return cum


def _telemetry_frame(
    cfg: FleetConfig,
    fleet: list[Node],
    device_ids: np.ndarray,
    device_node: np.ndarray,
    values: np.ndarray,
    up: np.ndarray,
) -> pd.DataFrame:
    """Long frame ordered by ts, device, metric; rows only while the device is up."""
    steps, n_dev, n_met = values.shape
    keep = np.repeat(up.ravel(), n_met)
    dev = np.tile(np.repeat(np.arange(n_dev), n_met), steps)[keep]
    node_ids = np.array([fleet[i].node_id for i in device_node], dtype=object)
    frame = pd.DataFrame(
        {
            "ts": np.repeat(cfg.times()[:steps].to_numpy(), n_dev * n_met)[keep],
            "device_id": device_ids[dev],
            "node_id": node_ids[dev],
            "metric": np.tile(np.array(TELEMETRY_METRICS, dtype=object), steps * n_dev)[keep],
            "value": values.ravel()[keep],
        }
    )
    return frame[TELEMETRY_COLUMNS]


def _failures_frame(
    cfg: FleetConfig,
    fleet: list[Node],
    device_ids: np.ndarray,
    device_node: np.ndarray,
    rows: list[tuple[int, int, str, int]],
) -> pd.DataFrame:
    """Failure events; each falls within the 5 minutes after the device's last reading."""
    times = cfg.times()
    frame = pd.DataFrame(
        {
            "ts": [times[t] + pd.Timedelta(seconds=s) for _, t, _, s in rows],
            "device_id": [device_ids[d] for d, _, _, _ in rows],
            "node_id": [fleet[device_node[d]].node_id for d, _, _, _ in rows],
            "failure_type": [k for _, _, k, _ in rows],
        },
        columns=FAILURE_COLUMNS,
    )
    frame["ts"] = pd.to_datetime(frame["ts"])
    return frame.sort_values(["ts", "device_id"], kind="stable").reset_index(drop=True)
