"""Ingest benchmark: `headroom ingest` of a generated utilization CSV against DuckDB's own
``read_csv`` into a plain table, in the same run. Prints both times, the ratio and peak memory.

    .venv/bin/python benchmarks/ingest.py --rows 5000000
    .venv/bin/python benchmarks/ingest.py --prometheus-hosts 50 --prometheus-steps 1000
    .venv/bin/python benchmarks/ingest.py --prometheus-hosts 125 --prometheus-steps 3667 \
        --prometheus-source dcgm --prometheus-kind telemetry --gzip

The second form times a node-exporter ``query_range`` JSON (CPU counters of 4 CPUs x 4 modes
and MemTotal/MemAvailable per host, 15 s steps) through `headroom ingest --kind utilization`,
against ``json.load`` of the same file alone (the floor of any reader that holds the document).
``--prometheus-source dcgm`` writes a DCGM-exporter export instead (8 GPUs a host, GPU
utilization, temperature and power as dcgm-exporter labels them), loaded as utilization or
telemetry; ``--gzip`` writes ``.json.gz``. Peak RSS is the ingest process's own, also as a
multiple of the file's (uncompressed) size.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd


def write_csv(path: Path, rows: int, seed: int = 0) -> None:
    """A utilization CSV of ``rows`` rows: nodes x 3 resources x 5-minute steps."""
    rng = np.random.default_rng(seed)
    nodes = 100
    steps = -(-rows // (nodes * 3))
    ts = pd.date_range("2026-01-01", periods=steps, freq="5min").strftime("%Y-%m-%dT%H:%M:%S")
    cap = {"gpu": 8.0, "cpu": 96.0, "mem": 1024.0}
    with open(path, "w") as fh:
        fh.write("ts,cluster,pool,node_id,resource,used,capacity\n")
        chunk = 20_000
        for start in range(0, steps, chunk):
            t = np.asarray(ts[start:start + chunk])
            for res, c in cap.items():
                grid_t = np.repeat(t, nodes)
                node = np.tile([f"n{i:03d}" for i in range(nodes)], len(t))
                used = np.round(rng.uniform(0, c, len(grid_t)), 3)
                frame = pd.DataFrame({"ts": grid_t, "cluster": "bench", "pool": "p0", "node_id": node,
                                      "resource": res, "used": used, "capacity": c})
                frame.to_csv(fh, header=False, index=False)
    # trim to exactly `rows` data lines
    with open(path) as fh:
        lines = fh.readlines()[: rows + 1]
    path.write_text("".join(lines))


def _series_node(rng: np.random.Generator, hosts: int, times: np.ndarray):
    """node-exporter series, host by host (CPU counters, then memory)."""
    steps = len(times)
    for h in range(hosts):
        for cpu in range(4):
            for mode, share in (("idle", 0.6), ("user", 0.25), ("system", 0.1), ("iowait", 0.05)):
                counter = np.cumsum(15 * share * rng.uniform(0.5, 1.5, steps))
                yield {"metric": {"__name__": "node_cpu_seconds_total", "instance": f"host{h}:9100",
                                  "cpu": str(cpu), "mode": mode},
                       "values": [[int(t), f"{v:.2f}"] for t, v in zip(times, counter)]}
        for name, base in (("node_memory_MemTotal_bytes", 2**36), ("node_memory_MemAvailable_bytes", 2**35)):
            yield {"metric": {"__name__": name, "instance": f"host{h}:9100"},
                   "values": [[int(t), str(base + int(v))] for t, v in zip(times, rng.integers(0, 2**30, steps))]}


DCGM_METRICS = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE")


def _series_dcgm(rng: np.random.Generator, hosts: int, times: np.ndarray):
    """dcgm-exporter series: 8 GPUs a host, each with its utilization, temperature and power."""
    steps = len(times)
    for h in range(hosts):
        for g in range(8):
            labels = {"DCGM_FI_DRIVER_VERSION": "550.54.15", "Hostname": f"gpu-node-{h:04d}",
                      "UUID": f"GPU-{h:04d}{g:04d}-5f3c-9a1e-7b2d-00c0ffee{h:04d}", "device": f"nvidia{g}",
                      "gpu": str(g), "instance": f"10.0.{h // 256}.{h % 256}:9400", "job": "dcgm-exporter",
                      "modelName": "NVIDIA H100 80GB HBM3"}
            util = np.clip(rng.normal(60, 25, steps), 0, 100).round()
            text = {"DCGM_FI_DEV_GPU_UTIL": [str(int(u)) for u in util],
                    "DCGM_FI_DEV_GPU_TEMP": [str(int(35 + u / 3 + d)) for u, d in zip(util, rng.integers(0, 4, steps))],
                    "DCGM_FI_DEV_POWER_USAGE": [f"{90 + 6 * u + w:.3f}" for u, w in zip(util, rng.uniform(0, 9, steps))]}
            for name in DCGM_METRICS:
                yield {"metric": {"__name__": name, **labels},
                       "values": [[int(t), v] for t, v in zip(times, text[name])]}


def write_prometheus(path: Path, hosts: int, steps: int, seed: int = 0, source: str = "node") -> int:
    """A node-exporter (or dcgm-exporter) query_range response as `json.dumps` writes it,
    written a series at a time; returns its number of samples."""
    rng = np.random.default_rng(seed)
    times = 1767614400 + 15 * np.arange(steps)
    series = _series_node(rng, hosts, times) if source == "node" else _series_dcgm(rng, hosts, times)
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "wt") as fh:
        fh.write('{"status": "success", "data": {"resultType": "matrix", "result": [')
        for i, s in enumerate(series):
            fh.write((", " if i else "") + json.dumps(s))
        fh.write("]}}")
    return prometheus_samples(hosts, steps, source)


def prometheus_samples(hosts: int, steps: int, source: str) -> int:
    """Samples in the file :func:`write_prometheus` writes: 16 CPU counters and 2 memory
    gauges a node-exporter host, 3 series of 8 GPUs a dcgm-exporter host."""
    return hosts * steps * (18 if source == "node" else 8 * len(DCGM_METRICS))


def prometheus(work: Path, hosts: int, steps: int, source: str = "node", kind: str = "utilization",
               gz: bool = False, duckdb_memory: str | None = None) -> int:
    path = work / f"{'node_exporter' if source == 'node' else 'dcgm'}_{hosts}x{steps}.json{'.gz' if gz else ''}"
    samples = prometheus_samples(hosts, steps, source)
    if not path.exists():  # as the CSV: a --workdir keeps the file for the next run
        write_prometheus(path, hosts, steps, source=source)
    opener = gzip.open if gz else open
    with opener(path, "rb") as fh:
        size = sum(len(b) for b in iter(lambda: fh.read(1 << 24), b""))
    t0 = time.perf_counter()
    with opener(path, "rt") as fh:
        json.load(fh)
    t_json = time.perf_counter() - t0
    json_rss = peak_rss_mb()
    got = headroom_ingest(work / "prom.duckdb", path, kind, duckdb_memory)
    if got is None:
        return 1
    t_head, rss = got
    print(f"samples                  {samples} ({size / 1e6:.0f} MB of JSON"
          f"{f', {path.stat().st_size / 1e6:.0f} MB gzipped' if gz else ''})")
    print(f"json.load alone          {t_json:8.2f} s  (this process's peak RSS {json_rss:.0f} MB)")
    print(f"headroom ingest          {t_head:8.2f} s  peak RSS {rss:8.0f} MB = {rss * 1e6 / size:.1f}x the JSON  "
          f"({samples / t_head:,.0f} samples/s; --kind {kind}, validated"
          f"{f'; DuckDB memory_limit {duckdb_memory}' if duckdb_memory else ''})")
    return 0


# runs the CLI and, at exit, writes its own peak RSS to stderr: the child's ru_maxrss would also
# count the parent's memory at the fork, before the exec (Linux keeps the old high-water mark)
_CHILD = """import atexit, os, re, resource, runpy, sys
limit = os.environ.get("BENCH_DUCKDB_MEMORY_LIMIT")
if limit:  # DuckDB takes up to 80% of the machine's memory unless told
    import duckdb
    _connect = duckdb.connect
    def connect(*args, config=None, **kwargs):
        return _connect(*args, config={**(config or {}), "memory_limit": limit}, **kwargs)
    duckdb.connect = connect
