"""The public data sets' files as the benchmarks read them: every file of a kind in a folder,
as one table. A copy that adds a larger slice beside the one here (PdM machines 1-20 beside
1-10, the full spot history beside three instance types) is read whole, not the first
file by name."""
from __future__ import annotations

from pathlib import Path

import pandas as pd


def union_csv(folder: Path, pattern: str, keys: list[str], time_column: str) -> tuple[pd.DataFrame, list[Path]]:
    """All ``pattern`` files in ``folder`` as one frame, a row repeated across files kept once
    (the first file's, by name), ``keys`` with ``time_column`` compared as instants (the
    files may write times differently); and the files read. None found is an error naming
    the folder and pattern."""
    files = sorted(folder.glob(pattern))
    if not files:
        raise FileNotFoundError(f"{folder}: no file matches {pattern}")
    frames = [pd.read_csv(f) for f in files]
    data = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    if len(frames) > 1:
        at = pd.to_datetime(data[time_column], utc=True, format="mixed")
        data = data[~pd.concat([at.rename("_at"), data[keys]], axis=1).duplicated()].reset_index(drop=True)
    return data, files


def pdm_telemetry(folder: Path, tmp: Path) -> Path:
    """The PdM telemetry file to read: the only ``PdM_telemetry*.csv*``, or the union of
    several written once to ``tmp``."""
    files = sorted(folder.glob("PdM_telemetry*.csv*"))
    if len(files) == 1:
        return files[0]
    out = tmp / "PdM_telemetry_union.csv"
    if not out.is_file():
        data, read = union_csv(folder, "PdM_telemetry*.csv*", ["machineID"], "datetime")
        data.to_csv(out, index=False)
        print(f"PdM telemetry: {len(read)} files ({', '.join(f.name for f in read)}) -> {len(data)} rows, "
              f"{data['machineID'].nunique()} machines", flush=True)
    return out


def aws_spot_prices(folder: Path) -> pd.DataFrame:
    """Every ``aws_spot_price_history_*.csv.gz``, a price change listed in two files once."""
    data, _ = union_csv(folder, "aws_spot_price_history_*.csv.gz",
                        ["region", "availability_zone", "instance_type", "product_description"], "timestamp_utc")
    return data
