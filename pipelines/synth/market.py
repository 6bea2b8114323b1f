"""Synthetic market: an instance catalog (private, public, edge) and spot-price change events.

Spot prices follow a calm/volatile regime per (provider, instance type), shared by its zones.
Spikes (2.5x-8x the base, often above on-demand) hit several zones of a type together and are
mostly announced by rising volatility and a creeping price in the hours before.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.signal import lfilter

from pipelines.synth.config import CATALOG_COLUMNS, SPOT_COLUMNS, FleetConfig, ar1

# provider, region, instance_type, location, resource, units, vcpus, memory_gb, on_demand, tflops
_OFFERS: tuple[tuple, ...] = (
    ("onprem", "us-west-dc", "h100-4x", "private", "gpu", 4, 96, 1024, 8.40, 3956.0),
    ("onprem", "us-west-dc", "a100-4x", "private", "gpu", 4, 64, 512, 4.20, 1248.0),
    ("onprem", "us-west-dc", "cpu-64c", "private", "cpu", 64, 64, 256, 1.10, 4.1),
    ("aws", "us-east-1", "p5.48xlarge", "public", "gpu", 8, 192, 2048, 98.32, 7912.0),
    ("aws", "us-east-1", "p4d.24xlarge", "public", "gpu", 8, 96, 1152, 32.77, 2496.0),
    ("aws", "us-east-1", "g5.12xlarge", "public", "gpu", 4, 48, 192, 5.672, 500.0),
    ("aws", "us-east-1", "m7i.16xlarge", "public", "cpu", 64, 64, 256, 3.2256, 4.1),
    ("gcp", "us-central1", "a3-highgpu-8g", "public", "gpu", 8, 208, 1872, 88.25, 7912.0),
    ("gcp", "us-central1", "a2-highgpu-8g", "public", "gpu", 8, 96, 680, 29.39, 2496.0),
    ("gcp", "us-central1", "g2-standard-48", "public", "gpu", 4, 48, 192, 4.00, 484.0),
    ("gcp", "us-central1", "n2-standard-64", "public", "cpu", 64, 64, 256, 3.1075, 4.1),
    ("azure", "eastus", "Standard_ND96isr_H100_v5", "public", "gpu", 8, 96, 1900, 98.32, 7912.0),
    ("azure", "eastus", "Standard_ND96asr_v4", "public", "gpu", 8, 96, 900, 27.20, 2496.0),
    ("azure", "eastus", "Standard_NV72ads_A10_v5", "public", "gpu", 2, 72, 880, 6.52, 250.0),
    ("azure", "eastus", "Standard_D64s_v5", "public", "cpu", 64, 64, 256, 3.072, 4.1),
    ("edgeco", "edge-nyc", "l4-1x", "edge", "gpu", 1, 8, 32, 0.95, 121.0),
    ("edgeco", "edge-nyc", "cpu-16c", "edge", "cpu", 16, 16, 64, 0.80, 1.0),
    ("edgeco", "edge-fra", "l4-1x", "edge", "gpu", 1, 8, 32, 1.05, 121.0),
    ("edgeco", "edge-fra", "cpu-16c", "edge", "cpu", 16, 16, 64, 0.88, 1.0),
)
# reserved price as a share of on-demand (1 year, 3 years) by location
_RESERVED = {"private": (0.85, 0.70), "public": (0.62, 0.42), "edge": (0.78, 0.60)}
_ZONES = {
    "aws": ("us-east-1a", "us-east-1b", "us-east-1c"),
    "gcp": ("us-central1-a", "us-central1-b", "us-central1-c"),
    "azure": ("eastus-1", "eastus-2", "eastus-3"),
}
_PRODUCT = {"aws": "Linux/UNIX", "gcp": "Linux", "azure": "Linux"}


@dataclass(frozen=True)
class SpotModel:
    """Regimes, spikes and their precursors, on a 10-minute latent grid."""

    step_minutes: int = 10
    calm_hours: float = 60.0  # mean regime durations
    volatile_hours: float = 20.0
    calm_sd: float = 0.002  # log-price step noise
    volatile_sd: float = 0.02
    spikes_per_volatile_day: float = 1.6
    spikes_per_calm_day: float = 0.12
    surprise_share: float = 0.1  # spikes with no precursor
    precursor_hours: tuple[float, float] = (4.0, 10.0)
    spike_multiple: tuple[float, float] = (2.5, 8.0)
    spike_hours: tuple[float, float] = (1.0, 5.0)
    zone_join: float = 0.75  # chance each other zone of the type joins a spike
    min_change: float = 0.01  # relative change that makes a new price row


def catalog_frame() -> pd.DataFrame:
    """The instance catalog: GPU and CPU offers in private, public and edge locations."""
    rows = []
    for prov, region, itype, loc, res, units, vcpus, mem, od, tflops in _OFFERS:
        r1, r3 = _RESERVED[loc]
        rows.append((prov, region, itype, loc, res, float(units), float(vcpus), float(mem), od,
                     round(od * r1, 4), round(od * r3, 4), tflops))
    return pd.DataFrame(rows, columns=CATALOG_COLUMNS)


def _regimes(n: int, sm: SpotModel, rng: np.random.Generator) -> np.ndarray:
    """Boolean volatile-regime path of a two-state Markov chain."""
    per_hour = 60 / sm.step_minutes
    p_cv, p_vc = 1.0 / (sm.calm_hours * per_hour), 1.0 / (sm.volatile_hours * per_hour)
    out = np.zeros(n, dtype=bool)
    state = bool(rng.random() < 0.25)
    switch = rng.random(n)
    for i in range(n):  # n is ~4k per type: a plain loop is fast enough
        out[i] = state
        state = (switch[i] >= p_vc) if state else (switch[i] < p_cv)
    return out


def _type_path(
    n: int, n_zones: int, sm: SpotModel, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Log-price deviation and spike multiplier per zone, shape (n, n_zones)."""
    per_hour = 60 / sm.step_minutes
    volatile = _regimes(n, sm, rng)
    vol = np.where(volatile, sm.volatile_sd, sm.calm_sd)[:, None] * np.ones((1, n_zones))
    drift = np.zeros((n, n_zones))
    mult = np.ones((n, n_zones))
    hazard = np.where(volatile, sm.spikes_per_volatile_day, sm.spikes_per_calm_day) / (24 * per_hour)
    onsets = np.flatnonzero(rng.random(n) < hazard)
    busy_until = -1
    for t0 in onsets:
        pre = 0 if rng.random() < sm.surprise_share else int(rng.uniform(*sm.precursor_hours) * per_hour)
        if t0 - pre <= busy_until:
            continue
        length = int(rng.uniform(*sm.spike_hours) * per_hour)
        peak = rng.uniform(*sm.spike_multiple)
        zones = rng.random(n_zones) < sm.zone_join
        zones[rng.integers(n_zones)] = True
        for z in np.flatnonzero(zones):
            lag = int(rng.integers(0, int(per_hour) + 1))
            start, stop = t0 + lag, min(t0 + lag + length, n)
            if pre:  # volatility rises and the price creeps up before the jump
                idx = np.arange(max(t0 - pre + lag, 0), min(start, n))
                ramp = (idx - (t0 - pre + lag)) / pre
                vol[idx, z] *= 1.0 + 5.0 * ramp
                drift[idx, z] += rng.uniform(0.1, 0.35) * ramp
            if start >= n:
                continue
            m = min(peak * rng.uniform(0.75, 1.05), sm.spike_multiple[1])
            mult[start:stop, z] = m
            decay = np.arange(stop, min(stop + int(per_hour), n))
            mult[decay, z] = 1.0 + (m - 1.0) * (1.0 - (decay - stop + 1) / (per_hour + 1))
            vol[start:stop, z] = np.maximum(vol[start:stop, z], sm.volatile_sd)
        busy_until = t0 + length + 2 * int(per_hour)
    steps = rng.standard_normal((n, n_zones)) * vol
    # mean-reverting log price: an AR(1) driven by regime-dependent innovations
    x = lfilter([1.0], [1.0, -0.98], steps, axis=0)
    return x + drift, mult


