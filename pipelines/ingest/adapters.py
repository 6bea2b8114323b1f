"""Source adapters: turn a user's file into a relation of the contract's columns as text.

Every adapter loads a temp table ``_raw`` whose rowid is the record's position and whose
columns are the kind's, as VARCHAR (numeric ones may be DOUBLE already), so validation is the same for every format. CSV and Parquet
are read by DuckDB itself; the JSON and GWA formats are mapped to contract frames first (see pipelines.ingest.registry)."""
from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pandas as pd

from pipelines.ingest.contract import KindSpec
from pipelines.ingest.csv_lines import (
    MAX_LINE_BYTES,
    PREVIEW,
    TooLong,
    csv_reader,
    csv_records,
    line_starts,
    open_text,
    too_long_reason,
    unterminated_reason,
)
from pipelines.runtime.text import printable


class IngestFileError(Exception):
    """A file that cannot be used at all: nothing of it is written. ``code``: the exit status
    (2: the file is wrong; 1: the machine, a file this user may not read)."""

    def __init__(self, path: Path | str, problem: str, code: int = 2) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem
        self.code = code


UNREADABLE = "cannot be read (permission denied): let this user read it (chmod, chown)"


def readable(path: Path) -> bool:
    """Whether this user may open ``path`` to read (tried, as capabilities and ACLs decide)."""
    try:
        with open(path, "rb"):
            return True
    except PermissionError:
        return False


@dataclass
class RawInput:
    """What an adapter read: the ``_raw`` temp table plus how to point back into the file."""

    fmt: str
    rows_read: int
    structural: list[tuple[int, str, str]] = field(default_factory=list)  # (line, raw, reason)
    locate: Callable[[list[int]], dict[int, tuple[int, str]]] | None = None
    typed: frozenset[str] = frozenset()  # columns the reader typed (numeric: DOUBLE, ts: TIMESTAMPTZ)
    lazy: bool = False  # _raw is a view over the file: no positions, rejects known after the scan
    columns: dict[str, str] = field(default_factory=dict)  # a CSV's header, each name with the type read as
    delimiter: str = ","
    path: Path | None = None  # a CSV's file, to turn the reader's byte positions into line numbers


def head(path: Path, size: int | None = None) -> str:
    """The first line (or ``size`` characters) of a file; an unreadable one is an IngestFileError."""
    try:
        with open_text(path) as fh:
            return fh.readline() if size is None else fh.read(size)
    except (OSError, EOFError, UnicodeDecodeError) as exc:  # gzip.BadGzipFile is an OSError
        raise IngestFileError(path, f"unreadable: {exc}") from exc


def header_of(path: Path, delimiter: str) -> list[str]:
    if not path.name.lower().endswith(".gz"):
        try:
            with open(path, "rb") as fh:
                if fh.read(2) == b"\x1f\x8b":
                    raise IngestFileError(path, "gzip-compressed but not named .gz: rename it to end in .gz")
        except OSError as exc:
            raise IngestFileError(path, f"unreadable: {exc}") from exc
    try:
        with open_text(path) as fh:
            first = next(csv_reader(fh, delimiter), None)
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise IngestFileError(path, f"unreadable: {exc}") from exc
    if not first:
        raise IngestFileError(path, "empty file (no header line)")
    return [h.strip() for h in first]


def _require(path: Path, header: list[str], spec: KindSpec) -> None:
    dupes = sorted({h for h in header if header.count(h) > 1 and h in spec.columns})
    if dupes:
        raise IngestFileError(path, f"header repeats column(s) {', '.join(dupes)}")
    missing = [c for c in spec.columns if c not in header]
    if missing:
        hint = ""
        if len(header) == 1 and any(sep in header[0] for sep in (";", "\t", "|")):
            hint = " (it looks separated by something other than commas: headroom reads comma-separated CSV)"
        raise IngestFileError(
            path,
            f"missing column(s) {', '.join(missing)} for kind {spec.kind}; "
            f"header is: {printable(','.join(header)[:200])}{hint}",
        )


