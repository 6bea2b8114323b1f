"""The synthetic fleet's shape: pools, nodes, column orders, and the shared random helpers."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.signal import lfilter

STEP_MINUTES = 5
STEPS_PER_HOUR = 60 // STEP_MINUTES
STEPS_PER_DAY = 24 * STEPS_PER_HOUR
TS_FORMAT = "%Y-%m-%dT%H:%M:%S"

UTILIZATION_COLUMNS = ["ts", "cluster", "pool", "node_id", "resource", "used", "capacity"]
TELEMETRY_COLUMNS = ["ts", "device_id", "node_id", "metric", "value"]
FAILURE_COLUMNS = ["ts", "device_id", "node_id", "failure_type"]
SPOT_COLUMNS = ["ts", "provider", "region", "zone", "instance_type", "product", "price"]
CATALOG_COLUMNS = [
    "provider", "region", "instance_type", "location", "resource", "units", "vcpus",
    "memory_gb", "on_demand_price", "reserved_1y_price", "reserved_3y_price", "tflops",
]
BURST_COLUMNS = ["unique_id", "start", "end"]
TELEMETRY_METRICS = ("gpu_temp", "power_usage", "ecc_sbe", "ecc_dbe", "xid", "gpu_util")
FAILURE_TYPES = ("xid_79_fell_off_bus", "dbe_ecc", "thermal")


@dataclass(frozen=True)
class PoolSpec:
    """One homogeneous pool of nodes and the shape of its demand."""

    cluster: str
    pool: str
    kind: str  # "train" (night-heavy), "infer" (day-heavy) or "cpu" (batch/services)
    share: float  # fraction of the fleet's nodes
    gpus: int  # GPUs per node (0 for CPU pools)
    cores: int
    mem_gib: int
    idle_watts: float = 0.0
    max_watts: float = 0.0

    @property
    def resources(self) -> tuple[str, ...]:
        return ("gpu", "cpu", "mem") if self.gpus else ("cpu", "mem")


DEFAULT_POOLS: tuple[PoolSpec, ...] = (
    PoolSpec("train-a", "h100", "train", 0.42, 4, 96, 1024, 70.0, 700.0),
    PoolSpec("infer-b", "a100", "infer", 0.33, 4, 64, 512, 50.0, 400.0),
    PoolSpec("batch-c", "cpu", "cpu", 0.25, 0, 64, 256),
)


@dataclass(frozen=True)
class FleetConfig:
    """What to generate: size, span, seed and the pools."""

    nodes: int = 12
    days: int = 28
    seed: int = 0
    start: str = "2026-01-05"
    pools: tuple[PoolSpec, ...] = DEFAULT_POOLS

    def __post_init__(self) -> None:
        if self.nodes < len(self.pools):
            raise ValueError(f"nodes must be >= {len(self.pools)} (one per pool), got {self.nodes}")
        if self.days < 2:
            raise ValueError(f"days must be >= 2, got {self.days}")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")

    @property
    def steps(self) -> int:
        return self.days * STEPS_PER_DAY

    def times(self) -> pd.DatetimeIndex:
        """The 5-minute grid, naive UTC."""
        return pd.date_range(pd.Timestamp(self.start), periods=self.steps, freq=f"{STEP_MINUTES}min")


@dataclass(frozen=True)
class Node:
    """One node of the fleet."""

    node_id: str
    spec: PoolSpec
    index_in_pool: int


def nodes_per_pool(cfg: FleetConfig) -> list[int]:
    """Split ``cfg.nodes`` over the pools by share, at least one node each."""
    shares = np.array([p.share for p in cfg.pools], dtype=float)
    counts = np.maximum(1, np.floor(shares / shares.sum() * cfg.nodes).astype(int))
    while counts.sum() < cfg.nodes:  # hand leftovers to the pool furthest below its share
        counts[np.argmax(shares / shares.sum() * cfg.nodes - counts)] += 1
    while counts.sum() > cfg.nodes:
        counts[np.argmax(counts)] -= 1
    return [int(c) for c in counts]


def build_nodes(cfg: FleetConfig) -> list[Node]:
    """The fleet's nodes, pool by pool."""
    nodes: list[Node] = []
    for spec, count in zip(cfg.pools, nodes_per_pool(cfg)):
        width = max(2, len(str(count)))  # ids sort as they count: n009 before n010 and n100
        for i in range(count):
            nodes.append(Node(f"{spec.cluster}-{spec.pool}-n{i + 1:0{width}d}", spec, i))
    return nodes


def ar1(rng: np.random.Generator, steps: int, width: int, tau_steps: float, sd: float) -> np.ndarray:
    """Stationary AR(1) noise, shape (steps, width), correlation time ``tau_steps``, std ``sd``."""
    phi = float(np.exp(-1.0 / max(tau_steps, 1e-9)))
    eps = rng.standard_normal((steps, width)) * sd * np.sqrt(1.0 - phi * phi)
    eps[0] = rng.standard_normal(width) * sd  # start in the stationary distribution
    return lfilter([1.0], [1.0, -phi], eps, axis=0)


def seed_streams(seed: int, n: int) -> list[np.random.Generator]:
    """Independent generators per component, so that changing one part leaves the others."""
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(n)]