def spot_prices_frame(
    cfg: FleetConfig, catalog: pd.DataFrame, rng: np.random.Generator, sm: SpotModel = SpotModel()
) -> pd.DataFrame:
    """Price-change events for every public GPU/CPU type in three zones of its region."""
    n = cfg.days * 24 * 60 // sm.step_minutes
    grid = pd.date_range(pd.Timestamp(cfg.start), periods=n, freq=f"{sm.step_minutes}min").to_numpy()
    frames = []
    public = catalog[catalog["location"] == "public"]
    for offer in public.itertuples(index=False):
        zones = _ZONES[offer.provider]
        dev, mult = _type_path(n, len(zones), sm, rng)
        zone_level = ar1(rng, n, len(zones), 36.0 * 6, 0.03)  # each zone's own slow wander
        for z, zone in enumerate(zones):
            base = offer.on_demand_price * rng.uniform(0.3, 0.45)
            ratio = np.minimum(np.exp(dev[:, z] + zone_level[:, z]) * mult[:, z], sm.spike_multiple[1])
            price = np.round(base * ratio, 4)
            keep = _changes(price, sm.min_change)
            frames.append(
                pd.DataFrame(
                    {
                        "ts": grid[keep],
                        "provider": offer.provider,
                        "region": offer.region,
                        "zone": zone,
                        "instance_type": offer.instance_type,
                        "product": _PRODUCT[offer.provider],
                        "price": price[keep],
                    }
                )
            )
    frame = pd.concat(frames, ignore_index=True)
    frame = frame.sort_values(["ts", "provider", "zone", "instance_type"], kind="stable")
    return frame.reset_index(drop=True)[SPOT_COLUMNS]


def _changes(price: np.ndarray, min_change: float) -> np.ndarray:
    """Rows to publish: the first, then each that moved ``min_change`` from the last published."""
    keep = np.zeros(len(price), dtype=bool)
    last = price[0]
    keep[0] = True
    for i in range(1, len(price)):
        if abs(price[i] - last) > min_change * last:
            keep[i] = True
            last = price[i]
    return keep