def reader_names(header: list[str], spec: KindSpec) -> list[str]:
    """The header as the reader is told it: an extra column (one the contract ignores) with
    no name, or a name written twice (``...,capacity,`` from a spreadsheet, ``note,note``),
    gets a placeholder ``_extra<position>``, so it is ignored like any other extra."""
    seen: set[str] = set()
    out = []
    for i, h in enumerate(header, start=1):
        out.append(h if h in spec.columns or (h and h not in seen) else f"_extra{i}")
        seen.add(h)
    return out


def _sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _csv_locator(path: Path, skip_lines: set[int], delimiter: str) -> Callable[[list[int]], dict[int, tuple[int, str]]]:
    """Map record positions of good-structure rows back to (line, raw text) by one scan."""

    def locate(idxs: list[int]) -> dict[int, tuple[int, str]]:
        wanted = set(idxs)
        found: dict[int, tuple[int, str]] = {}
        if not wanted:
            return found
        idx = -1
        for n, text, row in csv_records(path, delimiter):
            if n in skip_lines or not text.strip() or not row or isinstance(row, TooLong):
                continue
            idx += 1
            if idx in wanted:
                found[idx] = (n, text)
                if len(found) == len(wanted):
                    break
        return found

    return locate


def _epoch_like(path: Path, header: list[str], column: str, delimiter: str, sample: int = 200) -> bool:
    """Whether the first rows write ``column`` as a number (epoch seconds or ms)."""
    pos = header.index(column)
    with open_text(path) as fh:
        reader = csv_reader(fh, delimiter)
        next(reader, None)
        for n, row in enumerate(reader):
            if n >= sample:
                break
            if pos < len(row) and re.fullmatch(r"\s*-?\d+(\.\d+)?\s*", row[pos]):
                return True
    return False


def drop_raw(con: duckdb.DuckDBPyConnection) -> None:
    """Drop ``_raw``, whether the last adapter left a view or a table."""
    if con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = '_raw' AND temporary").fetchone()[0]:
        con.execute("DROP VIEW _raw")
    con.execute("DROP TABLE IF EXISTS _raw")


def _csv_reader_sql(path: Path, header: list[str], types: dict[str, str], delimiter: str) -> str:
    columns = "{" + ", ".join(f"{_sql_str(h)}: '{types.get(h, 'VARCHAR')}'" for h in header) + "}"
    return (
        f"read_csv({_sql_str(str(path))}, header = true, auto_detect = false, columns = {columns}, "
        f"delim = {_sql_str(delimiter)}, quote = '\"', escape = '\"', store_rejects = true, "
        "rejects_table = '_csv_rejects', rejects_scan = '_csv_scans')"
    )


_NUMBER = re.compile(r"\s*-?\d+(\.\d+)?\s*")


_TARGET = {"DOUBLE": "DOUBLE", "TIMESTAMP WITH TIME ZONE": "TIMESTAMPTZ"}


def _cast_column(raw: RawInput, line_text: str, value: str, target: str, named: str, taken: set[str]) -> str:
    """The column a cast error is really in. DuckDB's rejects table can name the wrong
    column when only some of the file's columns are selected (an extra column before the
    contract's ones shifts it), so the line is split again and the column found whose
    field is the failing text and whose type is the cast's target."""
    if not raw.columns:
        return named
    try:
        fields = next(csv_reader([line_text], raw.delimiter), [])
    except csv.Error:
        return named
    want = _TARGET.get(target)
    hits = [h for h, f in zip(raw.columns, fields) if f == value and (want is None or raw.columns[h] == want)]
    if named in hits:
        return named
    fresh = [h for h in hits if h not in taken]
    return (fresh or hits or [named])[0]


def _general_parser_reads(con: duckdb.DuckDBPyConnection, values: list[str]) -> bool:
    """Whether the general timestamp parser reads any of the values the fast reader refused (a
    lower-case z, a space before the offset), in one query however many they are."""
    from pipelines.ingest.validate import parse_timestamp_sql

    return bool(values) and bool(con.execute(f"SELECT bool_or(({parse_timestamp_sql('trim(v)')}) IS NOT NULL) "
                                             "FROM (SELECT unnest(?) AS v)", [values]).fetchone()[0])


