"""Prometheus ``query_range`` JSON of DCGM and node-exporter metrics -> utilization or
telemetry contract rows (the document is read a series at a time by ``prometheus_json``)."""
from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.ingest.adapters import IngestFileError
from pipelines.ingest.contract import KindSpec
from pipelines.ingest.prometheus_json import Samples, objects, read_samples

log = logging.getLogger(__name__)


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


def _with_labels(frame: pd.DataFrame, labels: pd.DataFrame, cols: Sequence[str]) -> pd.DataFrame:
    """``frame`` (a shallow copy) with the label columns ``cols`` of each row's series, and
    its values as Python objects."""
    out = frame.copy(deep=False)
    out["value"] = objects(frame["value"])
    at = frame["series"].to_numpy() - 1
    for c in cols:
        out[c] = labels[c].to_numpy(dtype=object)[at]
    return out


def _rows(frame: pd.DataFrame, labels: pd.DataFrame, name: str, cols: Sequence[str]) -> pd.DataFrame:
    """The samples of the series named ``name``, with the label columns ``cols``."""
    of_name = (labels["name"] == name).to_numpy()
    return _with_labels(frame[of_name[frame["series"].to_numpy() - 1]], labels, cols)


def _check_names(path: Path, samples: Samples, mapped: set[str], kind: str) -> None:
    """No series of a metric this kind maps is an error that lists what the file holds;
    some unmapped series are a warning (they are not loaded)."""
    named = samples.labels[samples.labels["n"] > 0]  # a series without samples says nothing
    names = set(named["name"])
    other = sorted(names - mapped)
    shown = ", ".join(n or "(no __name__ label: a rate() or sum() query drops it)" for n in other[:5])
    if samples.frame.empty:
        return
    if not names & mapped:
        raise IngestFileError(path, f"no series of a metric that {kind} maps ({', '.join(sorted(mapped))}); "
                                    f"the file holds {shown}")
    if other:
        n = int(named.loc[named["name"].isin(other), "n"].sum())
        log.warning("%s: %d sample(s) of metric(s) %s are not loaded as %s", path, n, shown, kind)


IDENTITY = ["name", "cluster", "pool", "host", "gpu", "uuid", "cpu", "mode", "ts"]


def _text(values: pd.Series) -> pd.Series:
    """JSON scalars as text for validation; a missing one (null, or no [ts, value] pair) as ''.
    Strings are their own text, and each distinct number is written once."""
    if isinstance(values.dtype, pd.ArrowDtype):  # text: each distinct string made once
        arr = pa.array(values.array)
        codes = pc.dictionary_encode(arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr)
        text = np.array(codes.dictionary.to_pylist(), dtype=object)
        return pd.Series(text[codes.indices.to_numpy()], index=values.index, dtype=object)
    x = values.to_numpy()
    if x.dtype == object:
        kinds = set(map(type, x))
        if kinds <= {str}:
            return pd.Series(x.copy(), index=values.index, dtype=object)
        if kinds == {float}:
            x = x.astype(np.float64)
        elif kinds != {int}:  # of mixed types, equal values may write differently (1, 1.0, True)
            return values.map(_text_of)
    if x.dtype == np.float64:
        codes, uniques = pd.factorize(x.view(np.int64))  # by bits: -0.0 is not 0.0
        uniques = uniques.view(np.float64).astype(object)
    elif x.dtype == object or x.dtype.kind in "iu":
        codes, uniques = pd.factorize(x)
    else:
        return values.map(_text_of)
    text = np.array([_text_of(u) for u in uniques] + [""], dtype=object)
    return pd.Series(text[codes], index=values.index, dtype=object)


def _text_of(v: object) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)


def _collapse_duplicates(path: Path, samples: Samples) -> pd.DataFrame:
    """Series that say the same thing twice (one exporter scraped by two jobs, or two
    replicas) would be summed twice: samples with the same metric, cluster, pool, host, GPU,
    CPU, mode and time collapse to one when their values agree; when they disagree the sample stays with
    ``conflict`` set, so its host and step are rejected. The samples, less the copies, with ``conflict``."""
    # only series that share their labels (or repeat a time) can hold copies: the others,
    # usually all, skip the sample-level check
    s, label_cols = samples.frame, [c for c in IDENTITY if c != "ts"]
    firsts = samples.labels[samples.labels["n"] > 0]
    shared = firsts.index[firsts.duplicated(label_cols, keep=False).to_numpy()]
    suspect = s["series"].isin(set(shared) | _repeating(s))
    out = s.copy(deep=False)
    out["conflict"] = False
    if not suspect.any():
        return out
    checked = _copies(path, _with_labels(s[suspect], samples.labels, label_cols))
    out.loc[checked.index, "conflict"] = checked["conflict"]
    copies = s.index[suspect.to_numpy()].difference(checked.index)
    return out.drop(index=copies) if len(copies) else out


