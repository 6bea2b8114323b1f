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

import contextlib
import functools
import json
import logging
import re
from pathlib import Path

import numpy as np
import pandas as pd

log = logging.getLogger(__name__)

PDM_METRICS = ("volt", "rotate", "pressure", "vibration")
# what read_csv reads as missing by default (its documented na_values), kept for the other columns
PANDAS_NA_TEXT = ["", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
                  "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"]


class InputError(ValueError):
    """A file that cannot be used: the message names the file and the problem."""


def read_csv_text(path: Path, text: tuple[str, ...] = ()) -> pd.DataFrame:
    """A CSV (optionally .gz) or Parquet file as a frame, the CSV's ``text`` columns read as
    written: an id such as ``007`` or ``NA`` stays that text (not the number 7 or a missing
    value), and an empty one is ``""``."""
    if path.suffix.lower() in (".parquet", ".pq"):
        return pd.read_parquet(path)
    header = list(pd.read_csv(path, nrows=0).columns)
    text = tuple(c for c in text if c in header)
    if not text:
        return pd.read_csv(path, low_memory=False)
    na = {c: PANDAS_NA_TEXT for c in header if c not in text}
    return pd.read_csv(path, dtype={c: str for c in text}, keep_default_na=False, na_values=na, low_memory=False)


def unreadable(path: Path, exc: BaseException) -> str:
    """Why ``path`` could not be read, in one line; for text that is not UTF-8, the line of
    its first such byte (the decoder's position counts within a buffer, not the file)."""
    if isinstance(exc, UnicodeDecodeError):
        from pandas.io.common import get_handle

        n = 0
        # compressed as pandas reads it (gz, bz2, zip, xz, zst by name); lines end in \n, \r\n or \r
        with contextlib.suppress(Exception), get_handle(path, "rb", compression="infer", is_text=False) as f:
            for raw in f.handle:
                for line in raw.splitlines() or [b""]:
                    n += 1
                    try:
                        line.decode("utf-8")
                    except UnicodeDecodeError as bad:
                        return (f"{path}: line {n}: not UTF-8 text (byte 0x{line[bad.start]:02x}); save the file "
                                "as UTF-8")
    quote = re.search(r"EOF inside string starting at row (\d+)", str(exc))
    if quote:  # pandas counts the file's lines from 0 there
        return (f"{path}: line {int(quote.group(1)) + 1}: unterminated quote (the quote opened there is never "
                "closed); close it or remove it")
    return f"{path}: cannot read ({' '.join(str(exc).split())})"  # pandas' messages end in a newline


def separator_hint(columns: list[str]) -> str:
    """A header read as one column that holds ``;`` or a tab: the file is not comma-separated."""
    if len(columns) == 1:
        for sep, name in ((";", "semicolons"), ("\t", "tabs")):
            if sep in str(columns[0]):
                return f" (the header is one column {str(columns[0])[:60]!r}: the file is separated by {name}; " \
                       "headroom reads comma-separated CSV)"
    return ""


def read_table(path: str | Path, allow_empty: bool = False, text: tuple[str, ...] = (),
               required_text: tuple[str, ...] = ()) -> pd.DataFrame:
    """A CSV (optionally .gz) or Parquet file as a frame; one with no rows is an error
    unless ``allow_empty``. ``text`` columns of a CSV are read as written (see
    :func:`read_csv_text`); an empty value in one of ``required_text`` is an error that
    names its line."""
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{p}: a folder, not a file")
    if not p.is_file():
        raise InputError(f"{p}: no such file")
    try:
        f = read_csv_text(p, tuple(text) + tuple(required_text))
    except Exception as exc:  # any parse failure is the same user error
        raise InputError(unreadable(p, exc)) from exc
    if f.empty and not allow_empty:
        raise InputError(f"{p}: no rows")
    f = f.reset_index(drop=True)
    for col in required_text:
        if col in f.columns:
            empty = (f[col].isna() | (f[col].astype(str).str.strip() == "")).to_numpy()
            if empty.any():
                raise InputError(f"{_at(p, _first_bad(empty))}, column {col!r}: empty ({int(empty.sum())} such "
                                 "value(s))")
    return f


