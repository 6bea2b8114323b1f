"""Grid Workloads Archive (GWA-T-12 Bitbrains/Materna) per-VM files -> utilization rows."""
from __future__ import annotations

import logging
import math
from pathlib import Path

import pandas as pd

from pipelines.ingest.adapters import IngestFileError, header_of, open_text

log = logging.getLogger(__name__)


GWA_COLUMNS = ("Timestamp [ms]", "CPU cores", "CPU capacity provisioned [MHZ]", "CPU usage [MHZ]",
               "Memory capacity provisioned [KB]", "Memory usage [KB]")


def gwa_frame(path: Path, cluster: str, pool: str) -> pd.DataFrame:
    """A Grid Workloads Archive (GWA-T-12 Bitbrains/Materna) per-VM file -> utilization rows.

    The VM id is the file name, ``vm<N>`` when the name is a number ``N`` (as the archive
    numbers its VMs, and as ``headroom convert --from bitbrains-hourly`` names the same VMs,
    so raw and hourly files of one fleet agree); CPU is converted from MHz to cores
    (usage / (provisioned MHz / cores)) and memory from KB to GiB."""
    header = header_of(path, ";")
    missing = [c for c in GWA_COLUMNS if c not in header]
    if missing:
        raise IngestFileError(path, f"not a GWA-T-12 file: missing column(s) {', '.join(missing)}")
    try:
        with open_text(path) as fh:
            text = fh.read().splitlines()
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise IngestFileError(path, f"unreadable: {exc}") from exc
    pos = {c: header.index(c) for c in GWA_COLUMNS}
    stem = path.name.split(".")[0]
    node = f"vm{stem}" if stem.isdigit() else stem
    rows = []
    for n, line in enumerate(text[1:], start=2):
        if not line.strip():
            continue
        f = [x.strip() for x in line.split(";")]

        def get(c: str, f: list[str] = f) -> str:
            return f[pos[c]] if pos[c] < len(f) else ""

        cores, cap_mhz, use_mhz = _float(get("CPU cores")), _float(get("CPU capacity provisioned [MHZ]")), _float(get("CPU usage [MHZ]"))
        per_core = cap_mhz / cores if cores and cores > 0 and cap_mhz > 0 else math.nan
        ts = get("Timestamp [ms]")
        # usage in cores is undefined without cores and provisioned MHz: the row is rejected
        # with that reason, never loaded with the raw MHz as if it were cores
        reject = None
        if not per_core > 0:
            reject = (f"cpu: usage in MHz cannot be converted to cores with {get('CPU cores') or 'no'} CPU cores "
                      f"and {get('CPU capacity provisioned [MHZ]') or 'no'} MHz provisioned")
        used = _fmt(use_mhz / per_core, get("CPU usage [MHZ]")) if reject is None else ""
        rows.append((ts, cluster, pool, node, "cpu", used, _fmt(cores, get("CPU cores")), n, line, reject))
        mem_cap, mem_use = _float(get("Memory capacity provisioned [KB]")), _float(get("Memory usage [KB]"))
        rows.append((ts, cluster, pool, node, "mem", _fmt(mem_use / 1048576.0, get("Memory usage [KB]")),
                     _fmt(mem_cap / 1048576.0, get("Memory capacity provisioned [KB]")), n, line, None))
    return pd.DataFrame(rows, columns=["ts", "cluster", "pool", "node_id", "resource", "used", "capacity", "_line",
                                       "_raw", "_reject"])


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def _fmt(value: float, source: str) -> str:
    """The converted number as text, or the source text when it was not a number (so the
    reject reason shows what the file said)."""
    return repr(value) if not math.isnan(value) else (source or "")