def _repeating(s: pd.DataFrame) -> set[int]:
    """The series in which some time occurs twice (a missing time is no time), as
    ``s.duplicated(["series", "ts"])`` finds them, in a third of its memory."""
    codes, uniques = pd.factorize(s["ts"].to_numpy(), size_hint=1024)  # missing: -1
    width = len(uniques) + 1
    key = np.sort(s["series"].to_numpy() * width + (codes + 1))
    twice = key[1:][(key[1:] == key[:-1]) & (key[1:] % width != 0)]
    return set((twice // width).tolist())


def _copies(path: Path, s: pd.DataFrame) -> pd.DataFrame:
    """:func:`_collapse_duplicates` within the samples that may be copies."""
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
    samples = read_samples(path)
    if spec.kind in ("telemetry", "utilization"):
        mapped = set(DCGM_TELEMETRY) if spec.kind == "telemetry" else {DCGM_UTIL, NODE_CPU, NODE_MEM_TOTAL,
                                                                        NODE_MEM_AVAILABLE}
        _check_names(path, samples, mapped, spec.kind)
    if samples.frame.empty:
        log.warning("%s: the query returned no series", path)
    if spec.kind == "telemetry":
        out = _telemetry(samples)
    elif spec.kind == "utilization":
        out = _utilization(path, samples, cluster, pool)
    else:
        raise IngestFileError(path, f"prometheus-json holds telemetry or utilization, not {spec.kind}")
    out.attrs["raw_of"] = samples.raw_of
    return out


def _telemetry(samples: Samples) -> pd.DataFrame:
    # device, node and metric are worked out once a series, then repeated for its samples
    lab = samples.labels
    lab = lab[lab["name"].isin(DCGM_TELEMETRY) & (lab["n"] > 0)]
    named = (lab["uuid"] != "") | (lab["host"] != "")
    device = lab["uuid"].where(lab["uuid"] != "", lab["host"] + "/gpu" + lab["gpu"].astype(str))
    per_series = pd.DataFrame({"device_id": device.where(named, ""), "node_id": lab["host"],
                               "metric": lab["name"].map(DCGM_TELEMETRY)})
    keep = np.zeros(len(samples.labels) + 1, dtype=bool)
    keep[lab.index] = True
    t = samples.frame
    t = t if keep[1:].all() else t[keep[t["series"].to_numpy()]]
    at = per_series.index.get_indexer(t["series"])
    cols = {c: pd.Series(per_series[c].to_numpy(dtype=object)[at], index=t.index, dtype=object)
            for c in per_series.columns}
    return pd.DataFrame({
        "ts": _text(t["ts"]), "device_id": cols["device_id"], "node_id": cols["node_id"],
        "metric": cols["metric"], "value": _text(t["value"]), "_line": t["_line"],
        "_raw": pd.Series(None, index=t.index, dtype=object),  # written only for rejects: see raw_of
    }, copy=False)


def _utilization(path: Path, samples: Samples, cluster: str, pool: str) -> pd.DataFrame:
    s, labels = _collapse_duplicates(path, samples), samples.labels
    host = ["cluster", "pool", "host"]
    # GPU and CPU sums are within a host, so they go a few hosts at a time and the work holds a
    # piece of the file, not all of it. pandas orders group keys of mixed types (a time given as
    # text, a missing one among numbers) in a way a piece cannot repeat: such a file goes whole.
    # The CPU sums' last grouping is by the times their first made numbers (NaN where missing).
    numbers = set(map(type, s["ts"].to_numpy())) <= {int, float, type(None)}
    gpu = [_prom_gpu_util(_with_labels(s.take(rows), labels, host))
           for rows in _by_host(s, labels, DCGM_UTIL, whole=not numbers or bool(s["ts"].isna().any()))]
    cpu, firsts = [], []
    for rows in _by_host(s, labels, NODE_CPU, whole=not numbers):
        part, first = _prom_cpu(_with_labels(s.take(rows), labels, [*host, "cpu", "mode"]))
        cpu.append(part)
        firsts.append(first)
    steps = pd.concat(firsts).drop_duplicates() if firsts else ()
    if len(steps):
        log.warning("%s: the first sample of each CPU counter has no rate, so %d host step(s) (the query's first, "
                    "at %s) are not loaded; when a range comes in pages, start each page one step before the "
                    "last one ended", path, len(steps), _when(steps["ts"].iloc[0]))
    parts = [_joined(gpu), _joined(cpu),
             _prom_mem(path, _rows(s, labels, NODE_MEM_TOTAL, host), _rows(s, labels, NODE_MEM_AVAILABLE, host))]
    del s
    out = pd.concat([p for p in parts if not p.empty] or [pd.DataFrame(columns=["ts", "host", "cluster", "pool", "resource", "used", "capacity", "_line"])], ignore_index=True)
    out["cluster"] = out["cluster"].where(out["cluster"] != "", cluster)
    out["pool"] = out["pool"].where(out["pool"] != "", pool)
    conflict = out["conflict"].fillna(False).astype(bool) if "conflict" in out else pd.Series(False, index=out.index)
    reject = out["_reject"] if "_reject" in out else pd.Series(None, index=out.index, dtype=object)
    reject = reject.where(~conflict, "series with the same labels disagree at this time and host")
    return pd.DataFrame({
        "ts": _text(out["ts"]), "cluster": out["cluster"], "pool": out["pool"],
        "node_id": out["host"], "resource": out["resource"],
        "used": _as_text(out["used"]), "capacity": _as_text(out["capacity"]),
        "_line": out["_line"], "_raw": pd.Series(None, index=out.index, dtype=object),
        "_reject": reject.where(reject.notna(), None),
    }, copy=False)


def _joined(pieces: list[pd.DataFrame]) -> pd.DataFrame:
    """The pieces' sums as one frame (times that were ints in one piece and floats in another
    all floats, as one groupby over the whole would have made them)."""
    pieces = [p for p in pieces if not p.empty]
    return pd.concat(pieces, ignore_index=True) if pieces else pd.DataFrame()


_PIECE = 1 << 17  # samples: the utilization work on GPU and CPU series goes a piece this size at a time


def _by_host(s: pd.DataFrame, labels: pd.DataFrame, name: str, whole: bool = False) -> Iterator[np.ndarray]:
    """Positions in ``s`` (whose rows are in series order) of the samples of the series named
    ``name``, whole hosts (cluster, pool, host) at a time, about ``_PIECE`` a piece (all in one
    when ``whole`` or a label is not text): hosts in their sorted order, each piece's rows in the
    order ``s`` has them."""
    series = s["series"].to_numpy()
    n = np.bincount(series, minlength=len(labels) + 1)[1:]  # samples of each series in s
    start = np.cumsum(n) - n
    chosen = labels[(labels["name"] == name).to_numpy() & (n > 0)]
    if chosen.empty:
        return
    if whole or any(set(map(type, chosen[c].to_numpy())) != {str} for c in ("cluster", "pool", "host")):
        yield _positions(chosen.index.to_numpy(), start, n)  # labels of other types: sorted as pandas would
        return
    group = chosen.groupby(["cluster", "pool", "host"], sort=True, dropna=False).ngroup().to_numpy()
    order = np.argsort(group, kind="stable")
    numbers, group, rows = chosen.index.to_numpy()[order], group[order], n[chosen.index.to_numpy()[order] - 1]
    ends = np.flatnonzero(np.diff(group)) + 1  # where a host's series end
    cut, total = 0, 0
    for a, b in zip([0, *ends], [*ends, len(group)]):
        if total and total + rows[a:b].sum() > _PIECE:
            yield _positions(np.sort(numbers[cut:a]), start, n)
            cut, total = a, 0
        total += rows[a:b].sum()
    yield _positions(np.sort(numbers[cut:]), start, n)


def _positions(numbers: np.ndarray, start: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The row positions of the series ``numbers``, one after the other."""
    lengths = n[numbers - 1]
    first = np.repeat(start[numbers - 1] - (np.cumsum(lengths) - lengths), lengths)
    return first + np.arange(int(lengths.sum()))


def _as_text(values: pd.Series) -> pd.Series:
    """Numbers as text for validation, NaN as ``NaN`` (pandas 2 and 3 render it differently);
    each distinct number written once."""
    if values.dtype != np.float64:
        return values.map(_as_text_of).astype(object)
    codes, uniques = pd.factorize(values.to_numpy().view(np.int64))  # by bits: -0.0 is not 0.0
    text = np.array([_as_text_of(u) for u in uniques.view(np.float64)] + ["NaN"], dtype=object)
    return pd.Series(text[codes], index=values.index, dtype=object)


def _as_text_of(v: object) -> str:
    return "NaN" if pd.isna(v) else repr(float(v))


def _num(series: pd.Series) -> pd.Series:
    return pd.to_numeric(series, errors="coerce")


def _sum_by(frame: pd.DataFrame, keys: list[str], values: list[str]) -> pd.DataFrame:
    """Per group of ``keys``: each of ``values`` summed, NaN when any of its samples is
    missing (a NaN sample must be rejected, not read as 0); ``conflict`` if any; and the
    ``_line`` of the sample a reject should point at (the first bad one, else the first)."""
    bad = frame["conflict"].astype(bool)
    for v in values:
        bad = bad | frame[v].isna()
    work = pd.DataFrame({**{c: frame[c] for c in (*keys, *values, "conflict", "_line")}, "_ok": ~bad,
                         **{f"_nan_{v}": frame[v].isna() for v in values}})
    work = work.sort_values([*keys, "_ok", "_line"], na_position="first", kind="stable")
    # dropna=False: a sample without a time stays, to be rejected as such
    g = work.groupby(keys, sort=True, dropna=False)
    out = g.agg(**{v: (v, "sum") for v in values}, **{f"_nan_{v}": (f"_nan_{v}", "any") for v in values},
                conflict=("conflict", "any"), _line=("_line", "first")).reset_index()
    for v in values:
        out[v] = out[v].where(~out.pop(f"_nan_{v}"))
    return out


def _agg_by_host(frame: pd.DataFrame, resource: str) -> pd.DataFrame:
    out = _sum_by(frame, ["cluster", "pool", "host", "ts"], ["used", "capacity"])
    out["resource"] = resource
    return out


def _prom_gpu_util(u: pd.DataFrame) -> pd.DataFrame:
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


def _prom_cpu(c: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """CPU counters -> busy cores per host, and the host steps where a counter had its first
    sample (no rate yet, so not loaded)."""
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
    steps = c.loc[first, ["host", "ts"]].drop_duplicates()
    c = c[~first]
    per_cpu = _sum_by(c, ["cluster", "pool", "host", "ts", "cpu"], ["busy"])
    per_cpu["used"] = per_cpu["busy"].clip(upper=1.0)
    per_cpu["capacity"] = 1.0
    return _agg_by_host(per_cpu, "cpu"), steps


def _prom_mem(path: Path, tot: pd.DataFrame, avail: pd.DataFrame) -> pd.DataFrame:
    if tot.empty != avail.empty:  # its samples are rejects below, each saying what is missing
        log.warning("%s: memory needs both %s and %s; only %s is there, no memory is loaded", path,
                    NODE_MEM_TOTAL, NODE_MEM_AVAILABLE, NODE_MEM_TOTAL if avail.empty else NODE_MEM_AVAILABLE)
    if tot.empty and avail.empty:
        return pd.DataFrame()
    key = ["cluster", "pool", "host", "ts"]
    m = tot.merge(avail[[*key, "value", "conflict", "_line"]], on=key, how="outer",
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
    m["conflict"] = m["conflict"].eq(True) | m["conflict_avail"].eq(True)  # NaN where a side is missing
    gib = 1024.0 ** 3
    m["capacity"] = _num(m["value"]) / gib
    m["used"] = (_num(m["value"]) - _num(m["value_avail"])) / gib
    out = _agg_by_host(m[~alone], "mem")
    if alone.any():
        lone = m[alone].assign(resource="mem", used=float("nan"), capacity=float("nan"), conflict=False)
        missing = lone["_merge"].map({"left_only": NODE_MEM_AVAILABLE, "right_only": NODE_MEM_TOTAL})
        lone["_reject"] = "mem: no " + missing + " sample at this time and host"
        out = pd.concat([out, lone[[*key, "used", "capacity", "conflict", "_line", "resource", "_reject"]]],
                        ignore_index=True)
    return out