def csv_structural(con: duckdb.DuckDBPyConnection, spec: KindSpec, raw_input: RawInput | None = None
                   ) -> list[tuple[int, str, str]] | None:
    """The reader's rejects as (line, raw, reason); None when a timestamp the fast reader
    refused is an epoch number or another form the general parser reads (the file must be
    read again with it).
    ``raw_input``: what the reader was told the columns are, to name a cast error's column."""
    out = []
    refused: list[str] = []  # the timestamps the reader refused: one look by the general parser after
    taken: dict[int, set[str]] = {}
    found = con.execute(
        "SELECT line, line_byte_position, column_name, error_type, csv_line, error_message FROM _csv_rejects "
        "ORDER BY line"
    ).fetchall()
    line_of, n_lines = (line_starts(raw_input.path) if found and raw_input is not None and raw_input.path
                        else (None, None))
    for reader_line, byte_position, column, kind, raw, msg in found:
        line = reader_line if line_of is None or byte_position is None else line_of(int(byte_position), str(raw))
        raw = str(raw).lstrip("\r\n")
        bad = re.search(r'string "(.*?)" to \'(.*?)\'', msg)
        value = bad.group(1) if bad else ""
        if kind == "CAST" and bad and raw_input is not None:
            column = _cast_column(raw_input, str(raw), value, bad.group(2), column, taken.setdefault(int(line), set()))
            taken[int(line)].add(column)
        if kind == "CAST" and column == spec.timestamp:
            if _NUMBER.fullmatch(value):
                return None
            refused.append(value)
            reason = f"{column}: unparseable timestamp '{value[:40]}'"
        elif kind == "CAST":
            reason = f"{column}: not a number '{value[:40]}'"
        elif "unterminated quote" in msg:  # the reader read on to the end of the file
            n_after = (n_lines - int(line) if n_lines is not None
                       else str(raw).replace("\r\n", "\n").replace("\r", "\n").count("\n"))
            reason = unterminated_reason(int(line), n_after)
            raw = raw[:PREVIEW]
        elif kind == "LINE SIZE OVER MAXIMUM":
            size = re.search(r"Actual Size:\s*(\d+)", msg)
            reason = too_long_reason(int(size.group(1)) if size else MAX_LINE_BYTES + 1)
            raw = raw[:PREVIEW]
        else:
            reason = f"malformed line: {msg.splitlines()[0]}"
        out.append((int(line), str(raw), reason))
    if _general_parser_reads(con, refused):
        return None
    # the reader can report one line several times (a short line once per missing column):
    # one reject per line: a malformed line is just that; otherwise its distinct cast reasons
    whole = ("malformed line", "line too long", "unterminated quote")  # reasons about the line itself, not a value
    merged: dict[int, tuple[str, list[str]]] = {}
    for line, raw, reason in out:
        _, reasons = merged.setdefault(line, (raw, []))
        if reason.startswith(whole) and any(r.startswith(whole) for r in reasons):
            continue
        if reason not in reasons:
            reasons.append(reason)
    return [(line, raw, next((r for r in reasons if r.startswith(whole)), "; ".join(reasons)))
            for line, (raw, reasons) in merged.items()]


