"""Mappers from the formats users already have to contract frames (text columns plus
``_line`` and ``_raw`` so every reject can point back into the file): AWS
``describe-spot-price-history`` JSON, Prometheus ``query_range`` JSON of DCGM and
node-exporter metrics, and Grid Workloads Archive (GWA-T-12) per-VM files."""
from __future__ import annotations

import json
import logging
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from pipelines.adapters import IngestFileError, header_of, open_text
from pipelines.contract import KindSpec

log = logging.getLogger(__name__)


def _load_json(path: Path) -> object:
    try:
        with open_text(path) as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise IngestFileError(path, f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise IngestFileError(path, f"unreadable: {exc}") from exc


def aws_json_frame(path: Path) -> pd.DataFrame:
    """``aws ec2 describe-spot-price-history`` output -> spot-prices contract rows."""
    doc = _load_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("SpotPriceHistory"), list):
        raise IngestFileError(path, "not a describe-spot-price-history document (no SpotPriceHistory list)")
    rows = []
    for n, rec in enumerate(doc["SpotPriceHistory"], start=1):
        rec = rec if isinstance(rec, dict) else {}
        zone = str(rec.get("AvailabilityZone") or "")
        region = _aws_region(zone)
        rows.append({
            "ts": rec.get("Timestamp"), "provider": "aws", "region": region, "zone": zone,
            "instance_type": rec.get("InstanceType"), "product": rec.get("ProductDescription"),
            "price": rec.get("SpotPrice"), "_line": n, "_raw": json.dumps(rec, sort_keys=True),
        })
    return pd.DataFrame(rows, columns=["ts", "provider", "region", "zone", "instance_type", "product", "price", "_line", "_raw"])


def _aws_region(zone: str) -> str:
    """``us-east-1a`` -> ``us-east-1``; Local and Wavelength Zones (``us-west-2-lax-1a``,
    ``us-east-1-wl1-bos-wlz-1``) belong to their parent region too."""
    found = re.match(r"^([a-z]{2}(?:-gov|-iso[a-z]?)?-[a-z]+-\d+)", zone)
    if found:
        return found.group(1)
    return zone[:-1] if zone and zone[-1].isalpha() else zone


DCGM_TELEMETRY = {
    "DCGM_FI_DEV_GPU_TEMP": "gpu_temp",
    "DCGM_FI_DEV_POWER_USAGE": "power_usage",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": "ecc_sbe",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "ecc_dbe",
    "DCGM_FI_DEV_XID_ERRORS": "xid",
    "DCGM_FI_DEV_GPU_UTIL": "gpu_util",  # the fault model's load feature, as the synthetic fleet sends it
}
DCGM_UTIL = "DCGM_FI_DEV_GPU_UTIL"
NODE_CPU = "node_cpu_seconds_total"
NODE_MEM_TOTAL = "node_memory_MemTotal_bytes"
NODE_MEM_AVAILABLE = "node_memory_MemAvailable_bytes"


def _without_port(instance: str | None) -> str:
    """``node2:9100`` -> ``node2``: node-exporter and DCGM-exporter of one host differ only by port."""
    if not instance:
        return ""
    host, sep, port = str(instance).rpartition(":")
    return host.strip("[]") if sep and port.isdigit() and host else str(instance)


