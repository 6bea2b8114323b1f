"""The converters' readers and errors: a source file's columns, numbers, ids and times read
with the file, line and column of a bad value, and the files read beside a converter's input
(sidecars), whose errors name that file."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from pipelines.ingest.tables import parse_like_ingest, row_label


class RecordError(ValueError):
    """A bad value in record ``record`` (read_csv's index: 0 is the first after the header)
    of column ``column``; :meth:`at` words it with the file's own line."""

    def __init__(self, record: int, column: object, problem: str) -> None:
        super().__init__(f"line {record + 2}, column {column!r}: {problem}")  # the line when no line is blank
        self.record, self.column, self.problem = record, column, problem

    def at(self, path: Path) -> str:
        return f"{row_label(path, self.record)}, column {self.column!r}: {self.problem}"


def _bad(values: pd.Series, bad: pd.Series, problem: str) -> RecordError:
    """The error of the first flagged row of ``values``, counting the rows flagged."""
    return RecordError(int(bad[bad].index[0]), values.name, f"{problem} ({int(bad.sum())} such row(s))")


def _iso(ts: pd.Series) -> pd.Series:
    """Timestamps -> naive UTC ISO text, parsed as ``headroom ingest`` parses them (an offset
    or zone name converts to UTC, a naive time is UTC, a number is epoch seconds or ms); a
    missing or unparseable one is a ValueError that names its line and column."""
    iso = parse_like_ingest(ts, as_text=True)
    bad = iso.isna()
    if bad.any():
        shown = ts[bad].iloc[0]
        what = "missing timestamp" if pd.isna(shown) else f"unparseable timestamp {str(shown)[:40]!r}"
        raise _bad(ts, bad, what)
    return iso


def _read(path: Path, columns: list[str], **kwargs: object) -> pd.DataFrame:
    """The source file, with the columns its converter reads: a file of another kind is "no
    column ..." before any of its values are read (an AWS spot file given as on-demand prices
    was "two on-demand prices")."""
    frame = pd.read_csv(path, **kwargs)
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ColumnsError(f"no column {', '.join(repr(c) for c in missing)}")
    return frame


class ColumnsError(ValueError):
    """A file without the columns its converter reads."""


def _num(values: pd.Series, required: bool = False) -> pd.Series:
    """Numbers (empty cells NaN, or a ValueError naming the line where ``required``: a row cut
    short); text that is not a number, or an infinite one, is a ValueError naming its line and
    column."""
    out = pd.to_numeric(values, errors="coerce").astype(float)
    blank = values.isna() | (values.astype(str).str.strip() == "")
    if required and blank.any():  # an empty cell, or one of spaces
        raise _bad(values, blank, "missing number")
    bad = out.isna() & values.notna() & (values.astype(str).str.strip() != "")
    if bad.any():
        raise _bad(values, bad, f"{str(values[bad].iloc[0])[:40]!r} is not a number")
    infinite = pd.Series(np.isinf(out.to_numpy()), index=values.index)
    if infinite.any():  # NAB's clip made inf a full CPU
        raise _bad(values, infinite, f"{str(values[infinite].iloc[0])[:40]!r} is not a finite number")
    return out


def _ids(values: pd.Series) -> pd.Series:
    """Identifiers as text as written (``1`` stays ``1``, never ``1.0``); a missing one is a
    ValueError naming its line and column (a trailing partial line, say)."""
    text = values.map(lambda v: None if pd.isna(v) else str(v).strip())
    bad = text.isna() | (text == "")
    if bad.any():
        raise _bad(values, bad, "missing id")
    return text.astype(str)


class SidecarError(ValueError):
    """A file a converter reads beside the one it was given is not what it expects."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path


def read_sidecar(path: Path, columns: list[str], **kwargs: object) -> pd.DataFrame:
    """Read a CSV found beside a converter's input; errors name that file, not the input."""
    try:
        return _read(path, columns, **kwargs)
    except ColumnsError as exc:
        raise SidecarError(path, str(exc)) from exc
    except (ValueError, OSError, EOFError, pd.errors.ParserError) as exc:
        raise SidecarError(path, f"unreadable ({exc})") from exc


def _sidecar_iso(path: Path, ts: pd.Series) -> pd.Series:
    """:func:`_iso` of a sidecar's column: a bad timestamp names the sidecar, not the input."""
    try:
        return _iso(ts)
    except RecordError as exc:
        raise SidecarError(path, exc.at(path)) from exc


def _sidecar_ids(path: Path, values: pd.Series) -> pd.Series:
    """:func:`_ids` of a sidecar's column, its errors naming the sidecar."""
    try:
        return _ids(values)
    except RecordError as exc:
        raise SidecarError(path, exc.at(path)) from exc


def _sidecar_counts(path: Path, f: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """``f`` with ``columns`` (those present) as numbers, none negative; a bad one names the
    sidecar's line and column (text, or -1 GPUs that made a GPU machine a CPU offer)."""
    f = f.copy()
    try:
        for col in (c for c in columns if c in f.columns):
            f[col] = _num(f[col])
            if (f[col] < 0).any():
                raise _bad(f[col], f[col] < 0, "negative count")
    except RecordError as exc:
        raise SidecarError(path, exc.at(path)) from exc
    return f
