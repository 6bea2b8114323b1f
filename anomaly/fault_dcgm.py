"""GPU signals as DCGM exposes them, as fault features of their own.

Recognised by name (case-insensitive; the DCGM field names ``DCGM_FI_DEV_...`` too): the Xid
code seen in an interval (``xid``, ``xid_errors``), the volatile ECC single- and double-bit
totals (``ecc_sbe``, ``ecc_sbe_vol_total``, ``ecc_dbe``, ...: cumulative counters, reset when
the driver reloads), the GPU temperature (``gpu_temp``) and the board power
(``power_usage``). Built by :func:`anomaly.fault_features.build_fault_features` (the one
builder of fit and predict) on its one-row-per-device-and-time table; each value at t comes
from the device's rows in the trailing window up to t (and, for node peers, their readings
at t), so the features of a row are the same whether built from all history or from the
feature span before it.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

# Xid codes by what they point at (NVIDIA's Xid catalogue): the application's own faults,
# GPU memory (DBE, row remapping, ECC), and the board or its bus (NVLink, fell off the bus,
# GSP, micro-controller halt); any other nonzero code is ``other``.
XID_CLASSES = {
    "app": (13, 31, 43, 45, 68, 69),
    "memory": (48, 63, 64, 92, 94, 95),
    "board": (61, 62, 74, 79, 119, 120),
}
SIGNALS = {
    "xid": ("xid", "xid_errors"),
    "sbe": ("ecc_sbe", "ecc_sbe_vol_total", "ecc_sbe_agg_total"),
    "dbe": ("ecc_dbe", "ecc_dbe_vol_total", "ecc_dbe_agg_total"),
    "temp": ("gpu_temp",),
    "power": ("power_usage",),
}


def dcgm_signals(metrics: list[str]) -> dict[str, int]:
    """Which DCGM signal each recognised metric column is: signal -> column index (first match)."""
    out: dict[str, int] = {}
    for j, m in enumerate(metrics):
        name = m.lower().removeprefix("dcgm_fi_dev_")
        for signal, names in SIGNALS.items():
            if name in names and signal not in out:
                out[signal] = j
    return out


def _tag(w: pd.Timedelta) -> str:
    return f"{w / pd.Timedelta(hours=1):g}h"


def _rolled(x: np.ndarray, dev: np.ndarray, index: pd.DatetimeIndex, w: pd.Timedelta, how: str) -> np.ndarray:
    """A trailing-window statistic of ``x`` per device (rows sorted by device, then time)."""
    r = pd.Series(x, index=index).groupby(dev, sort=False).rolling(w, min_periods=1)
    return getattr(r, how)().to_numpy()


def _increments(x: np.ndarray, dev: np.ndarray) -> np.ndarray:
    """Per-row increase of a cumulative counter over the device's previous reading: a drop is
    a reset, after which the new reading counts from zero; a device's first reading, and a
    missing one, add nothing (nothing to differ from)."""
    s = pd.Series(x)
    before = s.groupby(dev, sort=False).ffill().groupby(dev, sort=False).shift(1).to_numpy()
    inc = np.where(x >= before, x - before, x)  # x < before: reset, counted from 0
    return np.where(np.isnan(x) | np.isnan(before), 0.0, inc)


def _last_reading(x: np.ndarray, dev: np.ndarray, index: pd.DatetimeIndex, within: pd.Timedelta) -> np.ndarray:
    """Each row's latest reading of ``x`` on its device, if taken within ``within`` (NaN
    otherwise): no older than the telemetry that scoring reads."""
    at = np.where(np.isnan(x), np.nan, index.asi8.astype(float))
    last = pd.Series(x).groupby(dev, sort=False).ffill().to_numpy()
    seen = pd.Series(at).groupby(dev, sort=False).ffill().to_numpy()
    return np.where(index.asi8 - seen <= within.value, last, np.nan)


def dcgm_features(metrics: list[str], values: np.ndarray, dev: np.ndarray, times: np.ndarray,
                  node: np.ndarray, windows: list[pd.Timedelta], peers: np.ndarray | None = None
                  ) -> dict[str, np.ndarray]:
    """DCGM features per row of ``values`` (a column per metric, rows sorted by device code
    ``dev`` then ``times``; ``node`` the row's node or None); empty without DCGM metrics.
    ``peers``: :func:`peer_deviation` of the temperature, when built over more rows (the node's
    other devices) than these."""
    found = dcgm_signals(metrics)
    if not found:
        return {}
    index = pd.DatetimeIndex(times)
    out: dict[str, np.ndarray] = {}
    for signal in ("sbe", "dbe"):
        if signal in found:
            inc = _increments(values[:, found[signal]], dev)
            out[f"dcgm_{signal}_inc"] = inc
            # the counter's own total since it last reset: a long baseline read from the latest
            # reading alone, so a card that always emits (a steady share of its total each day)
            # is told from one whose count took off only lately (most of its total recent)
            level = _last_reading(values[:, found[signal]], dev, index, max(windows))
            for w in windows:
                recent = _rolled(inc, dev, index, w, "sum")
                out[f"dcgm_{signal}_inc_{_tag(w)}"] = recent
                out[f"dcgm_{signal}_recent_share_{_tag(w)}"] = np.minimum(recent / np.maximum(level, 1.0), 1.0)
    if "xid" in found:
        code = np.nan_to_num(values[:, found["xid"]], nan=0.0)
        seen = code > 0
        known = np.zeros(len(code), dtype=bool)
        classes = {}
        for cls, codes in XID_CLASSES.items():
            classes[cls] = np.isin(code, codes)
            known |= classes[cls]
        classes["other"] = seen & ~known
        for w in windows:
            out[f"dcgm_xid_count_{_tag(w)}"] = _rolled(seen.astype(float), dev, index, w, "sum")
            for cls, mask in classes.items():
                out[f"dcgm_xid_{cls}_count_{_tag(w)}"] = _rolled(mask.astype(float), dev, index, w, "sum")
    longest = max(windows)
    if "temp" in found:
        temp = values[:, found["temp"]]
        # against the device's own recent baseline: a GPU running hot for itself
        out["dcgm_temp_vs_own"] = temp - _rolled(temp, dev, index, longest, "mean")
        # against its node's other GPUs at the same time: same room, same load, one runs hot
        out["dcgm_temp_vs_peers"] = peer_deviation(temp, node, times) if peers is None else peers
        out[f"dcgm_temp_vs_peers_mean_{_tag(min(windows))}"] = _rolled(out["dcgm_temp_vs_peers"], dev, index,
                                                                       min(windows), "mean")
    if "temp" in found and "power" in found:
        out.update(_thermal_residual(values[:, found["temp"]], values[:, found["power"]], dev, index, windows))
    if "power" in found:
        power = values[:, found["power"]]
        step = pd.Series(power).groupby(dev, sort=False).diff().to_numpy()
        for w in windows:
            out[f"dcgm_power_jitter_{_tag(w)}"] = _rolled(np.abs(step), dev, index, w, "mean")
    return out


def _thermal_residual(temp: np.ndarray, power: np.ndarray, dev: np.ndarray, index: pd.DatetimeIndex,
                      windows: list[pd.Timedelta]) -> dict[str, np.ndarray]:
    """How much hotter a GPU runs than its own power draw explains: temperature minus the
    device's least-squares line of temperature on power over the longest trailing window.

    A GPU's temperature follows its load (ambient + thermal resistance x watts), so raw
    temperature mostly says how busy it is; a failing fan, a clogged heatsink or a degrading
    board shows as heat the watts do not explain. The line's slope is the device's thermal
    resistance, itself a feature. Each row uses only readings up to it."""
    longest = max(windows)
    ok = np.isfinite(temp) & np.isfinite(power)
    t, p = np.where(ok, temp, np.nan), np.where(ok, power, np.nan)
    mt, mp = _rolled(t, dev, index, longest, "mean"), _rolled(p, dev, index, longest, "mean")
    mtp, mpp = _rolled(t * p, dev, index, longest, "mean"), _rolled(p * p, dev, index, longest, "mean")
    # a prior of 1 W^2 on the variance shrinks the slope to 0 where the draw barely moves (an
    # idle GPU says nothing of its resistance): the residual is then temperature vs own mean
    slope = (mtp - mt * mp) / (np.maximum(mpp - mp * mp, 0.0) + 1.0)
    out = {"dcgm_thermal_resistance": slope, "dcgm_thermal_residual": t - mt - slope * (p - mp)}
    # the recent mean residual against the row's own line (not a mean of past rows' residuals,
    # each from its own older window): so no feature reaches back past the longest window
    for w in windows:
        if w < longest:
            mt_w, mp_w = _rolled(t, dev, index, w, "mean"), _rolled(p, dev, index, w, "mean")
            out[f"dcgm_thermal_residual_mean_{_tag(w)}"] = mt_w - mt - slope * (mp_w - mp)
    return out


def peer_deviation(x: np.ndarray, node: np.ndarray, times: np.ndarray) -> np.ndarray:
    """``x`` minus the mean of the other devices of its node at the same time; NaN for a device
    alone on its node then (or without a node)."""
    frame = pd.DataFrame({"node": pd.Series(node, dtype=object), "ts": times, "x": x})
    has = frame["node"].notna() & frame["x"].notna()
    g = frame[has].groupby(["node", "ts"], sort=False)["x"]
    total = g.transform("sum").reindex(frame.index)
    count = g.transform("count").reindex(frame.index)
    with np.errstate(invalid="ignore", divide="ignore"):
        others = (total - frame["x"]) / (count - 1)
    return np.where(count.to_numpy() >= 2, (frame["x"] - others).to_numpy(dtype=float), np.nan)
