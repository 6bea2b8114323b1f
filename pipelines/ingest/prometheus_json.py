"""Prometheus ``query_range`` JSON (a matrix response, ``.json`` or ``.json.gz``) read into
samples: a series at a time, so memory follows the samples and not the document's Python
objects; a document that read does not take as it is (invalid JSON, not a successful matrix
response, a key given twice) is read whole by ``json.load``, whose errors say exactly where and
what. :mod:`pipelines.ingest.prometheus` maps the samples to contract rows."""
from __future__ import annotations

import contextlib
import gc
import io
import json
import logging
import re
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from pipelines.ingest.adapters import IngestFileError, load_json, open_text

log = logging.getLogger(__name__)


def _without_port(instance: str | None) -> str:
    """``node2:9100`` -> ``node2``: node-exporter and DCGM-exporter of one host differ only by port."""
    if not instance:
        return ""
    host, sep, port = str(instance).rpartition(":")
    return host.strip("[]") if sep and port.isdigit() and host else str(instance)


_LABEL_COLS = ("name", "host", "gpu", "uuid", "cpu", "mode", "cluster", "pool")


@dataclass(frozen=True)
class Samples:
    """A ``query_range`` response's samples: ``frame`` has one row per sample (``series``
    number, ``ts`` and ``value`` as the JSON has them, ``_line``: series number * 1e6 + sample
    number, unique and readable), ``labels`` one row per series (index: its number; the label
    columns and ``n``, its samples), ``raw_of`` a sample's text, written only for a reject."""

    frame: pd.DataFrame
    labels: pd.DataFrame
    raw_of: Callable[[int], str]


def _fixed_labels(labels: dict) -> tuple:
    """A series' labels as the label columns, in ``_LABEL_COLS`` order."""
    return (labels.get("__name__", ""),
            labels.get("Hostname") or _without_port(labels.get("instance")) or labels.get("node") or "",
            labels.get("gpu", ""), labels.get("UUID", ""), labels.get("cpu", ""), labels.get("mode", ""),
            labels.get("cluster", ""), labels.get("pool", ""))


def _pairs(values: list) -> tuple[Sequence, Sequence, bool]:
    """A series' times and values, and whether every sample was a ``[ts, value]`` pair (as
    Prometheus writes them); what a pair cut short or not a pair lacks is missing (a reject)."""
    if not values:
        return (), (), True
    if set(map(type, values)) == {list} and set(map(len, values)) == {2}:
        t, v = zip(*values)
        return t, v, True
    pairs = [(p + [None, None])[:2] if isinstance(p, list) else [None, None] for p in values]
    return [p[0] for p in pairs], [p[1] for p in pairs], False


def _raw_text(metric: dict, pair: object) -> str:
    """A sample as a reject shows it."""
    return '{"metric": ' + json.dumps(metric, sort_keys=True) + ', "value": ' + json.dumps(pair) + "}"


def _samples(fixed: list[tuple], counts: list[int], ts: np.ndarray,
             value: np.ndarray | pd.arrays.ArrowExtensionArray, raw_of: Callable[[int], str]) -> Samples:
    if isinstance(value, np.ndarray) and len(value) and set(map(type, value)) == {str}:
        text = _arrow_text(value)  # as the streamed read keeps them
        value = value if text is None else pd.arrays.ArrowExtensionArray(text)
    n = np.asarray(counts, dtype=np.int64)
    series = np.repeat(np.arange(1, len(n) + 1, dtype=np.int64), n)
    line = np.arange(1, len(series) + 1, dtype=np.int64)
    line -= np.repeat(np.cumsum(n) - n, n)  # the sample's number in its series: 1, 2, ...
    line += series * 1_000_000
    # object columns as Series of object dtype: pandas would otherwise look for dates in them
    frame = pd.DataFrame({"series": series, "ts": pd.Series(ts, dtype=object, copy=False),
                          "value": pd.Series(value, dtype=value.dtype, copy=False), "_line": line}, copy=False)
    # labels stay Python objects: pandas 3 would make them Arrow strings, which refuse a label
    # holding a lone surrogate (JSON allows one), where the whole-document read keeps it
    at = pd.RangeIndex(1, len(n) + 1)
    labels = pd.DataFrame({c: pd.Series(np.fromiter((f[j] for f in fixed), dtype=object, count=len(n)), index=at,
                                        dtype=object, copy=False)
                           for j, c in enumerate(_LABEL_COLS)}, index=at)
    labels["n"] = n
    return Samples(frame, labels, raw_of)