def peak():
    try:
        with open("/proc/self/status") as fh:
            kb = int(re.search(r"VmHWM:\\s*(\\d+)", fh.read()).group(1))
    except (OSError, AttributeError):
        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"peak-rss-kb {kb}", file=sys.stderr)
atexit.register(peak)
sys.argv = ["headroom", *sys.argv[1:]]
runpy.run_module("pipelines.cli", run_name="__main__")
"""


def headroom_ingest(db: Path, path: Path, kind: str = "utilization",
                    duckdb_memory: str | None = None) -> tuple[float, float] | None:
    """Wall seconds and peak RSS (MB) of `headroom ingest --kind KIND` of ``path`` into a new
    ``db`` (its output printed), or None when it failed. ``duckdb_memory``: DuckDB's
    memory_limit in that process (default: DuckDB's, 80% of the machine)."""
    db.unlink(missing_ok=True)
    env = {**os.environ, **({"BENCH_DUCKDB_MEMORY_LIMIT": duckdb_memory} if duckdb_memory else {})}
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, "ingest", "--kind", kind, "--db", str(db), str(path)],
        capture_output=True, text=True, env=env,
    )
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        print(proc.stdout, proc.stderr)
        return None
    # (less the progress bars DuckDB draws on a long query)
    print("\n".join(line for line in proc.stdout.strip().splitlines() if "\u2595" not in line).strip())
    kb = [int(line.split()[1]) for line in proc.stderr.splitlines() if line.startswith("peak-rss-kb ")]
    return seconds, kb[-1] / 1024.0


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--prometheus-hosts", type=int, default=0, help="time a node-exporter JSON of this many hosts")
    ap.add_argument("--prometheus-steps", type=int, default=1000)
    ap.add_argument("--prometheus-source", choices=("node", "dcgm"), default="node",
                    help="node-exporter CPU/memory counters, or dcgm-exporter GPU series (8 GPUs a host)")
    ap.add_argument("--prometheus-kind", choices=("utilization", "telemetry"), default="utilization")
    ap.add_argument("--gzip", action="store_true", help="write and ingest the JSON gzipped")
    ap.add_argument("--duckdb-memory-limit", default=None,
                    help="DuckDB memory_limit in the ingest process, e.g. 1GB (default: DuckDB's, 80%% of RAM)")
    args = ap.parse_args()
    if args.workdir is None:  # a scratch folder, removed after: the 5M-row CSV is hundreds of MB
        with tempfile.TemporaryDirectory(prefix="headroom-bench-") as tmp:
            return run(Path(tmp), args)
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    return run(Path(args.workdir), args)