def read_csv(con: duckdb.DuckDBPyConnection, path: Path, spec: KindSpec, delimiter: str = ",",
             fast_timestamps: bool | None = None, lazy: bool = False) -> RawInput:
    """Read a (gzipped) CSV with DuckDB into ``_raw``. The reader types the numeric
    columns and, unless the file writes epoch numbers, the ISO timestamps (offsets
    included); its cast errors and structurally broken lines become rejects.

    ``lazy``: ``_raw`` is a view over the reader, so validation reads the file once;
    rows then have no position, and the reader's rejects are known only after the scan
    (:func:`csv_structural`). Ingest uses it first and re-reads eagerly only when some
    row is rejected. Eager: ``_raw`` is a table whose rowid is the record's position; an
    epoch number among ISO timestamps sends it to the general timestamp parser."""
    header = header_of(path, delimiter)
    _require(path, header, spec)
    header = reader_names(header, spec)
    if fast_timestamps is None:
        fast_timestamps = spec.timestamp is not None and not _epoch_like(path, header, spec.timestamp, delimiter)
    types = {c: "DOUBLE" for c in (*spec.numeric, *spec.optional_numeric)}
    if fast_timestamps and spec.timestamp:
        types[spec.timestamp] = "TIMESTAMPTZ"
    select = ", ".join('"' + c + '"' for c in spec.columns)
    drop_raw(con)
    con.execute("DROP TABLE IF EXISTS _csv_rejects; DROP TABLE IF EXISTS _csv_scans")
    reader = _csv_reader_sql(path, header, types, delimiter)
    if lazy:
        try:
            con.execute(f"CREATE TEMP VIEW _raw AS SELECT {select} FROM {reader}")
        except duckdb.Error as exc:
            raise IngestFileError(path, f"unreadable as CSV: {str(exc).splitlines()[0]}") from exc
        return RawInput("csv", 0, [], None, typed=frozenset(types), lazy=True,
                        columns={h: types.get(h, "VARCHAR") for h in header}, delimiter=delimiter, path=path)
    try:
        con.execute(f"CREATE TEMP TABLE _raw AS SELECT {select} FROM {reader}")
    except duckdb.Error as exc:
        if dialect_error(exc):
            return read_csv_python(con, path, spec, delimiter)
        raise IngestFileError(path, f"unreadable as CSV: {str(exc).splitlines()[0]}") from exc
    columns = {h: types.get(h, "VARCHAR") for h in header}
    structural = csv_structural(con, spec, RawInput("csv", 0, columns=columns, delimiter=delimiter, path=path))
    if structural is None:
        return read_csv(con, path, spec, delimiter, fast_timestamps=False)
    n = con.execute("SELECT count(*) FROM _raw").fetchone()[0]
    skip = {s[0] for s in structural}
    return RawInput("csv", n + len(structural), structural, _csv_locator(path, skip, delimiter),
                    typed=frozenset(types), columns=columns, delimiter=delimiter, path=path)


def dialect_error(exc: BaseException | None) -> bool:
    """Whether DuckDB's reader refused the file as a whole for something Python's csv module
    reads (line endings that change within the file: CRLF lines with LF ones)."""
    return isinstance(exc, duckdb.Error) and "state machine reached an invalid state" in str(exc)


def read_csv_python(con: duckdb.DuckDBPyConnection, path: Path, spec: KindSpec, delimiter: str = ",") -> RawInput:
    """The slow, lenient path for a file DuckDB's strict reader refuses as a whole: every
    record read by Python's csv module (any mix of line endings), a record with the wrong
    number of fields a reject with its line, the rest validated like any other format."""
    header = reader_names(header_of(path, delimiter), spec)
    pos = [header.index(c) for c in spec.columns]
    rows: dict[str, list] = {c: [] for c in (*spec.columns, "_line", "_raw", "_reject")}
    try:
        for line, text, fields in csv_records(path, delimiter):
            if isinstance(fields, TooLong):
                for c in spec.columns:
                    rows[c].append(None)
                rows["_line"].append(line)
                rows["_raw"].append(text)
                rows["_reject"].append(fields.reason)
                continue
            if not text.strip() or not fields:
                continue
            wrong = len(fields) != len(header)
            for c, i in zip(spec.columns, pos):
                rows[c].append(None if wrong or i >= len(fields) else fields[i])
            rows["_line"].append(line)
            rows["_raw"].append(text)
            rows["_reject"].append(f"malformed line: expected {len(header)} fields, found {len(fields)}"
                                   if wrong else None)
    except (csv.Error, OSError, UnicodeDecodeError) as exc:
        raise IngestFileError(path, f"unreadable as CSV: {exc}") from exc
    # a quote that never closes makes the last record run to the end of the file (an odd
    # number of quote characters: a closed quote, or one doubled inside, counts two)
    if rows["_raw"] and rows["_raw"][-1].count('"') % 2:
        last = rows["_raw"][-1]
        swallowed = last.replace("\r\n", "\n").replace("\r", "\n").count("\n")
        rows["_reject"][-1] = unterminated_reason(rows["_line"][-1], swallowed)
        rows["_raw"][-1] = last[:PREVIEW]
    return load_frame(con, pd.DataFrame(rows), spec, "csv")


