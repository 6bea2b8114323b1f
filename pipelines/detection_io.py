"""File readers for the detection commands: contract CSV/Parquet in, core frames out.

The core (``anomaly/``) never opens files; these helpers do, and normalise timestamps to
naive UTC. Azure PdM files are recognised by their columns and mapped onto the contract:

* telemetry ``datetime, machineID, volt, rotate, pressure, vibration`` (wide, hourly)
  -> long ``ts, device_id, node_id, metric, value`` with ``device_id = "machine<ID>"``;
* failures ``datetime, machineID, failure`` -> ``ts, device_id, node_id, failure_type``
  (``failure_type`` is the component, comp1..comp4);
* errors ``datetime, machineID, errorID`` and maintenance ``datetime, machineID, comp``
  -> events ``ts, device_id, event_type`` (``error1``.., ``maint_comp1``..);
* machines ``machineID, model, age`` -> devices ``device_id, age_days`` (age in years x 365).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

PDM_METRICS = ("volt", "rotate", "pressure", "vibration")


class InputError(ValueError):
    """A file that cannot be used: the message names the file and the problem."""


def read_table(path: str | Path) -> pd.DataFrame:
    """A CSV (optionally .gz) or Parquet file as a frame."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such file")
    try:
        if p.suffix == ".parquet":
            return pd.read_parquet(p)
        return pd.read_csv(p)
    except Exception as exc:  # noqa: BLE001 - any parse failure is the same user error
        raise InputError(f"{p}: cannot read ({exc})") from exc


def to_utc_naive(values: pd.Series, where: str) -> pd.Series:
    """ISO-8601 (with or without offset) or epoch seconds/milliseconds -> naive UTC."""
    if pd.api.types.is_numeric_dtype(values):
        unit = "ms" if values.abs().max() > 1e11 else "s"
        return pd.to_datetime(values, unit=unit)
    try:
        out = pd.to_datetime(values, utc=True, format="ISO8601")
    except (ValueError, TypeError) as exc:
        raise InputError(f"{where}: unparseable timestamp ({exc})") from exc
    return out.dt.tz_localize(None)


def _need(frame: pd.DataFrame, columns: list[str], path: str | Path) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"{path}: missing column(s) {missing}")


def read_series(path: str | Path) -> pd.DataFrame:
    """Long ``unique_id, ds, y`` (sorted)."""
    f = read_table(path)
    _need(f, ["unique_id", "ds", "y"], path)
    out = pd.DataFrame({
        "unique_id": f["unique_id"].astype(str),
        "ds": to_utc_naive(f["ds"], str(path)),
        "y": pd.to_numeric(f["y"], errors="coerce"),
    })
    if out["y"].isna().any():
        raise InputError(f"{path}: {int(out['y'].isna().sum())} non-numeric y value(s)")
    return out.sort_values(["unique_id", "ds"]).reset_index(drop=True)