def run(work: Path, args: argparse.Namespace) -> int:
    if args.prometheus_hosts:
        return prometheus(work, args.prometheus_hosts, args.prometheus_steps, args.prometheus_source,
                          args.prometheus_kind, args.gzip, args.duckdb_memory_limit)
    csv_path = work / f"utilization_{args.rows}.csv"
    if not csv_path.exists():
        t0 = time.perf_counter()
        write_csv(csv_path, args.rows)
        print(f"generated {csv_path} ({csv_path.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t0:.1f}s")

    base_db = work / "plain.duckdb"
    base_db.unlink(missing_ok=True)
    t0 = time.perf_counter()
    con = duckdb.connect(str(base_db))
    con.execute(f"CREATE TABLE utilization AS SELECT * FROM read_csv('{csv_path}')")
    n = con.execute("SELECT count(*) FROM utilization").fetchone()[0]
    con.close()
    t_duck = time.perf_counter() - t0

    got = headroom_ingest(work / "headroom.duckdb", csv_path)
    if got is None:
        return 1
    t_head, rss = got
    print(f"rows                     {n}")
    print(f"duckdb read_csv (plain)  {t_duck:8.2f} s  peak RSS {peak_rss_mb():8.0f} MB")
    print(f"headroom ingest          {t_head:8.2f} s  peak RSS {rss:8.0f} MB  (validated, keyed upsert, rejects)")
    print(f"ratio headroom/duckdb    {t_head / t_duck:8.2f}  (goal < 2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