def row_label(path: str | Path, i: int) -> str:
    """Where row ``i`` (0-based, after the header) of a file is: ``line N`` of a CSV, or
    ``row N`` of a Parquet file."""
    if Path(path).suffix.lower() in (".parquet", ".pq"):
        return f"row {i + 1}"
    lines = record_lines(path)
    return f"line {int(lines[i]) if 0 <= i < len(lines) else i + 2}"


def row_numbers(path: str | Path, n: int) -> np.ndarray:
    """The numbers :func:`row_label` gives rows ``0 .. n-1`` of a file."""
    if Path(path).suffix.lower() in (".parquet", ".pq"):
        return np.arange(1, n + 1)
    out, lines = np.arange(2, n + 2), record_lines(path)
    k = min(n, len(lines))
    out[:k] = lines[:k]
    return out


def record_lines(path: str | Path) -> np.ndarray:
    """The line each record of a CSV (optionally .gz) starts on, as pandas reads it: blank
    lines skipped, a quoted field may span lines. Read only to name a bad row."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError:
        return np.array([], dtype=np.int64)
    return _record_lines(str(p), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=2)
def _record_lines(path: str, mtime_ns: int, size: int) -> np.ndarray:
    """:func:`record_lines`, kept for a file as long as it is unchanged."""
    import csv
    import gzip

    starts: list[int] = []
    opener = gzip.open if path.lower().endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8", errors="replace", newline="") as fh:
            reader = csv.reader(fh)
            before, header = 0, False
            for row in reader:
                if row and (len(row) > 1 or row[0].strip()):  # pandas skips empty and blank lines
                    if header:
                        starts.append(before + 1)
                    header = True
                before = reader.line_num
    except (OSError, EOFError, csv.Error):
        pass  # what was read so far; past it, the plain record + 2
    return np.asarray(starts, dtype=np.int64)


def _at(path: str | Path, i: int) -> str:
    return f"{path}: {row_label(path, i)}"


def _first_bad(bad: pd.Series | np.ndarray) -> int:
    return int(np.flatnonzero(np.asarray(bad))[0])


def parse_like_ingest(values: pd.Series, as_text: bool = False) -> pd.Series:
    """Naive UTC times of ``values`` as ``headroom ingest`` reads them (its SQL, in DuckDB): an
    offset or zone name (CET) converts to UTC, a time without one is UTC whatever the rows
    before it hold (pandas' ISO8601 parse gives it the offset of the first row that has one),
    a number is epoch seconds or ms. Missing where empty, unparseable or outside the years
    pandas can hold; as ISO text (``2026-01-05T13:00:00``) with ``as_text``. Index kept."""
    import duckdb

    from pipelines.ingest.validate import TS_MAX, TS_MIN, parse_timestamp_sql

    text = values.astype("string")
    frame = pd.DataFrame({"i": np.arange(len(values)), "v": text.astype(object).where(text.notna(), None).to_numpy()})
    kept = f"CASE WHEN p >= TIMESTAMP '{TS_MIN}' AND p < TIMESTAMP '{TS_MAX}' THEN p END"
    pick = f"strftime({kept}, '%Y-%m-%dT%H:%M:%S')" if as_text else kept
    with duckdb.connect() as con:
        con.register("_ts", frame)
        got = con.execute(f"SELECT {pick} AS t FROM (SELECT i, {parse_timestamp_sql('trim(v)')} AS p FROM _ts) "
                          "ORDER BY i").df()["t"]
    out = got.to_numpy(dtype=object) if as_text else pd.to_datetime(got).astype("datetime64[ns]").to_numpy()
    return pd.Series(out, index=values.index, name=values.name)


def time_option(text: str) -> pd.Timestamp:
    """A time given on the command line, read as ingest reads a timestamp (an offset or a zone
    name, CET or Europe/Berlin, converts to UTC; none is UTC; a number is epoch seconds or ms),
    as naive UTC between 1970 and 2200; a ValueError saying why not otherwise."""
    basic = re.fullmatch(r"\s*(\d{4})(\d\d)(\d\d)\s*", str(text))
    if basic and 1 <= int(basic.group(2)) <= 12 and 1 <= int(basic.group(3)) <= 31:
        # as epoch seconds, 1970; meant as a date (ISO 8601's basic form), surely: said, not guessed
        raise ValueError(f"is ambiguous: as epoch seconds it is {pd.Timestamp(int(text), unit='s')}; write the date "
                         f"as {basic.group(1)}-{basic.group(2)}-{basic.group(3)}")
    got = parse_like_ingest(pd.Series([str(text).strip()], dtype=object)).iloc[0]
    year = re.match(r"\s*(\d{4})-\d\d", str(text))  # a date pandas cannot hold parses as no time
    if pd.isna(got) and (year is None or 1678 < int(year.group(1)) < 2262):
        raise ValueError("is not a time (ISO 8601, with an offset or a zone name where not UTC)")
    if pd.isna(got) or not pd.Timestamp("1970-01-01") <= pd.Timestamp(got) <= pd.Timestamp("2200-01-01"):
        raise ValueError("is not between 1970 and 2200")
    return pd.Timestamp(got)


def to_utc_naive(values: pd.Series, where: str | Path, column: str = "ts") -> pd.Series:
    """ISO-8601 (with or without offset) or epoch seconds/milliseconds -> naive UTC. A
    missing or unparseable value is an error naming the file, line and column."""
    values = values.reset_index(drop=True)
    if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
        v = values.astype(float)
        bad = ~np.isfinite(v.to_numpy()) | (v.abs().to_numpy() > 1e14)
        if bad.any():
            i = _first_bad(bad)
            raise InputError(f"{_at(where, i)}, column {column!r}: {values.iloc[i]!r} is not an epoch timestamp "
                             f"({int(bad.sum())} such value(s))")
        unit = "ms" if v.abs().max() > 1e11 else "s"
        return pd.to_datetime(v, unit=unit)
    out = parse_like_ingest(values)
    bad = out.isna().to_numpy()
    if bad.any():
        i = _first_bad(bad)
        shown = values.iloc[i]
        what = "missing timestamp" if pd.isna(shown) or not str(shown).strip() else f"unparseable timestamp {shown!r}"
        raise InputError(f"{_at(where, i)}, column {column!r}: {what} ({int(bad.sum())} such value(s))")
    return out


def _need(frame: pd.DataFrame, columns: list[str], path: str | Path) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"{path}: missing column(s) {missing}{separator_hint(list(frame.columns))}")


def _numeric(f: pd.DataFrame, column: str, path: str | Path, required: bool = False) -> pd.Series:
    """``f[column]`` as numbers; an empty cell is missing (an error when ``required``),
    anything else that is not a finite number is an error naming the file, line and column."""
    values = pd.to_numeric(f[column], errors="coerce").astype(float)
    empty = f[column].isna() | (f[column].astype(str).str.strip() == "")
    bad = (values.isna() | ~np.isfinite(values.fillna(0.0))) & ~empty
    if required:
        bad = bad | empty
    if bad.any():
        i = _first_bad(bad)
        shown = f[column].iloc[i]
        what = "missing value" if empty.iloc[i] else f"{str(shown)!r} is not a finite number"
        raise InputError(f"{_at(path, i)}, column {column!r}: {what} ({int(bad.sum())} such value(s))")
    return values


def _unique_keys(frame: pd.DataFrame, key: list[str], values: list[str], path: str | Path,
                 what: str) -> pd.DataFrame:
    """Exact repeats collapse to one row; the same key twice with different values is an
    error naming the second line (an evaluation must not depend on which one wins)."""
    repeat = frame.duplicated(key + values, keep="first")
    frame = frame.loc[~repeat]
    clash = frame.duplicated(key, keep="first")
    if clash.any():
        i = int(frame.index[clash.to_numpy()][0])
        first = ", ".join(f"{k}={v}" for k, v in frame.loc[i, key].items())
        raise InputError(f"{_at(path, i)}: {what} ({first}) appears twice with different values "
                         f"({int(clash.sum())} such row(s))")
    return frame


def read_series(path: str | Path) -> pd.DataFrame:
    """Long ``unique_id, ds, y`` (sorted, one value per series and time)."""
    f = read_table(path, required_text=("unique_id",))
    _need(f, ["unique_id", "ds", "y"], path)
    out = pd.DataFrame({
        "unique_id": f["unique_id"].astype(str),
        "ds": to_utc_naive(f["ds"], path, "ds"),
        "y": _numeric(f, "y", path, required=True),
    })
    out = _unique_keys(out, ["unique_id", "ds"], ["y"], path, "series point")
    return out.sort_values(["unique_id", "ds"]).reset_index(drop=True)


def _window_bound(value: object) -> pd.Timestamp:
    # a date, not a word pandas also reads ('now', 'today': a different time at every run)
    if not isinstance(value, str) or not value.strip()[:1].isdigit():
        raise ValueError(f"{value!r} is not a timestamp string such as '2014-02-26 13:45:00'")
    ts = pd.Timestamp(value)
    if pd.isna(ts):
        raise ValueError(f"{value!r} is not a timestamp")
    # naive UTC, as the series are read
    return ts.tz_convert("UTC").tz_localize(None) if ts.tzinfo is not None else ts


def _json_object(p: Path, what: str, shape: str) -> dict:
    """A JSON file holding an object keyed by unique_id, or a one-line InputError."""
    def no_twice(pairs: list[tuple[str, object]]) -> dict:
        seen: dict = {}
        for k, v in pairs:  # json keeps the last silently: a series' windows would vanish
            if k in seen and seen[k] != v:
                raise ValueError(f"{k!r} is given twice with different values")
            seen[k] = v
        return seen

    try:
        doc = json.loads(p.read_text(), object_pairs_hook=no_twice)
    except (OSError, ValueError) as exc:
        raise InputError(f"{p}: cannot read {what} ({exc})") from exc
    except RecursionError:
        raise InputError(f"{p}: cannot read {what} (JSON nested too deep)") from None
    if not isinstance(doc, dict):
        raise InputError(f"{p}: expected an object mapping unique_id to {shape}")
    return doc


def read_windows(path: str | Path) -> dict[str, list[tuple[pd.Timestamp, pd.Timestamp]]]:
    """NAB-style ``{unique_id: [[start, end], ...]}``; bounds with an offset become naive UTC."""
    p = Path(path)
    doc = _json_object(p, "windows", "[[start, end], ...]")
    out = {}
    for uid, wins in doc.items():
        try:
            if not isinstance(wins, list):
                raise TypeError("expected a list of [start, end] pairs")
            pairs = [w for w in wins if isinstance(w, list) and len(w) == 2]
            if len(pairs) < len(wins):
                bad = next(w for w in wins if not (isinstance(w, list) and len(w) == 2))
                raise TypeError(f"expected [start, end] pairs, got {bad!r}")
            out[str(uid)] = [(_window_bound(a), _window_bound(b)) for a, b in pairs]
        except (TypeError, ValueError) as exc:
            raise InputError(f"{p}: bad window list for {uid!r} ({exc})") from exc
        for a, b in out[str(uid)]:
            if b < a:
                raise InputError(f"{p}: window [{a}, {b}] of {uid!r} ends before it starts")
    return out


def read_labels(path: str | Path) -> dict[str, list[pd.Timestamp]]:
    """NAB-style ``{unique_id: [timestamp, ...]}`` (``combined_labels.json``): the labelled
    anomaly points; offsets become naive UTC."""
    p = Path(path)
    doc = _json_object(p, "labels", "[timestamp, ...]")
    out = {}
    for uid, marks in doc.items():
        try:
            if not isinstance(marks, list):
                raise TypeError("expected a list of timestamps")
            out[str(uid)] = [_window_bound(t) for t in marks]
        except (TypeError, ValueError) as exc:
            raise InputError(f"{p}: bad label list for {uid!r} ({exc})") from exc
    return out


def _no_stray(ts: pd.Series, path: str | Path, far: pd.Timedelta, column: str = "ts", few: bool = True) -> None:
    """An error naming the row whose time is a stray past every other (a date mistyped: 2126;
    see :func:`pipelines.store.demand.is_stray`), or (``few``: readings) ``far`` before every
    other: evaluated, its span made the test span hours of nothing."""
    from pipelines.store.demand import is_stray

    times = ts.dropna()
    if times.nunique() < 2:
        return
    newest = times.max()
    before = times[times < newest].max()
    if is_stray(newest - before, int((times == newest).sum()), int((times == before).sum()), far, few):
        i = int(np.flatnonzero((ts == newest).to_numpy())[0])
        raise InputError(f"{_at(path, i)}, column {column!r}: {newest:%Y-%m-%d %H:%M} stands {(newest - before).days} "
                         f"days after every other time (the latest {before:%Y-%m-%d %H:%M}): a mistyped date? fix or "
                         "delete that row")
    # readings (not change events, whose first price may stand for months): the same at the other
    # end, past ``far`` (a year typed one too low stretched the split, and the evaluation failed
    # with "nothing to learn", naming no row)
    oldest = times.min()
    after = times[times > oldest].min()
    if few and after - oldest > far:
        i = int(np.flatnonzero((ts == oldest).to_numpy())[0])
        raise InputError(f"{_at(path, i)}, column {column!r}: {oldest:%Y-%m-%d %H:%M} stands {(after - oldest).days} "
                         f"days before every other time (the earliest {after:%Y-%m-%d %H:%M}): a mistyped date? fix "
                         "or delete that row")


def read_telemetry(path: str | Path) -> pd.DataFrame:
    """Contract telemetry, or Azure PdM wide telemetry mapped onto it; empty values are
    left out, one value per device, metric and time."""
    f = read_table(path, text=("node_id",), required_text=("device_id", "metric"))
    if {"machineID", "datetime"} <= set(f.columns) and set(PDM_METRICS) & set(f.columns):
        metrics = [m for m in PDM_METRICS if m in f.columns]
        wide = pd.DataFrame({"ts": to_utc_naive(f["datetime"], path, "datetime"),
                             "device_id": "machine" + f["machineID"].astype(str),
                             **{m: _numeric(f, m, path) for m in metrics}})
        _no_stray(wide["ts"], path, pd.Timedelta(days=7), "datetime")
        wide = _unique_keys(wide, ["ts", "device_id"], metrics, path, "machine reading")
        long = wide.melt(id_vars=["ts", "device_id"], value_vars=metrics, var_name="metric")
        return pd.DataFrame({
            "ts": long["ts"], "device_id": long["device_id"], "node_id": long["device_id"],
            "metric": long["metric"], "value": long["value"],
        }).dropna(subset=["value"]).reset_index(drop=True)
    _need(f, ["ts", "device_id", "metric", "value"], path)
    out = pd.DataFrame({
        "ts": to_utc_naive(f["ts"], path), "device_id": f["device_id"].astype(str),
        "node_id": f["node_id"].astype(str) if "node_id" in f.columns else None,
        "metric": f["metric"].astype(str), "value": _numeric(f, "value", path),
    })
    _no_stray(out["ts"], path, pd.Timedelta(days=7))
    if empty := int(out["value"].isna().sum()):  # a reading not taken: left out, and said
        log.warning("%s: %d reading(s) with an empty value (or 'nan') left out, such as %s", path, empty,
                    row_label(path, _first_bad(out["value"].isna())))
        out = out.dropna(subset=["value"])
    return _unique_keys(out, ["ts", "device_id", "metric"], ["value"], path, "reading").reset_index(drop=True)


def read_failures(path: str | Path) -> pd.DataFrame:
    """Contract failures, or Azure PdM failures mapped onto it (exact repeats collapse)."""
    f = read_table(path, text=("node_id", "failure_type"), required_text=("device_id",))
    if {"machineID", "datetime", "failure"} <= set(f.columns):
        dev = "machine" + f["machineID"].astype(str)
        out = pd.DataFrame({"ts": to_utc_naive(f["datetime"], path, "datetime"), "device_id": dev,
                            "node_id": dev, "failure_type": f["failure"].astype(str)})
    else:
        _need(f, ["ts", "device_id", "failure_type"], path)
        out = pd.DataFrame({
            "ts": to_utc_naive(f["ts"], path), "device_id": f["device_id"].astype(str),
            "node_id": f["node_id"].astype(str) if "node_id" in f.columns else None,
            "failure_type": f["failure_type"].astype(str),
        })
    return out.drop_duplicates(["ts", "device_id", "failure_type"]).reset_index(drop=True)


def read_events(path: str | Path) -> pd.DataFrame:
    """``ts, device_id, event_type``; PdM errors or maintenance files are mapped onto it.
    A file with no rows is allowed (no events happened)."""
    f = read_table(path, allow_empty=True, required_text=("device_id", "event_type"))
    if {"machineID", "datetime"} <= set(f.columns) and ({"errorID"} & set(f.columns) or {"comp"} & set(f.columns)):
        kind = f["errorID"].astype(str) if "errorID" in f.columns else "maint_" + f["comp"].astype(str)
        return pd.DataFrame({"ts": to_utc_naive(f["datetime"], path, "datetime"),
                             "device_id": "machine" + f["machineID"].astype(str), "event_type": kind})
    _need(f, ["ts", "device_id", "event_type"], path)
    return pd.DataFrame({"ts": to_utc_naive(f["ts"], path), "device_id": f["device_id"].astype(str),
                         "event_type": f["event_type"].astype(str)})


def read_devices(path: str | Path) -> pd.DataFrame:
    """``device_id, age_days``; PdM machines (age in years) are mapped onto it."""
    f = read_table(path, required_text=("device_id",))
    if {"machineID", "age"} <= set(f.columns):
        col, out = "age", pd.DataFrame({"device_id": "machine" + f["machineID"].astype(str),
                                         "age_days": _numeric(f, "age", path) * 365.0})
    else:
        _need(f, ["device_id", "age_days"], path)
        col, out = "age_days", pd.DataFrame({"device_id": f["device_id"].astype(str),
                                              "age_days": _numeric(f, "age_days", path)})
    negative = (out["age_days"] < 0).to_numpy()
    if negative.any():
        i = _first_bad(negative)
        raise InputError(f"{_at(path, i)}, column {col!r}: negative age {f[col].iloc[i]}")
    # one age per device: which of two would win must not decide the evaluation
    return _unique_keys(out, ["device_id"], ["age_days"], path, "device").reset_index(drop=True)


def read_spot_prices(path: str | Path) -> pd.DataFrame:
    """Spot-prices contract ``ts, provider, region, zone, instance_type, product, price``
    (one price per series and time; a bad price names its line)."""
    f = read_table(path, text=("provider", "region", "zone", "instance_type", "product"))
    _need(f, ["ts", "provider", "region", "zone", "instance_type", "product", "price"], path)
    out = f[["provider", "region", "zone", "instance_type", "product"]].astype(str)
    out.insert(0, "ts", to_utc_naive(f["ts"], path))
    _no_stray(out["ts"], path, pd.Timedelta(days=30), few=False)  # (change events: a market may hold its price for weeks)
    out["price"] = _numeric(f, "price", path, required=True)
    negative = (out["price"] < 0).to_numpy()
    if negative.any():
        i = _first_bad(negative)
        raise InputError(f"{_at(path, i)}, column 'price': negative price {f['price'].iloc[i]} "
                         f"({int(negative.sum())} such value(s))")
    key = ["ts", "provider", "zone", "instance_type", "product"]
    return _unique_keys(out, key, ["price"], path, "spot price").reset_index(drop=True)


def read_on_demand(path: str | Path) -> pd.DataFrame:
    """``provider, region, instance_type, on_demand_price``."""
    f = read_table(path, text=("provider", "region", "instance_type"))
    _need(f, ["provider", "region", "instance_type", "on_demand_price"], path)
    out = f[["provider", "region", "instance_type"]].astype(str)
    out["on_demand_price"] = _numeric(f, "on_demand_price", path, required=True)
    bad = (out["on_demand_price"] <= 0).to_numpy()
    if bad.any():
        i = _first_bad(bad)
        raise InputError(f"{_at(path, i)}, column 'on_demand_price': {f['on_demand_price'].iloc[i]} is not a "
                         f"positive price ({int(bad.sum())} such value(s))")
    key = ["provider", "region", "instance_type"]
    return _unique_keys(out, key, ["on_demand_price"], path, "on-demand price").reset_index(drop=True)
