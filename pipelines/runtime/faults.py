"""Faults of the machine headroom runs on, worded as one line each: a full disk, a read-only
file system, no permission. The line names the file or the warehouse, says what happened
and what to do; the exit status is 1 (the environment must change, not the input).

Python's ``OSError`` says what happened in its errno; DuckDB's errors only in their text
(``IO Error: Could not write file "...wh.duckdb.wal": No space left on device``), so both
are read. docs/errors.md lists every fault and its line."""
from __future__ import annotations

import errno
import re
from dataclasses import dataclass
from pathlib import Path

ENVIRONMENT = 1  # exit status: the machine, not the input (bad input is 2)


class EnvironmentFault(Exception):
    """A fault of the environment, worded for the user; ``code`` is the exit status."""

    def __init__(self, message: str, code: int = ENVIRONMENT) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Kind:
    """One kind of fault: how to recognise it and what to do about it."""

    what: str
    errnos: tuple[int, ...]
    texts: tuple[str, ...]  # lower-case, as the C library's strerror (DuckDB's texts are those)
    todo: str  # for a file headroom writes
    todo_warehouse: str


KINDS = (
    Kind("disk full", (errno.ENOSPC, errno.EDQUOT), ("no space left on device", "disk quota exceeded"),
         "free space on its file system, or write it elsewhere, and run again",
         "free space on its file system, or move it (--db, HEADROOM_DB) to one with room, and run again"),
    Kind("read-only file system", (errno.EROFS,), ("read-only file system",),
         "remount the file system read-write, or write elsewhere",
         "remount the file system read-write or copy the warehouse to a writable place (--db, HEADROOM_DB); "
         "status and report read it where it is"),
    Kind("permission denied", (errno.EACCES, errno.EPERM), ("permission denied", "operation not permitted"),
         "let this user write the file and its folder (chmod, chown), or write elsewhere",
         "let this user read and write the file and its folder (chmod, chown), or use another --db"),
)

_QUOTED_PATH = re.compile(r"""(?:file|directory|database)\s+["']([^"']+)["']""", re.IGNORECASE)


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what caused it (``raise ... from``, or an error while handling another)."""
    out: list[BaseException] = []
    while exc is not None and exc not in out and len(out) < 8:
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


def _speaks_for_the_system(exc: BaseException) -> bool:
    """Whether ``exc``'s text is the system's: an OSError without an errno (pyarrow's), or one of
    DuckDB's; another error that merely mentions "permission denied" (an HTTP reply) is not."""
    return isinstance(exc, OSError) or type(exc).__module__.lstrip("_").startswith("duckdb")


def kind_of(exc: BaseException) -> Kind | None:
    """The kind of environment fault ``exc`` (or its cause) is, else None."""
    for e in _chain(exc):
        if isinstance(e, OSError) and e.errno is not None:
            for kind in KINDS:
                if e.errno in kind.errnos:
                    return kind
        if not _speaks_for_the_system(e):
            continue
        text = str(e).lower()
        for kind in KINDS:
            if any(t in text for t in kind.texts):
                return kind
    return None


def path_of(exc: BaseException) -> str | None:
    """The file ``exc`` names: an OSError's filename, or the one quoted in DuckDB's text."""
    for e in _chain(exc):
        if isinstance(e, OSError) and e.filename:
            return str(e.filename)
        found = _QUOTED_PATH.search(str(e))
        if found:
            return found.group(1)
    return None


def _detail(exc: BaseException, kind: Kind) -> str:
    """The system's own words (``No space left on device``), when it gave them."""
    for e in _chain(exc):
        if isinstance(e, OSError) and e.strerror:
            return e.strerror
        found = re.search("|".join(re.escape(t) for t in kind.texts), str(e), re.IGNORECASE)
        if found:
            return found.group(0)
    return kind.what


def is_warehouse_file(path: str | Path, warehouse: str | Path | None) -> bool:
    """Whether ``path`` is the warehouse or one of DuckDB's files beside it (``.wal``, ``.tmp/``)."""
    if warehouse is None or str(warehouse) == ":memory:":
        return False
    db = Path(warehouse).absolute()
    p = Path(path).absolute()
    return (p == db or (p.parent == db.parent and p.name.startswith(db.name + "."))
            or db.with_name(db.name + ".tmp") in p.parents)


def message(kind: Kind, exc: BaseException, *, path: str | Path | None = None,
            warehouse: str | Path | None = None, of_warehouse: bool = False) -> str:
    """The one line: the file or the warehouse, what happened, that nothing was written, what
    to do. ``of_warehouse``: the fault is the warehouse's whatever file it names (its folder)."""
    where = str(path or path_of(exc) or "") or None
    detail = _detail(exc, kind)
    said = "" if detail.lower() == kind.what else f" ({detail})"
    if warehouse is not None and (of_warehouse or where is None or is_warehouse_file(where, warehouse)):
        at = "" if where is None or Path(where).absolute() == Path(warehouse).absolute() else f" at {where}"
        return f"warehouse {warehouse}: {kind.what}{at}{said}; nothing of this step was written: {kind.todo_warehouse}"
    return f"{where or 'a file'}: {kind.what}{said}; nothing was written (what was there is unchanged): {kind.todo}"


def environment_fault(exc: BaseException, *, path: str | Path | None = None,
                      warehouse: str | Path | None = None, of_warehouse: bool = False) -> EnvironmentFault | None:
    """``exc`` as an :class:`EnvironmentFault` when it is one (a full disk, a read-only file
    system, no permission), else None. ``warehouse``: the warehouse path, to name it as such."""
    kind = kind_of(exc)
    if kind is None:
        return None
    return EnvironmentFault(message(kind, exc, path=path, warehouse=warehouse, of_warehouse=of_warehouse))
