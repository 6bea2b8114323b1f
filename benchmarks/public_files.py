"""The public data sets' files as the benchmarks read them: every file of a kind in a folder,
as one table. A copy that adds a larger slice beside the one here (PdM machines 1-20 beside
1-10, the full spot history beside three instance types) is read whole, not the first
file by name."""
from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd


def union_csv(folder: Path, pattern: str, keys: list[str], time_column: str) -> tuple[pd.DataFrame, list[Path]]:
    """All ``pattern`` files in ``folder`` as one frame, with ``time_column`` parsed to UTC
    instants (the files may write times differently; a time without a zone is UTC) and a row
    repeated across files (same ``keys`` and instant) kept once, the first file's by name;
    and the files read. None found is an error naming the folder and pattern."""
    files = sorted(folder.glob(pattern))
    if not files:
        raise FileNotFoundError(f"{folder}: no file matches {pattern}")
    frames = [pd.read_csv(f) for f in files]
    data = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    data[time_column] = pd.to_datetime(data[time_column], utc=True, format="mixed")
    if len(frames) > 1:
        data = data[~data.duplicated([*keys, time_column])].reset_index(drop=True)
    return data, files


def pdm_telemetry(folder: Path, tmp: Path) -> Path:
    """The PdM telemetry file to read: the only ``PdM_telemetry*.csv*``, or the union of
    several, written once to a folder of ``tmp`` beside copies of the folder's other files
    (``headroom convert --from azure-pdm`` reads the errors and failures beside the
    telemetry)."""
    files = sorted(folder.glob("PdM_telemetry*.csv*"))
    if len(files) == 1:
        return files[0]
    union = tmp / "pdm-union"
    out = union / "PdM_telemetry_union.csv"
    if not out.is_file():
        data, read = union_csv(folder, "PdM_telemetry*.csv*", ["machineID"], "datetime")
        union.mkdir(parents=True, exist_ok=True)
        for other in sorted(p for p in folder.iterdir() if p.is_file() and p not in read):
            shutil.copyfile(other, union / other.name)
        # PdM writes its telemetry times without a zone: so does the union
        data["datetime"] = data["datetime"].dt.tz_localize(None).dt.strftime("%Y-%m-%d %H:%M:%S")
        data.to_csv(out, index=False)
        print(f"PdM telemetry: {len(read)} files ({', '.join(f.name for f in read)}) -> {len(data)} rows, "
              f"{data['machineID'].nunique()} machines", flush=True)
    return out


def aws_spot(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The AWS spot folder in headroom's contract: every ``aws_spot_price_history_*.csv.gz``
    (a price change listed in two files once) as ``ts`` (UTC, zone-less), provider aws,
    region, zone, instance_type, product, price; and ``on_demand_prices.csv`` as provider,
    region, instance_type, on_demand_price."""
    raw, _ = union_csv(folder, "aws_spot_price_history_*.csv.gz",
                       ["region", "availability_zone", "instance_type", "product_description"], "timestamp_utc")
    prices = pd.DataFrame({
        "ts": raw["timestamp_utc"].dt.tz_localize(None), "provider": "aws", "region": raw["region"],
        "zone": raw["availability_zone"], "instance_type": raw["instance_type"],
        "product": raw["product_description"], "price": raw["spot_price_usd_per_hour"],
    })
    od = pd.read_csv(folder / "on_demand_prices.csv")
    on_demand = pd.DataFrame({"provider": "aws", "region": od["region"], "instance_type": od["instance_type"],
                              "on_demand_price": od["on_demand_usd_per_hour"]})
    return prices, on_demand
