"""Tiny synthetic inputs for the detection tests (no files, no network)."""
from __future__ import annotations

import numpy as np
import pandas as pd


def tidal_series(uid: str = "c/p/gpu", days: int = 28, shift_at: int | None = None,
                 shift: float = 0.0, shift_len: int = 12, seed: int = 0) -> pd.DataFrame:
    """Hourly demand with a strong daily tide (night ~3x day), noise and an optional burst."""
    rng = np.random.default_rng(seed)
    n = days * 24
    t = np.arange(n)
    y = 100 + 60 * np.cos(2 * np.pi * (t % 24) / 24) + rng.normal(0, 4, n)
    if shift_at is not None:
        y[shift_at:shift_at + shift_len] += shift
    return pd.DataFrame({"unique_id": uid, "ds": pd.date_range("2026-01-05", periods=n, freq="h"), "y": y})


def fleet_telemetry(devices: int = 6, days: int = 12, seed: int = 0, freq: str = "h"
                    ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Temperature/power/ECC telemetry (hourly, or every ``freq``); half the devices heat up
    and log ECC errors for ~10 readings before they fail (twice each)."""
    rng = np.random.default_rng(seed)
    step = pd.to_timedelta(pd.tseries.frequencies.to_offset(freq))
    ts = pd.date_range("2026-01-01", periods=int(pd.Timedelta(days=days) / step), freq=freq)
    rows, fails = [], []
    for d in range(devices):
        dev = f"n{d // 2}-gpu{d % 2}"
        temp = 60 + rng.normal(0, 1.5, len(ts))
        ecc = np.zeros(len(ts))
        if d % 2 == 0:
            for at in (int(len(ts) * 0.35) + d * 3, int(len(ts) * 0.8) + d * 2):
                temp[at - 10:at] += np.linspace(2, 15, 10)
                ecc[at - 8:at] = np.arange(1, 9)
                fails.append((ts[at] + pd.Timedelta(minutes=20), dev, f"n{d // 2}", "dbe_ecc"))
        for metric, values in (("gpu_temp", temp), ("power_usage", 300 + rng.normal(0, 5, len(ts))), ("ecc_sbe", ecc)):
            rows.append(pd.DataFrame({"ts": ts, "device_id": dev, "node_id": f"n{d // 2}",
                                      "metric": metric, "value": values}))
    telemetry = pd.concat(rows, ignore_index=True)
    failures = pd.DataFrame(fails, columns=["ts", "device_id", "node_id", "failure_type"])
    return telemetry, failures


def spot_prices(days: int = 40, seed: int = 0) -> pd.DataFrame:
    """Irregular price changes in three zones of one type; spikes (5x) hit all zones
    within a few hours of each other, preceded by a climb."""
    rng = np.random.default_rng(seed)
    rows = []
    spike_days = [8, 15, 22, 29, 36]
    for z, zone in enumerate(("us-east-1a", "us-east-1b", "us-east-1c")):
        t = pd.Timestamp("2026-01-01")
        end = t + pd.Timedelta(days=days)
        while t < end:
            day = (t - pd.Timestamp("2026-01-01")) / pd.Timedelta(days=1)
            price = 1.0 + rng.normal(0, 0.03)
            for s in spike_days:
                start = s + z * 0.1
                if start - 0.5 <= day < start:
                    price *= 1.0 + (day - (start - 0.5)) * 1.5  # the climb
                elif start <= day < start + 0.25:
                    price *= 5.0
            rows.append((t, "aws", "us-east-1", zone, "g5.xlarge", "Linux", round(price, 4)))
            t += pd.Timedelta(minutes=int(rng.integers(20, 90)))
    return pd.DataFrame(rows, columns=["ts", "provider", "region", "zone", "instance_type", "product", "price"])
