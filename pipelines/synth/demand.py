"""Synthetic demand: tidal pool profiles, growth, noise and labelled bursts, down to nodes."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from pipelines.synth.config import (
    BURST_COLUMNS,
    STEP_MINUTES,
    STEPS_PER_DAY,
    STEPS_PER_HOUR,
    UTILIZATION_COLUMNS,
    FleetConfig,
    Node,
    PoolSpec,
    ar1,
)

MAX_FRAC = 0.97  # nodes never report more than this share of capacity busy


@dataclass(frozen=True)
class DemandNoise:
    """Noise levels; pool-level terms survive aggregation, node-level terms mostly average out."""

    growth_per_day: float = 0.009
    slow_sd: float = 0.06  # multi-day level swings (log scale)
    slow_tau_hours: float = 96.0
    fast_sd: float = 0.03  # sub-hour pool jitter (log scale)
    fast_tau_steps: float = 6.0
    node_sd: float = 0.10
    node_tau_steps: float = 4.0
    bursts_per_week: float = 1.0
    burst_hours: tuple[float, float] = (1.5, 5.0)
    burst_amplitude: tuple[float, float] = (0.10, 0.25)  # added share of pool capacity


@dataclass(frozen=True)
class Demand:
    """Per-node busy fractions, shape (steps, nodes), and the burst ground truth."""

    primary: np.ndarray  # gpu share for GPU nodes, cpu share for CPU nodes
    cpu: np.ndarray
    mem: np.ndarray
    bursts: pd.DataFrame

    @property
    def gpu_frac(self) -> np.ndarray:
        return self.primary


def _night_weight(hours: np.ndarray) -> np.ndarray:
    """Smooth 0..1 weight, ~1 from 20:00 to 06:00 UTC."""
    c = np.cos(2 * np.pi * (hours - 1.0) / 24.0) - np.cos(2 * np.pi * 5.0 / 24.0)
    return 1.0 / (1.0 + np.exp(-10.0 * c))


def base_profile(kind: str, hours: np.ndarray, weekday: np.ndarray) -> np.ndarray:
    """Expected busy share of capacity by hour of day and weekday, before growth and noise."""
    weekend = weekday >= 5
    if kind == "train":  # jobs launched for the night: night load ~3x the day
        level = 0.14 + 0.28 * _night_weight(hours)
        return level * np.where(weekend, 1.08, 1.0)
    if kind == "infer":  # user traffic peaks in the (US/EU) afternoon
        level = 0.12 + 0.27 * (0.5 + 0.5 * np.cos(2 * np.pi * (hours - 15.0) / 24.0)) ** 2
        return level * np.where(weekend, 0.72, 1.0)
    if kind == "cpu":  # services by day plus a nightly batch window around 03:00
        d = (hours - 3.0 + 12.0) % 24.0 - 12.0
        level = 0.17 + 0.10 * (0.5 + 0.5 * np.cos(2 * np.pi * (hours - 13.0) / 24.0)) + 0.06 * np.exp(-d * d)
        return level * np.where(weekend, 0.85, 1.0)
    raise ValueError(f"unknown pool kind {kind!r}")


def _bursts(
    cfg: FleetConfig, spec: PoolSpec, noise: DemandNoise, rng: np.random.Generator
) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Additive burst share, shape (steps,), and the (start, end) step of each burst."""
    steps = cfg.steps
    add = np.zeros(steps)
    spans: list[tuple[int, int]] = []
    n = rng.poisson(noise.bursts_per_week * cfg.days / 7.0)
    for _ in range(n):
        length = int(rng.uniform(*noise.burst_hours) * STEPS_PER_HOUR)
        start = int(rng.integers(STEPS_PER_DAY // 2, max(STEPS_PER_DAY, steps - length - 1)))
        amp = rng.uniform(*noise.burst_amplitude)
        end = min(start + length, steps - 1)
        if any(start < e + STEPS_PER_HOUR * 6 and s < end + STEPS_PER_HOUR * 6 for s, e in spans):
            continue  # keep bursts apart so each label is one event
        ramp_up, ramp_down = 3, 6
        idx = np.arange(start, min(end + ramp_down, steps))
        shape = np.minimum(1.0, (idx - start + 1) / ramp_up)
        shape = np.where(idx > end, 1.0 - (idx - end) / ramp_down, shape)
        add[idx] += amp * shape
        spans.append((start, end))
    return add, sorted(spans)


def simulate_demand(
    cfg: FleetConfig, fleet: list[Node], rng: np.random.Generator, noise: DemandNoise = DemandNoise()
) -> Demand:
    """Pool profiles x growth x noise + bursts, split over nodes with node-level noise."""
    times = cfg.times()
    steps = cfg.steps
    hours = (times.hour + times.minute / 60.0).to_numpy(dtype=float)
    weekday = times.weekday.to_numpy()
    t_days = np.arange(steps) * STEP_MINUTES / 1440.0
    growth = np.exp(noise.growth_per_day * t_days)
    primary = np.zeros((steps, len(fleet)))
    burst_rows: list[tuple[str, pd.Timestamp, pd.Timestamp]] = []
    for spec in cfg.pools:
        cols = [i for i, n in enumerate(fleet) if n.spec == spec]
        if not cols:
            continue
        slow = ar1(rng, steps, 1, noise.slow_tau_hours * STEPS_PER_HOUR, noise.slow_sd)[:, 0]
        fast = ar1(rng, steps, 1, noise.fast_tau_steps, noise.fast_sd)[:, 0]
        burst, spans = _bursts(cfg, spec, noise, rng)
        pool = base_profile(spec.kind, hours, weekday) * growth * np.exp(slow + fast) + burst
        weights = rng.uniform(0.85, 1.15, len(cols))
        weights /= weights.mean()
        node_noise = ar1(rng, steps, len(cols), noise.node_tau_steps, noise.node_sd)
        primary[:, cols] = pool[:, None] * weights[None, :] * np.exp(node_noise)
        for s, e in spans:
            for resource in spec.resources:
                burst_rows.append((f"{spec.cluster}/{spec.pool}/{resource}", times[s], times[e]))
    primary = np.clip(primary, 0.0, MAX_FRAC)
    is_gpu = np.array([n.spec.gpus > 0 for n in fleet])
    jitter_cpu = ar1(rng, steps, len(fleet), 6.0, 0.02)
    jitter_mem = ar1(rng, steps, len(fleet), 24.0, 0.01)
    cpu = np.where(is_gpu, 0.08 + 0.45 * primary + jitter_cpu, primary)
    mem = np.where(is_gpu, 0.12 + 0.5 * primary, 0.15 + 0.55 * primary) + jitter_mem
    bursts = pd.DataFrame(burst_rows, columns=BURST_COLUMNS)
    bursts = bursts.sort_values(["unique_id", "start"], kind="stable").reset_index(drop=True)
    return Demand(primary, np.clip(cpu, 0.0, MAX_FRAC), np.clip(mem, 0.0, MAX_FRAC), bursts)


def utilization_frame(
    cfg: FleetConfig,
    fleet: list[Node],
    demand: Demand,
    device_util: np.ndarray,
    device_up: np.ndarray,
    device_node: np.ndarray,
) -> pd.DataFrame:
    """Long utilization frame; GPU used is the sum of its devices' utilization (so both agree)."""
    steps = cfg.steps
    columns: list[tuple[int, str, np.ndarray, np.ndarray]] = []  # node, resource, used, capacity
    for i, node in enumerate(fleet):
        spec = node.spec
        if spec.gpus:
            mine = device_node == i
            used = np.round(np.round(device_util[:, mine] * 100.0, 1).sum(axis=1) / 100.0, 3)
            cap = device_up[:, mine].sum(axis=1).astype(float)
            columns.append((i, "gpu", used, cap))
        for resource, frac, size in (("cpu", demand.cpu, spec.cores), ("mem", demand.mem, spec.mem_gib)):
            columns.append((i, resource, np.round(frac[:, i] * size, 2), np.full(steps, float(size))))
    width = len(columns)
    used = np.stack([c[2] for c in columns], axis=1).ravel()
    cap = np.stack([c[3] for c in columns], axis=1).ravel()
    node_idx = np.array([c[0] for c in columns])
    clusters = np.array([fleet[i].spec.cluster for i in node_idx], dtype=object)
    pools = np.array([fleet[i].spec.pool for i in node_idx], dtype=object)
    node_ids = np.array([fleet[i].node_id for i in node_idx], dtype=object)
    resources = np.array([c[1] for c in columns], dtype=object)
    frame = pd.DataFrame(
        {
            "ts": np.repeat(cfg.times().to_numpy(), width),
            "cluster": np.tile(clusters, steps),
            "pool": np.tile(pools, steps),
            "node_id": np.tile(node_ids, steps),
            "resource": np.tile(resources, steps),
            "used": np.minimum(used, cap),
            "capacity": cap,
        }
    )
    return frame[UTILIZATION_COLUMNS]