def read_samples(path: Path) -> Samples:
    """Every sample of a ``query_range`` response, read a series at a time
    (:func:`_prom_samples_streamed`); a document that read does not take as it is (invalid JSON,
    not a successful matrix response, a key given twice) is read whole by
    :func:`_prom_samples_loaded`, whose errors say exactly what is wrong."""
    with _no_cycle_collection():
        try:
            return _prom_samples_streamed(path)
        except (Unusual, ValueError, StopIteration, OSError, EOFError, zlib.error, RecursionError) as exc:
            log.debug("%s: read whole (%s)", path, exc)
        return _prom_samples_loaded(path)


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Decoding JSON makes millions of lists that live a short while, and the cycle collector
    then walks every object of the process again and again (2/3 of the read's time); they
    hold no cycles, so reference counting frees them."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _prom_samples_loaded(path: Path) -> Samples:
    """The document read whole with ``json.load``: memory grows with all of it (about 8x the
    file), so only for a file the streamed read leaves, where it gives the error."""
    doc = load_json(path)
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
    fixed: list[tuple] = []
    counts: list[int] = []
    ts: list = []
    value: list = []
    for s, series in enumerate(result, start=1):
        if not _is_series(series):
            raise IngestFileError(path, f"series {s} of data.result is not {{'metric': {{...}}, 'values': [...]}}")
        values = series.get("values") or []
        fixed.append(_fixed_labels(series.get("metric") or {}))
        counts.append(len(values))
        t, v, _ = _pairs(values)
        ts.extend(t)
        value.extend(v)

    def raw_of(line: int) -> str:
        series = result[int(line) // 1_000_000 - 1]
        return _raw_text(series.get("metric") or {}, series["values"][int(line) % 1_000_000 - 1])

    return _samples(fixed, counts, np.fromiter(ts, dtype=object, count=len(ts)),
                    np.fromiter(value, dtype=object, count=len(value)), raw_of)


def _is_series(series: object) -> bool:
    return isinstance(series, dict) and isinstance(series.get("metric", {}), dict) \
        and isinstance(series.get("values", []), list)


class Unusual(Exception):
    """The streamed read met something it leaves to the whole-document read."""


_WS = re.compile(r"[ \t\n\r]*")  # JSON whitespace, as the json module skips it
_DECODER = json.JSONDecoder()


class _JsonStream:
    """JSON text read a piece at a time, with the json module's own scanner: a value is
    decoded exactly as ``json.load`` would decode it, and text it would refuse raises
    :class:`Unusual` (or the scanner's ValueError)."""

    def __init__(self, fh: io.TextIOBase, chunk: int = 1 << 22) -> None:
        self._fh, self._chunk = fh, chunk
        self._buf, self._pos, self._eof = "", 0, False

    def _more(self) -> bool:
        """Read on, keeping the text from the current position; False at the end of the file."""
        if self._eof:
            return False
        # at least as much as is kept, so a value longer than a chunk costs linear time
        text = self._fh.read(max(self._chunk, len(self._buf) - self._pos))
        if not text:
            self._eof = True
            return False
        self._buf = self._buf[self._pos:] + text
        self._pos = 0
        return True

    def peek(self) -> str:
        """The next character after whitespace, not consumed ('' at the end of the file)."""
        while True:
            self._pos = _WS.match(self._buf, self._pos).end()
            if self._pos < len(self._buf) or not self._more():
                return self._buf[self._pos:self._pos + 1]

    def _expect(self, chars: str) -> str:
        c = self.peek()
        if not c or c not in chars:
            raise Unusual(f"expected {' or '.join(chars)}, found {c!r}")
        self._pos += 1
        return c

    def value(self) -> object:
        """The next JSON value, decoded."""
        self.peek()
        while True:
            try:
                obj, end = _DECODER.scan_once(self._buf, self._pos)
            except (StopIteration, ValueError):  # cut off where this piece ends, or not JSON
                obj, end = None, -1
            # a number cut where the text read so far ends reads as a shorter one (``12.`` as
            # 12, the ``.`` left over): one that ends near there is read again with more text
            if 0 <= end < len(self._buf) - 8 or not self._more():
                if end < 0:
                    raise Unusual("invalid JSON")
                self._pos = end
                return obj

    def members(self) -> Iterator[str]:
        """The keys of the object starting here; the caller reads each one's value."""
        self._expect("{")
        if self.peek() == "}":
            self._pos += 1
            return
        while True:
            self._expect('"')
            while True:
                try:
                    key, self._pos = json.decoder.scanstring(self._buf, self._pos, True)
                    break
                except ValueError:
                    if not self._more():
                        raise
            self._expect(":")
            yield key
            if self._expect(",}") == "}":
                return

    def items(self) -> Iterator[object]:
        """The values of the array starting here, decoded one at a time."""
        self._expect("[")
        if self.peek() == "]":
            self._pos += 1
            return
        while True:
            yield self.value()
            if self._expect(",]") == "]":
                return


class _Column:
    """A column of JSON values built a series at a time, compactly: a series of integer or
    float times as a numpy array, made into Python objects at the end, one per distinct time
    (each series repeats the same times); a series of strings as Arrow text. Every value has
    the type and value ``json.load`` gives it, so the column equals its column."""

    def __init__(self) -> None:
        self._parts: list[tuple[int, np.ndarray | pa.Array | list]] = []
        self.size = 0

    def add(self, items: Sequence) -> None:
        kinds = set(map(type, items))
        part: np.ndarray | pa.Array | list | None = None
        if kinds == {int}:
            with contextlib.suppress(OverflowError):  # beyond 64 bits: kept as they are
                part = np.array(items, dtype=np.int64)
        elif kinds == {float}:
            part = np.array(items, dtype=np.float64)
        elif kinds == {str}:
            part = _arrow_text(items)
        self._parts.append((self.size, list(items) if part is None else part))
        self.size += len(items)

    def array(self) -> np.ndarray | pa.Array:
        """An object array, or Arrow text where every value is a string."""
        texts = [p for _, p in self._parts if isinstance(p, pa.Array)]
        if texts and all(isinstance(p, pa.Array) or not len(p) for _, p in self._parts):
            return pa.chunked_array(texts, type=pa.large_string()).combine_chunks()
        numbers = [(at, p) for at, p in self._parts if isinstance(p, np.ndarray) and len(p)]
        kinds = {p.dtype for _, p in numbers}
        if len(kinds) == 1 and len(numbers) == len(self._parts):  # the usual times: no positions to keep
            return _shared(np.concatenate([p for _, p in numbers]))
        out = np.empty(self.size, dtype=object)
        for dtype in kinds:
            chosen = [(at, p) for at, p in numbers if p.dtype == dtype]
            where = np.concatenate([np.arange(at, at + len(p)) for at, p in chosen])
            out[where] = _shared(np.concatenate([p for _, p in chosen]))
        for at, p in self._parts:
            if isinstance(p, pa.Array):
                out[at:at + len(p)] = p.to_numpy(zero_copy_only=False)
            elif isinstance(p, list) and p:
                out[at:at + len(p)] = np.fromiter(p, dtype=object, count=len(p))
        return out


def _shared(numbers: np.ndarray) -> np.ndarray:
    """Numbers as Python objects, one object per distinct number (distinct by its bits, so
    -0.0 stays apart from 0.0)."""
    codes, uniques = pd.factorize(numbers.view(np.int64), size_hint=1024)
    return uniques.view(numbers.dtype).astype(object)[codes]


def _arrow_text(items: Sequence) -> pa.Array | None:
    """Strings as Arrow text (a sixth of the memory of Python strings), or None for a string
    UTF-8 cannot hold (a lone surrogate that JSON's \\ud800 escape can write)."""
    try:
        return pa.array(items, type=pa.large_string())
    except (UnicodeEncodeError, pa.ArrowException):
        return None


def objects(values: pd.Series) -> pd.Series:
    """A sample column as Python objects, as the JSON has them (Arrow text made strings)."""
    if values.dtype == object:
        return values
    return pd.Series(values.to_numpy(dtype=object), index=values.index, dtype=object)


def _prom_samples_streamed(path: Path, chunk: int = 1 << 22) -> Samples:
    """The samples of a successful matrix response, read a series at a time: memory holds one
    series' JSON at a time and the samples in compact columns."""
    metrics: list[dict] = []
    fixed: list[tuple] = []
    counts: list[int] = []
    irregular: dict[int, list] = {}  # series (0-based) -> its values, where some sample is not a pair
    ts, value = _Column(), _Column()
    status = result_type = None
    seen: set[str] = set()
    with open_text(path) as fh:
        doc = _JsonStream(fh, chunk)
        for key in doc.members():
            if key != "data":
                got = doc.value()
                status = got if key == "status" else status
                continue
            if key in seen or doc.peek() != "{":
                raise Unusual("'data' twice or not an object")
            seen.add(key)
            for dkey in doc.members():
                if dkey != "result":
                    got = doc.value()
                    result_type = got if dkey == "resultType" else result_type
                    continue
                if dkey in seen or doc.peek() != "[":
                    raise Unusual("'result' twice or not a list")
                seen.add(dkey)
                for series in doc.items():
                    if not _is_series(series):
                        raise Unusual("a series that is not {'metric': {...}, 'values': [...]}")
                    metric, values = series.get("metric") or {}, series.get("values") or []
                    metrics.append(metric)
                    fixed.append(_fixed_labels(metric))
                    counts.append(len(values))
                    t, v, regular = _pairs(values)
                    if not regular:
                        irregular[len(counts) - 1] = values
                    ts.add(t)
                    value.add(v)
        if doc.peek():
            raise Unusual("more after the document")
    if status != "success" or "data" not in seen or result_type != "matrix":
        raise Unusual("not a successful matrix response")
    ts_col, value_col = ts.array(), value.array()
    if isinstance(value_col, pa.Array):
        value_col = pd.arrays.ArrowExtensionArray(value_col)  # an item of it is a str
    starts = np.cumsum(counts) - counts

    def raw_of(line: int) -> str:
        s, k = int(line) // 1_000_000 - 1, int(line) % 1_000_000 - 1
        if s in irregular:
            return _raw_text(metrics[s], irregular[s][k])
        k = k + counts[s] if k < 0 else k  # as a list index would
        if not 0 <= k < counts[s]:
            raise IndexError(f"no sample {k + 1} in series {s + 1}")
        at = int(starts[s]) + k
        return _raw_text(metrics[s], [ts_col[at], value_col[at]])

    return _samples(fixed, counts, ts_col, value_col, raw_of)
