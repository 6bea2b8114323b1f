"""Ingest benchmark: `headroom ingest` of a generated utilization CSV against DuckDB's own
``read_csv`` into a plain table, in the same run. Prints both times, the ratio and peak memory.

    .venv/bin/python benchmarks/ingest.py --rows 5000000
    .venv/bin/python benchmarks/ingest.py --prometheus-hosts 50 --prometheus-steps 1000

The second form times a node-exporter ``query_range`` JSON (CPU counters of 4 CPUs x 4 modes
and MemTotal/MemAvailable per host, 15 s steps) through `headroom ingest --kind utilization`,
against ``json.load`` of the same file alone (the floor of any reader of it).
"""
from __future__ import annotations

import argparse
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


def write_prometheus(path: Path, hosts: int, steps: int, seed: int = 0) -> int:
    """A node-exporter query_range response; returns its number of samples."""
    import json

    rng = np.random.default_rng(seed)
    t0, result = 1767614400, []
    times = t0 + 15 * np.arange(steps)
    for h in range(hosts):
        for cpu in range(4):
            for mode, share in (("idle", 0.6), ("user", 0.25), ("system", 0.1), ("iowait", 0.05)):
                counter = np.cumsum(15 * share * rng.uniform(0.5, 1.5, steps))
                result.append({"metric": {"__name__": "node_cpu_seconds_total", "instance": f"host{h}:9100",
                                          "cpu": str(cpu), "mode": mode},
                               "values": [[int(t), f"{v:.2f}"] for t, v in zip(times, counter)]})
        for name, base in (("node_memory_MemTotal_bytes", 2**36), ("node_memory_MemAvailable_bytes", 2**35)):
            result.append({"metric": {"__name__": name, "instance": f"host{h}:9100"},
                           "values": [[int(t), str(base + int(v))] for t, v in zip(times, rng.integers(0, 2**30, steps))]})
    path.write_text(json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}))
    return hosts * steps * 18


def prometheus(work: Path, hosts: int, steps: int) -> int:
    import json

    path = work / f"node_exporter_{hosts}x{steps}.json"
    samples = write_prometheus(path, hosts, steps)
    t0 = time.perf_counter()
    with open(path) as fh:
        json.load(fh)
    t_json = time.perf_counter() - t0
    t_head = headroom_ingest(work / "prom.duckdb", path)
    if t_head is None:
        return 1
    print(f"samples                  {samples} ({path.stat().st_size / 1e6:.0f} MB)")
    print(f"json.load alone          {t_json:8.2f} s")
    print(f"headroom ingest          {t_head:8.2f} s  peak RSS {peak_rss_mb(True):8.0f} MB  "
          f"({samples / t_head:,.0f} samples/s; counters to busy cores, memory joined, validated)")
    return 0


def headroom_ingest(db: Path, path: Path) -> float | None:
    """Wall seconds of `headroom ingest --kind utilization` of ``path`` into a new ``db``
    (its output printed), or None when it failed."""
    db.unlink(missing_ok=True)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "ingest", "--kind", "utilization", "--db", str(db), str(path)],
        capture_output=True, text=True,
    )
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        print(proc.stdout, proc.stderr)
        return None
    print(proc.stdout.strip())
    return seconds


def peak_rss_mb(child: bool) -> float:
    who = resource.RUSAGE_CHILDREN if child else resource.RUSAGE_SELF
    return resource.getrusage(who).ru_maxrss / 1024.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--prometheus-hosts", type=int, default=0, help="time a node-exporter JSON of this many hosts")
    ap.add_argument("--prometheus-steps", type=int, default=1000)
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="headroom-bench-"))
    if args.prometheus_hosts:
        return prometheus(work, args.prometheus_hosts, args.prometheus_steps)
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

    t_head = headroom_ingest(work / "headroom.duckdb", csv_path)
    if t_head is None:
        return 1
    print(f"rows                     {n}")
    print(f"duckdb read_csv (plain)  {t_duck:8.2f} s  peak RSS {peak_rss_mb(False):8.0f} MB")
    print(f"headroom ingest          {t_head:8.2f} s  peak RSS {peak_rss_mb(True):8.0f} MB  (validated, keyed upsert, rejects)")
    print(f"ratio headroom/duckdb    {t_head / t_duck:8.2f}  (goal < 2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