def read_parquet(con: duckdb.DuckDBPyConnection, path: Path, spec: KindSpec) -> RawInput:
    """Load a Parquet file's contract columns into ``_raw`` (as text, validated like CSV)."""
    try:
        cols = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM read_parquet({_sql_str(str(path))})").fetchall()]
    except duckdb.Error as exc:
        raise IngestFileError(path, f"unreadable as Parquet: {str(exc).splitlines()[0]}") from exc
    _require(path, cols, spec)
    select = ", ".join(f'CAST("{c}" AS VARCHAR) AS "{c}"' for c in spec.columns)
    drop_raw(con)
    con.execute(f"CREATE TEMP TABLE _raw AS SELECT {select} FROM read_parquet({_sql_str(str(path))})")
    n = con.execute("SELECT count(*) FROM _raw").fetchone()[0]
    return RawInput("parquet", n, [], _table_locator(con, spec))


def _table_locator(con: duckdb.DuckDBPyConnection, spec: KindSpec) -> Callable[[list[int]], dict[int, tuple[int, str]]]:
    """Record number = position + 1; raw text = the record's contract values as CSV."""

    def locate(idxs: list[int]) -> dict[int, tuple[int, str]]:
        if not idxs:
            return {}
        con.execute("DROP TABLE IF EXISTS _want")
        con.execute("CREATE TEMP TABLE _want (i BIGINT)")
        con.executemany("INSERT INTO _want VALUES (?)", [[i] for i in idxs])
        rows = con.execute(
            "SELECT _raw.rowid AS _idx, _raw.* FROM _raw JOIN _want ON _raw.rowid = _want.i"
        ).df()
        out = {}
        for rec in rows.to_dict("records"):
            text = ",".join("" if rec[c] is None else str(rec[c]) for c in spec.columns)
            out[int(rec["_idx"])] = (int(rec["_idx"]) + 1, text)
        return out

    return locate


def load_frame(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame, spec: KindSpec, fmt: str) -> RawInput:
    """Load an adapter's contract frame (text columns plus ``_line``, ``_raw``) into ``_raw``.

    An optional ``_reject`` column holds the adapter's own reason to reject a row (one the
    contract's checks could not word, such as a unit conversion without its divisor): those
    rows are rejects with that reason and never reach validation."""
    rows_read = len(frame)
    raw_of = frame.attrs.get("raw_of")  # an adapter may write a reject's raw text only when asked
    structural: list[tuple[int, str, str]] = []
    if "_reject" in frame.columns:
        bad = frame["_reject"].notna().to_numpy()
        structural = [(int(line), raw_of(line) if raw_of else str(raw), str(why)) for line, raw, why in
                      zip(frame.loc[bad, "_line"], frame.loc[bad, "_raw"], frame.loc[bad, "_reject"])]
        frame = frame.loc[~bad].reset_index(drop=True)
    work = pd.DataFrame({c: frame[c].astype("string") if c in frame else pd.NA for c in spec.columns})
    drop_raw(con)
    con.register("_frame_in", work)
    try:
        con.execute("CREATE TEMP TABLE _raw AS SELECT * FROM _frame_in")
    finally:
        con.unregister("_frame_in")
    lines = frame["_line"].tolist()
    raws = frame["_raw"].tolist()

    def locate(idxs: list[int]) -> dict[int, tuple[int, str]]:
        return {i: (int(lines[i]), raw_of(lines[i]) if raw_of else str(raws[i])) for i in idxs}

    return RawInput(fmt, rows_read, structural, locate)


NESTED_TOO_DEEP = ("JSON nested too deep to read (more levels of arrays or objects than Python's parser "
                   "follows): not an export headroom reads; nothing of it was written")


def load_json(path: Path) -> object:
    """A JSON file (gzip or plain) as Python objects; invalid JSON names its line and column."""
    try:
        with open_text(path) as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise IngestFileError(path, f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from exc
    except RecursionError:  # Python's parser recurses once per level: ~1000 deep is its end
        raise IngestFileError(path, NESTED_TOO_DEEP) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise IngestFileError(path, f"unreadable: {exc}") from exc