def _prom_samples(path: Path) -> pd.DataFrame:
    doc = _load_json(path)
    if not isinstance(doc, dict) or doc.get("status") != "success":
        said = (f": {doc.get('errorType', '')} {doc.get('error', '')}".rstrip()
                if isinstance(doc, dict) and doc.get("status") == "error" else "")
        raise IngestFileError(path, f"not a successful Prometheus API response (status "
                                    f"{doc.get('status') if isinstance(doc, dict) else None!r}){said}")
    data = doc.get("data")
    if not isinstance(data, dict):
        raise IngestFileError(path, f"'data' must be an object with resultType and result, got {type(data).__name__}")
    if data.get("resultType") != "matrix":
        raise IngestFileError(path, f"expected a query_range matrix, got resultType={data.get('resultType')!r}")
    result = data.get("result") or []
    if not isinstance(result, list):
        raise IngestFileError(path, f"'data.result' must be a list of series, got {type(result).__name__}")
    # built a column at a time: the labels are the same for every sample of a series, so
    # each label column is its series' values repeated (object arrays of shared strings)
    label_cols = ("name", "host", "gpu", "uuid", "cpu", "mode", "cluster", "pool")
    per_series: dict[str, list] = {c: [] for c in label_cols}
    counts: list[int] = []
    ts: list = []
    value: list = []
    for s, series in enumerate(result, start=1):
        if not isinstance(series, dict) or not isinstance(series.get("metric", {}), dict) \
                or not isinstance(series.get("values", []), list):
            raise IngestFileError(path, f"series {s} of data.result is not {{'metric': {{...}}, 'values': [...]}}")
        labels = series.get("metric") or {}
        values = series.get("values") or []
        counts.append(len(values))
        fixed = {
            "name": labels.get("__name__", ""),
            "host": labels.get("Hostname") or _without_port(labels.get("instance")) or labels.get("node") or "",
            "gpu": labels.get("gpu", ""), "uuid": labels.get("UUID", ""),
            "cpu": labels.get("cpu", ""), "mode": labels.get("mode", ""),
            "cluster": labels.get("cluster", ""), "pool": labels.get("pool", ""),
        }
        for c, v in fixed.items():
            per_series[c].append(v)
        if all(type(p) is list and len(p) == 2 for p in values):  # as Prometheus writes them
            if values:
                t, v = zip(*values)
                ts.extend(t)
                value.extend(v)
        else:  # a pair cut short or not a pair: what it lacks is missing (a reject)
            pairs = [(p + [None, None])[:2] if isinstance(p, list) else [None, None] for p in values]
            ts.extend(p[0] for p in pairs)
            value.extend(p[1] for p in pairs)
    n = np.asarray(counts, dtype=np.int64)
    cols: dict[str, np.ndarray] = {
        "series": np.repeat(np.arange(1, len(n) + 1, dtype=np.int64), n),
        # 1, 2, ... within each series
        "sample": np.arange(int(n.sum()), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n) + 1,
    }
    for c in label_cols:
        cols[c] = np.repeat(np.fromiter(per_series[c], dtype=object, count=len(n)), n)
    cols["ts"] = np.fromiter(ts, dtype=object, count=len(ts))
    cols["value"] = np.fromiter(value, dtype=object, count=len(value))
    frame = pd.DataFrame(cols)
    # "line" for a JSON sample: series number * 1e6 + sample number keeps it unique and readable
    frame["_line"] = frame["series"] * 1_000_000 + frame["sample"]
    frame["_raw"] = None  # written only for the samples that are rejected: see raw_of

    def raw_of(line: int) -> str:
        """The sample at a ``_line`` as the file has it, for its reject."""
        series = result[int(line) // 1_000_000 - 1]
        pair = series["values"][int(line) % 1_000_000 - 1]
        return '{"metric": ' + json.dumps(series.get("metric") or {}, sort_keys=True) + ', "value": ' \
            + json.dumps(pair) + "}"

    frame.attrs["raw_of"] = raw_of
    return frame


def _check_names(path: Path, s: pd.DataFrame, mapped: set[str], kind: str) -> None:
    """No series of a metric this kind maps is an error that lists what the file holds;
    some unmapped series are a warning (they are not loaded)."""
    names = set(s["name"])
    other = sorted(names - mapped)
    shown = ", ".join(n or "(no __name__ label: a rate() or sum() query drops it)" for n in other[:5])
    if s.empty:
        return
    if not names & mapped:
        raise IngestFileError(path, f"no series of a metric that {kind} maps ({', '.join(sorted(mapped))}); "
                                    f"the file holds {shown}")
    if other:
        n = int(s["name"].isin(other).sum())
        log.warning("%s: %d sample(s) of metric(s) %s are not loaded as %s", path, n, shown, kind)


IDENTITY = ["name", "cluster", "pool", "host", "gpu", "uuid", "cpu", "mode", "ts"]


def _text(values: pd.Series) -> pd.Series:
    """JSON scalars as text for validation; a missing one (null, or no [ts, value] pair) as ''."""
    return values.map(lambda v: "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v))


def _collapse_duplicates(path: Path, s: pd.DataFrame) -> pd.DataFrame:
    """Series that say the same thing twice (one exporter scraped by two jobs, or two
    replicas) would be summed twice: samples with the same metric, cluster, pool, host, GPU,
    CPU, mode and time collapse to one when their values agree; when they disagree the sample stays with
    ``conflict`` set, so its host and step are rejected."""
    # only series that share their labels (or repeat a time) can hold copies: the others,
    # usually all, skip the sample-level check
    labels = [c for c in IDENTITY if c != "ts"]
    firsts = s.drop_duplicates("series")
    shared = firsts.loc[firsts.duplicated(labels, keep=False), "series"]
    repeats = s.loc[s.duplicated(["series", "ts"]) & s["ts"].notna(), "series"]
    suspect = s["series"].isin(set(shared) | set(repeats))
    if not suspect.any():
        return s.assign(conflict=False)
    if not suspect.all():
        part = _collapse_duplicates(path, s[suspect])
        return pd.concat([s[~suspect].assign(conflict=False), part]).sort_index()
    s = s.assign(_text=_text(s["value"]))
    groups = s.groupby(IDENTITY, sort=False, dropna=False)
    size = groups["_text"].transform("size")
    # a sample without a time is a reject of its own (ts: missing), never a copy of another
    timeless = s["ts"].isna()
    if ((size == 1) | timeless).all():
        return s.assign(conflict=False).drop(columns="_text")
    conflict = (groups["_text"].transform("nunique") > 1) & ~timeless
    copy = s.duplicated(IDENTITY) & ~timeless
    out = s.assign(conflict=conflict)[~copy].drop(columns="_text")
    same = int((copy & ~conflict).sum())
    if same:
        log.warning("%s: %d sample(s) repeated by another series with the same labels but its job or "
                    "instance collapsed into one", path, same)
    if conflict.any():
        log.warning("%s: %d sample(s) where series with the same labels disagree: their host and step "
                    "are rejected", path, int(out["conflict"].sum()))
    return out


def prometheus_frame(path: Path, spec: KindSpec, cluster: str, pool: str) -> pd.DataFrame:
    """Prometheus ``query_range`` JSON of DCGM / node-exporter metrics -> telemetry or utilization rows."""
    s = _prom_samples(path)
    raw_of = s.attrs.pop("raw_of")
    if spec.kind in ("telemetry", "utilization"):
        mapped = set(DCGM_TELEMETRY) if spec.kind == "telemetry" else {DCGM_UTIL, NODE_CPU, NODE_MEM_TOTAL,
                                                                        NODE_MEM_AVAILABLE}
        _check_names(path, s, mapped, spec.kind)
    if s.empty:
        log.warning("%s: the query returned no series", path)
    if spec.kind == "telemetry":
        t = s[s["name"].isin(DCGM_TELEMETRY)]
        named = (t["uuid"] != "") | (t["host"] != "")
        device = t["uuid"].where(t["uuid"] != "", t["host"] + "/gpu" + t["gpu"].astype(str))
        out = pd.DataFrame({
            "ts": _text(t["ts"]), "device_id": device.where(named, ""), "node_id": t["host"],
            "metric": t["name"].map(DCGM_TELEMETRY), "value": _text(t["value"]),
            "_line": t["_line"], "_raw": t["_raw"],
        })
        out.attrs["raw_of"] = raw_of
        return out
    if spec.kind != "utilization":
        raise IngestFileError(path, f"prometheus-json holds telemetry or utilization, not {spec.kind}")
    s = _collapse_duplicates(path, s)
    parts = [_prom_gpu_util(s), _prom_cpu(path, s), _prom_mem(path, s)]
    out = pd.concat([p for p in parts if not p.empty] or [pd.DataFrame(columns=["ts", "host", "cluster", "pool", "resource", "used", "capacity", "_line", "_raw"])], ignore_index=True)
    out["cluster"] = out["cluster"].where(out["cluster"] != "", cluster)
    out["pool"] = out["pool"].where(out["pool"] != "", pool)
    conflict = out["conflict"].fillna(False).astype(bool) if "conflict" in out else pd.Series(False, index=out.index)
    reject = out["_reject"] if "_reject" in out else pd.Series(None, index=out.index, dtype=object)
    reject = reject.where(~conflict, "series with the same labels disagree at this time and host")
    frame = pd.DataFrame({
        "ts": _text(out["ts"]), "cluster": out["cluster"], "pool": out["pool"],
        "node_id": out["host"], "resource": out["resource"],
        "used": _as_text(out["used"]), "capacity": _as_text(out["capacity"]),
        "_line": out["_line"], "_raw": out["_raw"], "_reject": reject.where(reject.notna(), None),
    })
    frame.attrs["raw_of"] = raw_of
    return frame


def _as_text(values: pd.Series) -> pd.Series:
    """Numbers as text for validation, NaN as ``NaN`` (pandas 2 and 3 render it differently)."""
    return values.map(lambda v: "NaN" if pd.isna(v) else repr(float(v))).astype(object)


def _num(series: pd.Series) -> pd.Series:
    return pd.to_numeric(series, errors="coerce")


def _sum_by(frame: pd.DataFrame, keys: list[str], values: list[str]) -> pd.DataFrame:
    """Per group of ``keys``: each of ``values`` summed, NaN when any of its samples is
    missing (a NaN sample must be rejected, not read as 0); ``conflict`` if any; and the
    ``_line``/``_raw`` of the sample a reject should point at (the first bad one, else the first)."""
    bad = frame["conflict"].astype(bool)
    for v in values:
        bad = bad | frame[v].isna()
    work = frame.assign(_ok=~bad, **{f"_nan_{v}": frame[v].isna() for v in values})
    work = work.sort_values([*keys, "_ok", "_line"], na_position="first", kind="stable")
    # dropna=False: a sample without a time stays, to be rejected as such
    g = work.groupby(keys, sort=True, dropna=False)
    out = g.agg(**{v: (v, "sum") for v in values}, **{f"_nan_{v}": (f"_nan_{v}", "any") for v in values},
                conflict=("conflict", "any"), _line=("_line", "first"), _raw=("_raw", "first")).reset_index()
    for v in values:
        out[v] = out[v].where(~out.pop(f"_nan_{v}"))
    return out


def _agg_by_host(frame: pd.DataFrame, resource: str) -> pd.DataFrame:
    out = _sum_by(frame, ["cluster", "pool", "host", "ts"], ["used", "capacity"])
    out["resource"] = resource
    return out


def _prom_gpu_util(s: pd.DataFrame) -> pd.DataFrame:
    u = s[s["name"] == DCGM_UTIL].copy()
    if u.empty:
        return u
    # DCGM reports percent per GPU; demand is in GPUs busy, so it sums across devices
    u["used"] = _num(u["value"]) / 100.0
    u["capacity"] = 1.0
    return _agg_by_host(u, "gpu")


def _when(ts: object) -> str:
    """A Prometheus sample time (unix seconds) as UTC text, for a message."""
    try:
        return f"{pd.Timestamp(float(ts), unit='s'):%Y-%m-%d %H:%M:%S} UTC"
    except (TypeError, ValueError):
        return repr(ts)


def _prom_cpu(path: Path, s: pd.DataFrame) -> pd.DataFrame:
    c = s[s["name"] == NODE_CPU].copy()
    if c.empty:
        return c
    c["t"] = _num(c["ts"])
    c["v"] = _num(c["value"])
    c = c.sort_values(["cluster", "pool", "host", "cpu", "mode", "t"])
    # counter -> busy fraction of one core since the last good sample. After a counter reset
    # (the value drops) the counter restarted from 0, so the increase is the new value, as in
    # rate(). A NaN sample has no rate (its host and step are rejected); the next one is
    # measured from the sample before it.
    good = np.isfinite(c["v"]) & np.isfinite(c["t"])  # +Inf is no counter reading either
    keys = [c["cluster"], c["pool"], c["host"], c["cpu"], c["mode"]]
    last = c[["v", "t"]].where(good).groupby(keys, sort=False).ffill()  # the last good sample so far
    prev = last.groupby(keys, sort=False).shift()  # ... before this one
    prev_v, prev_t = prev["v"], prev["t"]
    delta = c["v"] - prev_v
    delta = delta.where(~(delta < 0), c["v"])
    rate = delta / (c["t"] - prev_t)
    first = prev_v.isna() & good  # a counter's first sample: no rate yet, not loaded
    c["busy"] = rate.where(c["mode"] != "idle", 0.0).where(good, float("nan"))
    if first.any():
        steps = c.loc[first, ["host", "ts"]].drop_duplicates()
        log.warning("%s: the first sample of each CPU counter has no rate, so %d host step(s) (the query's first, "
                    "at %s) are not loaded; when a range comes in pages, start each page one step before the "
                    "last one ended", path, len(steps), _when(steps["ts"].iloc[0]))
    c = c[~first]
    per_cpu = _sum_by(c, ["cluster", "pool", "host", "ts", "cpu"], ["busy"])
    per_cpu["used"] = per_cpu["busy"].clip(upper=1.0)
    per_cpu["capacity"] = 1.0
    return _agg_by_host(per_cpu, "cpu")


def _prom_mem(path: Path, s: pd.DataFrame) -> pd.DataFrame:
    tot = s[s["name"] == NODE_MEM_TOTAL]
    avail = s[s["name"] == NODE_MEM_AVAILABLE]
    if tot.empty != avail.empty:  # its samples are rejects below, each saying what is missing
        log.warning("%s: memory needs both %s and %s; only %s is there, no memory is loaded", path,
                    NODE_MEM_TOTAL, NODE_MEM_AVAILABLE, NODE_MEM_TOTAL if avail.empty else NODE_MEM_AVAILABLE)
    if tot.empty and avail.empty:
        return pd.DataFrame()
    key = ["cluster", "pool", "host", "ts"]
    m = tot.merge(avail[[*key, "value", "conflict", "_line", "_raw"]], on=key, how="outer",
                  suffixes=("", "_avail"), indicator=True)
    alone = m["_merge"] != "both"
    if alone.any():  # a step only one of the two has: no memory to say, a reject that says why
        log.warning("%s: %d memory sample(s) of %s or %s without the other at the same time and host are "
                    "rejected (query both with the same step and start)", path, int(alone.sum()),
                    NODE_MEM_TOTAL, NODE_MEM_AVAILABLE)
    # a reject points at the sample at fault: MemAvailable's when only it is missing a value
    # (or disagrees with a copy), or when it is the only one there
    avail_bad = (_num(m["value_avail"]).isna() | m["conflict_avail"].eq(True)) & _num(m["value"]).notna() \
        & ~m["conflict"].eq(True)
    only_avail = (m["_merge"] == "right_only") | ((m["_merge"] == "both") & avail_bad)
    m["_line"] = m["_line"].where(~only_avail, m["_line_avail"])
    m["_raw"] = m["_raw"].where(~only_avail, m["_raw_avail"])
    m["conflict"] = m["conflict"].eq(True) | m["conflict_avail"].eq(True)  # NaN where a side is missing
    gib = 1024.0 ** 3
    m["capacity"] = _num(m["value"]) / gib
    m["used"] = (_num(m["value"]) - _num(m["value_avail"])) / gib
    out = _agg_by_host(m[~alone], "mem")
    if alone.any():
        lone = m[alone].assign(resource="mem", used=float("nan"), capacity=float("nan"), conflict=False)
        missing = lone["_merge"].map({"left_only": NODE_MEM_AVAILABLE, "right_only": NODE_MEM_TOTAL})
        lone["_reject"] = "mem: no " + missing + " sample at this time and host"
        out = pd.concat([out, lone[[*key, "used", "capacity", "conflict", "_line", "_raw", "resource", "_reject"]]],
                        ignore_index=True)
    return out


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
