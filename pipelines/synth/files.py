"""Write a generated fleet to a folder: one CSV per input kind, ground truth and a manifest."""
from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path

import duckdb
import pandas as pd

from pipelines.synth.config import TELEMETRY_METRICS, TS_FORMAT, FleetConfig, build_nodes
from pipelines.synth.fleet import generate_fleet

log = logging.getLogger(__name__)

FILES = {
    "utilization": "utilization.csv",
    "telemetry": "telemetry.csv",
    "failures": "failures.csv",
    "spot_prices": "spot_prices.csv",
    "catalog": "catalog.csv",
    "bursts": "bursts.csv",
}

def _write_csv(frame: pd.DataFrame, path: Path) -> None:
    """Write ``frame`` as CSV through a temporary file, then rename it over ``path``.

    DuckDB's writer is about twice as fast as pandas' on the telemetry file and keeps the
    row order; timestamp columns become ISO-8601 strings (``2026-01-05T13:05:00``).
    """
    select = ", ".join(
        f"strftime(CAST(\"{c}\" AS TIMESTAMP), '{TS_FORMAT}') AS \"{c}\""
        if pd.api.types.is_datetime64_any_dtype(frame[c]) else f'"{c}"'
        for c in frame.columns
    )
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        con = duckdb.connect()
        try:
            con.register("frame", frame)
            con.execute(f"COPY (SELECT {select} FROM frame) TO '{_sql_path(tmp)}' (HEADER, DELIMITER ',')")
        finally:
            con.close()
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; these are shareable data files
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_text(path: Path, text: str) -> None:
    """Write a small text file atomically."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; these are shareable data files
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _sql_path(path: str) -> str:
    return path.replace("'", "''")


def manifest(cfg: FleetConfig, frames: dict[str, pd.DataFrame]) -> dict:
    """What was generated: parameters, files, row counts, ground truth and metric semantics."""
    fleet = build_nodes(cfg)
    times = cfg.times()
    return {
        "generator": "headroom synthetic fleet",
        "seed": cfg.seed,
        "nodes": cfg.nodes,
        "days": cfg.days,
        "start": times[0].strftime(TS_FORMAT),
        "end": times[-1].strftime(TS_FORMAT),
        "resolution_minutes": 5,
        "pools": [
            {"cluster": p.cluster, "pool": p.pool, "kind": p.kind, "nodes": sum(n.spec == p for n in fleet),
             "gpus_per_node": p.gpus, "cores_per_node": p.cores, "mem_gib_per_node": p.mem_gib}
            for p in cfg.pools
        ],
        "files": {FILES[k]: {"rows": len(v), "columns": list(v.columns)} for k, v in frames.items()},
        "inputs": {k.replace("_", "-"): FILES[k] for k in FILES if k != "bursts"},
        "ground_truth": {
            "failures.csv": "injected GPU failures; sensors drift 3-16 h before each",
            "bursts.csv": "demand bursts per unique_id cluster/pool/resource, [start, end] of the plateau",
        },
        "telemetry_metrics": {
            "gpu_temp": "degC", "power_usage": "W", "ecc_sbe": "cumulative volatile SBE count",
            "ecc_dbe": "cumulative volatile DBE count", "xid": "Xid code seen in the interval, 0 if none",
            "gpu_util": "percent",
        },
        "metric_order": list(TELEMETRY_METRICS),
    }


def write_fleet(
    out_dir: str | Path,
    nodes: int = 12,
    days: int = 28,
    seed: int = 0,
    start: str = "2026-01-05",
    telemetry: bool = True,
) -> dict[str, int]:
    """Generate a fleet into ``out_dir`` (created if needed); returns rows per file name.

    With ``telemetry=False`` telemetry.csv is written with its header only.
    """
    cfg = FleetConfig(nodes=nodes, days=days, seed=seed, start=start)
    frames = generate_fleet(nodes=nodes, days=days, seed=seed, start=start, telemetry=telemetry)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for key, name in FILES.items():
        _write_csv(frames[key], out / name)
        log.info("wrote %s (%d rows)", out / name, len(frames[key]))
    _write_text(out / "manifest.json", json.dumps(manifest(cfg, frames), indent=2, sort_keys=True) + "\n")
    return {FILES[k]: len(frames[k]) for k in FILES}