def read_windows(path: str | Path) -> dict[str, list[tuple[pd.Timestamp, pd.Timestamp]]]:
    """NAB-style ``{unique_id: [[start, end], ...]}``."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{p}: cannot read windows ({exc})") from exc
    if not isinstance(doc, dict):
        raise InputError(f"{p}: expected an object mapping unique_id to [[start, end], ...]")
    out = {}
    for uid, wins in doc.items():
        try:
            out[str(uid)] = [(pd.Timestamp(a), pd.Timestamp(b)) for a, b in wins]
        except (TypeError, ValueError) as exc:
            raise InputError(f"{p}: bad window list for {uid!r} ({exc})") from exc
        for a, b in out[str(uid)]:
            if b < a:
                raise InputError(f"{p}: window [{a}, {b}] of {uid!r} ends before it starts")
    return out


def _numeric(f: pd.DataFrame, column: str, path: str | Path) -> pd.Series:
    """``f[column]`` as numbers; an empty cell is missing, anything else that is not a
    number is an error naming the file, line and column."""
    values = pd.to_numeric(f[column], errors="coerce")
    bad = values.isna() & f[column].notna() & (f[column].astype(str).str.strip() != "")
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(f"{path}: line {i + 2}, column {column!r}: {f[column].iloc[i]!r} is not a number "
                         f"({int(bad.sum())} such value(s))")
    return values


def read_telemetry(path: str | Path) -> pd.DataFrame:
    """Contract telemetry, or Azure PdM wide telemetry mapped onto it; empty values are
    left out."""
    f = read_table(path)
    if {"machineID", "datetime"} <= set(f.columns) and set(PDM_METRICS) & set(f.columns):
        metrics = [m for m in PDM_METRICS if m in f.columns]
        f = f.assign(**{m: _numeric(f, m, path) for m in metrics})
        long = f.melt(id_vars=["datetime", "machineID"], value_vars=metrics, var_name="metric")
        dev = "machine" + long["machineID"].astype(str)
        return pd.DataFrame({
            "ts": to_utc_naive(long["datetime"], str(path)), "device_id": dev, "node_id": dev,
            "metric": long["metric"], "value": long["value"],
        }).dropna(subset=["value"])
    _need(f, ["ts", "device_id", "metric", "value"], path)
    return pd.DataFrame({
        "ts": to_utc_naive(f["ts"], str(path)), "device_id": f["device_id"].astype(str),
        "node_id": f["node_id"].astype(str) if "node_id" in f.columns else None,
        "metric": f["metric"].astype(str), "value": _numeric(f, "value", path),
    }).dropna(subset=["value"])


def read_failures(path: str | Path) -> pd.DataFrame:
    """Contract failures, or Azure PdM failures mapped onto it."""
    f = read_table(path)
    if {"machineID", "datetime", "failure"} <= set(f.columns):
        dev = "machine" + f["machineID"].astype(str)
        return pd.DataFrame({"ts": to_utc_naive(f["datetime"], str(path)), "device_id": dev,
                             "node_id": dev, "failure_type": f["failure"].astype(str)})
    _need(f, ["ts", "device_id", "failure_type"], path)
    return pd.DataFrame({
        "ts": to_utc_naive(f["ts"], str(path)), "device_id": f["device_id"].astype(str),
        "node_id": f["node_id"].astype(str) if "node_id" in f.columns else None,
        "failure_type": f["failure_type"].astype(str),
    })


def read_events(path: str | Path) -> pd.DataFrame:
    """``ts, device_id, event_type``; PdM errors or maintenance files are mapped onto it."""
    f = read_table(path)
    if {"machineID", "datetime"} <= set(f.columns) and ({"errorID"} & set(f.columns) or {"comp"} & set(f.columns)):
        kind = f["errorID"].astype(str) if "errorID" in f.columns else "maint_" + f["comp"].astype(str)
        return pd.DataFrame({"ts": to_utc_naive(f["datetime"], str(path)),
                             "device_id": "machine" + f["machineID"].astype(str), "event_type": kind})
    _need(f, ["ts", "device_id", "event_type"], path)
    return pd.DataFrame({"ts": to_utc_naive(f["ts"], str(path)), "device_id": f["device_id"].astype(str),
                         "event_type": f["event_type"].astype(str)})


def read_devices(path: str | Path) -> pd.DataFrame:
    """``device_id, age_days``; PdM machines (age in years) are mapped onto it."""
    f = read_table(path)
    if {"machineID", "age"} <= set(f.columns):
        return pd.DataFrame({"device_id": "machine" + f["machineID"].astype(str),
                             "age_days": f["age"].astype(float) * 365.0})
    _need(f, ["device_id", "age_days"], path)
    return pd.DataFrame({"device_id": f["device_id"].astype(str), "age_days": f["age_days"].astype(float)})


def read_spot_prices(path: str | Path) -> pd.DataFrame:
    """Spot-prices contract ``ts, provider, region, zone, instance_type, product, price``."""
    f = read_table(path)
    _need(f, ["ts", "provider", "region", "zone", "instance_type", "product", "price"], path)
    out = f[["provider", "region", "zone", "instance_type", "product"]].astype(str)
    out.insert(0, "ts", to_utc_naive(f["ts"], str(path)))
    out["price"] = pd.to_numeric(f["price"], errors="coerce")
    if out["price"].isna().any() or (out["price"] < 0).any():
        raise InputError(f"{path}: non-numeric or negative price(s)")
    return out


def read_on_demand(path: str | Path) -> pd.DataFrame:
    """``provider, region, instance_type, on_demand_price``."""
    f = read_table(path)
    _need(f, ["provider", "region", "instance_type", "on_demand_price"], path)
    out = f[["provider", "region", "instance_type"]].astype(str)
    out["on_demand_price"] = pd.to_numeric(f["on_demand_price"], errors="coerce")
    return out.dropna(subset=["on_demand_price"])
