"""Synthetic fleet: a seeded, vectorized generator of every input kind in the contract.

``generate_fleet`` returns DataFrames (no I/O); ``synth.files.write_fleet`` writes them as CSV.
The parts live in ``demand`` (utilization, bursts), ``devices`` (telemetry, failures) and
``market`` (catalog, spot prices); ``config`` holds the fleet's shape.
"""
from __future__ import annotations

import logging

import pandas as pd

from pipelines.synth import demand as synth_demand
from pipelines.synth import devices as synth_devices
from pipelines.synth import market as synth_market
from pipelines.synth.config import FleetConfig, build_nodes, seed_streams

log = logging.getLogger(__name__)


def generate_fleet(
    nodes: int = 12, days: int = 28, seed: int = 0, start: str = "2026-01-05", telemetry: bool = True
) -> dict[str, pd.DataFrame]:
    """Generate a fleet: keys utilization, telemetry, failures, spot_prices, catalog, bursts.

    Timestamps are naive UTC ``datetime64``; frames are sorted and in contract column order.
    ``telemetry=False`` leaves the telemetry frame empty (everything else is unchanged), for
    large utilization-only fleets such as the ingest benchmark's.
    """
    cfg = FleetConfig(nodes=nodes, days=days, seed=seed, start=start)
    demand_rng, device_rng, market_rng = seed_streams(seed, 3)
    fleet = build_nodes(cfg)
    demand = synth_demand.simulate_demand(cfg, fleet, demand_rng)
    devices = synth_devices.simulate_devices(cfg, fleet, demand.gpu_frac, device_rng, telemetry=telemetry)
    utilization = synth_demand.utilization_frame(
        cfg, fleet, demand, devices.device_util, devices.device_up, devices.device_node
    )
    catalog = synth_market.catalog_frame()
    spot = synth_market.spot_prices_frame(cfg, catalog, market_rng)
    out = {
        "utilization": utilization,
        "telemetry": devices.telemetry,
        "failures": devices.failures,
        "spot_prices": spot,
        "catalog": catalog,
        "bursts": demand.bursts,
    }
    log.info("generated fleet: %s", {k: len(v) for k, v in out.items()})
    return out
