"""The DuckDB warehouse: connections, migrations, transactions and upserts.

This is the only module that opens the database file. Migrations are the
``data/schema/NNN_name.sql`` files, applied in order and recorded in
``schema_version``.
"""
from __future__ import annotations

import contextlib
import glob
import logging
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pandas as pd
from pandas.api.types import union_categoricals

from pipelines.runtime import faults
from pipelines.runtime.settings import SCHEMA_DIR

log = logging.getLogger(__name__)

_MIGRATION = re.compile(r"^(\d{3})_([a-z0-9_]+)\.sql$")


class WarehouseLockedError(RuntimeError):
    """Another process holds the database's write lock for longer than the timeout."""


class NotAWarehouseError(RuntimeError):
    """The path is not a headroom warehouse: another format, a corrupt or truncated DuckDB
    file, or another program's DuckDB database. Bad input: exit status 2."""

    code = 2


class NewerWarehouseError(NotAWarehouseError):
    """The warehouse records a migration newer than this headroom has: a newer headroom wrote
    it, and this one would misread what it cannot know. Exit status 2."""


# what DuckDB says of a file it cannot read as a database (at open, or when a query meets the block)
_CORRUPT = ("corrupt database file", "could not read enough bytes from file", "not a valid duckdb database file",
            "trying to read a database file with version number", "failure while replaying wal file")


def _corrupt(db: str | Path, exc: BaseException) -> NotAWarehouseError:
    detail = str(exc).splitlines()[0].removeprefix("IO Error: ")
    if "failure while replaying wal file" in detail.lower():  # a log of another copy of the file
        return NotAWarehouseError(
            f"warehouse {db}: its write-ahead log {db}.wal belongs to another copy of the file (one restored "
            f"or copied over it after a crash) and cannot be replayed; nothing was written: move {db}.wal "
            "aside (the log of the crashed run's unfinished writes) and run the command again")
    if "not a valid duckdb database file" in detail.lower():  # a zero-byte file, another format
        return NotAWarehouseError(f"{db} is not a DuckDB warehouse file ({detail[:160]}); nothing was written: "
                                  "give --db a headroom warehouse or a new file")
    return NotAWarehouseError(
        f"warehouse {db}: not a readable DuckDB file, it is corrupt or truncated ({detail[:160]}); nothing was "
        "written: restore it from a backup, or give --db a new file and ingest the inputs again")


def corrupt_warehouse(exc: BaseException, db: str | Path | None) -> NotAWarehouseError | None:
    """``exc`` (met anywhere in a command) as the one-line error of a corrupt warehouse file, else None."""
    if not isinstance(exc, duckdb.Error) or not any(t in str(exc).lower() for t in _CORRUPT):
        return None
    return _corrupt(db if db is not None else "file", exc)


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc).lower()
    return "lock" in text and ("conflicting" in text or "could not set lock" in text)


DUCKDB_MAGIC = b"DUCK"  # bytes 8-11 of every DuckDB database file


def check_is_warehouse(path: Path, allow_empty: bool = True) -> None:
    """A folder, or an existing non-empty file that is not a DuckDB database, is refused
    before DuckDB sees it: some DuckDB versions open a CSV as a throwaway in-memory database
    without a word, and a folder fails with a raw IOException. An empty file passes (another
    process may be creating the warehouse right now) unless ``allow_empty`` is False: a
    check made once, ahead of runs that would all fail on it (``serve``)."""
    if path.is_dir():
        raise NotAWarehouseError(f"{path} is a folder, not a DuckDB warehouse file")
    try:
        with open(path, "rb") as fh:
            head = fh.read(12)
    except FileNotFoundError:
        return  # a new warehouse
    except OSError as exc:
        fault = faults.environment_fault(exc, warehouse=path, of_warehouse=True)
        if fault is not None:  # no permission: the machine's setup, not the file
            raise fault from exc
        raise NotAWarehouseError(f"{path} cannot be read as a warehouse ({exc})") from exc
    if not head and not allow_empty:
        raise NotAWarehouseError(f"{path} is an empty file, not a DuckDB warehouse: remove it (the first run "
                                 "creates the warehouse) or point HEADROOM_DB elsewhere")
    if head and head[8:12] != DUCKDB_MAGIC:
        raise NotAWarehouseError(f"{path} is not a DuckDB warehouse file (it starts {head[:12]!r})")


def _being_created(target: str, exc: Exception) -> bool:
    """Whether DuckDB found no database header because another process is creating the file
    right now (it holds the file's lock and has not written the header yet): wait as for a
    lock, rather than call a new warehouse no DuckDB file."""
    if "not a valid duckdb database file" not in str(exc).lower():
        return False
    try:
        import fcntl
    except ImportError:  # not POSIX: no such lock to see
        return False
    try:
        with open(target, "rb") as fh:
            try:
                fcntl.lockf(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                return True  # DuckDB's writer holds it
            fcntl.lockf(fh, fcntl.LOCK_UN)
    except OSError:
        return False
    return False


def default_lock_timeout() -> float:
    """The ``HEADROOM_LOCK_TIMEOUT`` setting (30 s unless set), read as every setting is."""
    from pipelines.runtime.settings import Settings

    return Settings.from_env().lock_timeout_s


# how long past HEADROOM_LOCK_TIMEOUT a waiter waits for a running `prune --compact` at most
COMPACTION_WAIT_S = 3600.0


def compaction_copy(path: Path, pid: int | None = None) -> Path:
    """Where process ``pid`` (this one by default) writes its compacted copy of the warehouse
    ``path``: hidden, beside the file (one rename away); it exists while the copy is made."""
    return path.with_name(f".{path.name}.compact-{os.getpid() if pid is None else pid}")


def compaction_copies(path: Path) -> list[Path]:
    """Every compacted copy of ``path`` there is: ones being made, and ones a killed compaction left."""
    return sorted(path.parent.glob(f".{glob.escape(path.name)}.compact-*"))


def compaction_running(target: str) -> int | None:
    """The pid of a live process compacting ``target`` (see ``retention.compact``), else None."""
    for copy in compaction_copies(Path(target).resolve()):
        pid = copy.name.rsplit("-", 1)[-1]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except PermissionError:  # another user's process: alive
            return int(pid)
        except (OSError, OverflowError):  # gone: a killed compaction's leftover
            continue
        return int(pid)
    return None


def _compaction_extends(target: str, deadline: float, lock_timeout_s: float) -> bool:
    """Whether a waiter past its deadline goes on waiting: the lock is a compaction's, which
    holds it for the whole copy (minutes on a big file); at most COMPACTION_WAIT_S more."""
    if target == ":memory:" or time.monotonic() >= deadline + COMPACTION_WAIT_S:
        return False
    pid = compaction_running(target)
    if pid is None:
        return False
    if pid not in _WAITED_FOR:
        _WAITED_FOR.add(pid)
        log.warning("warehouse %s: waited %.0fs; process %d is compacting it (headroom prune --compact), "
                    "waiting for it to finish", target, lock_timeout_s, pid)
    return True


_WAITED_FOR: set[int] = set()  # compactions this process has said it waits for


# warehouses this process reads behind the schema: a table or column they lack is that, not a bug
READ_BEHIND: set[str] = set()


def connect(
    path: str | Path = ":memory:",
    *,
    read_only: bool = False,
    lock_timeout_s: float | None = None,
    migrate_schema: bool = True,
) -> duckdb.DuckDBPyConnection:
    """Open the warehouse, waiting up to ``lock_timeout_s`` for another writer (default:
    ``HEADROOM_LOCK_TIMEOUT``, else 30 s, so every command and flow honours the setting),
    and migrate it. A reader (``read_only``) never writes: it reads a warehouse behind the
    schema as it is, and an empty DuckDB file as an empty warehouse. Another program's
    DuckDB database, or a corrupt file, is a :class:`NotAWarehouseError`; a full disk, a
    read-only file system or no permission an :class:`~pipelines.runtime.faults.EnvironmentFault`."""
    lock_timeout_s = default_lock_timeout() if lock_timeout_s is None else lock_timeout_s
    target = str(path)
    if target != ":memory:":
        check_is_warehouse(Path(target))
        try:
            if not read_only:  # a reader makes no folder either
                Path(target).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise (faults.environment_fault(exc, warehouse=target, of_warehouse=True) or exc) from exc
    began = time.monotonic()
    deadline = began + lock_timeout_s
    delay = 0.05
    while True:
        try:
            con = duckdb.connect(target, read_only=read_only)
            break
        except duckdb.Error as exc:
            if not _is_lock_error(exc) and not _being_created(target, exc):
                bad = corrupt_warehouse(exc, target) or faults.environment_fault(exc, warehouse=target,
                                                                                  of_warehouse=True)
                if bad is not None:
                    raise bad from exc
                raise
            if time.monotonic() >= deadline and not _compaction_extends(target, deadline, lock_timeout_s):
                waited = lock_timeout_s if time.monotonic() < deadline + 5 else time.monotonic() - began
                raise WarehouseLockedError(
                    f"warehouse {target} is locked by another process "
                    f"(waited {waited:.0f}s; set HEADROOM_LOCK_TIMEOUT to wait longer)"
                ) from exc
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
    try:
        con.execute("SET TimeZone = 'UTC'")
        if target != ":memory:" and migrate_schema and not _check_ours(con, target) and read_only:
            # an empty DuckDB file holds no data: read an empty warehouse, and write nothing to the file
            con.close()
            return connect(":memory:")
        if target != ":memory:":
            _refuse_newer(con, target)
        if migrate_schema and not read_only:
            migrate(con)
        elif migrate_schema and target != ":memory:" and not _schema_current(con):
            # a reader never writes (a read-only file system, another user's file): a writing
            # command (ingest, run) migrates it; until then the tables are read as they are
            log.warning("warehouse %s is behind this headroom's schema; reading it as it is (a command that "
                        "writes to it, as ingest, train or run, brings it up to date)", target)
            READ_BEHIND.add(target)
    except BaseException:
        con.close()
        raise
    return con


def _check_ours(con: duckdb.DuckDBPyConnection, target: str) -> bool:
    """Whether the file holds a headroom warehouse (False: an empty DuckDB file, a new one).
    Another program's DuckDB database is refused before anything is written to it: headroom
    never adds its tables beside someone else's."""
    tables = [r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() AND NOT temporary "
        "ORDER BY table_name").fetchall()]
    if not tables:
        return False
    ledger = {r[0] for r in con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE database_name = current_database() "
        "AND table_name = 'schema_version'").fetchall()}
    if not {"version", "name", "applied_at"} <= ledger:
        shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
        raise NotAWarehouseError(
            f"{target}: a DuckDB database of something else (tables {shown}), not a headroom warehouse; "
            "nothing was written to it: give --db (or HEADROOM_DB) a new file or a headroom warehouse")
    return True


def _refuse_newer(con: duckdb.DuckDBPyConnection, target: str) -> None:
    """NewerWarehouseError when the ledger records a migration beyond this headroom's newest."""
    try:
        newest = con.execute("SELECT max(version) FROM schema_version").fetchone()[0]
    except duckdb.CatalogException:
        return  # no ledger yet: a new warehouse
    known = max(v for v, _, _ in migrations())
    if newest is not None and newest > known:
        raise NewerWarehouseError(
            f"warehouse {target} was written by a newer headroom (schema version {newest:03d}; this one knows "
            f"up to {known:03d}); nothing was read or written: upgrade headroom, or give --db another warehouse")


def _schema_current(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether every migration is applied (an empty DuckDB file, or an older one, is not)."""
    try:
        done = {r[0] for r in con.execute("SELECT version FROM schema_version").fetchall()}
    except duckdb.CatalogException:
        return False
    return {v for v, _, _ in migrations() if v} <= done  # 000, the ledger itself, is never recorded


def has_table(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    """Whether the warehouse has ``table`` (one read behind the schema may not)."""
    return bool(con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = ?",
                            [table]).fetchone()[0])


@contextlib.contextmanager
def open_warehouse(
    path: str | Path, *, read_only: bool = False, lock_timeout_s: float | None = None
) -> Iterator[duckdb.DuckDBPyConnection]:
    """Context manager around :func:`connect` that always closes (and so unlocks) the file."""
    con = connect(path, read_only=read_only, lock_timeout_s=lock_timeout_s)
    try:
        yield con
    finally:
        con.close()


def migrations(schema_dir: Path = SCHEMA_DIR) -> list[tuple[int, str, Path]]:
    """The migration files in order: (version, name, path)."""
    found = []
    for p in sorted(schema_dir.glob("*.sql")):
        m = _MIGRATION.match(p.name)
        if m:
            found.append((int(m.group(1)), m.group(2), p))
    return found


def migrate(con: duckdb.DuckDBPyConnection, schema_dir: Path = SCHEMA_DIR) -> list[int]:
    """Apply pending migrations in order, each in its own transaction; return the versions applied."""
    steps = migrations(schema_dir)
    ledger = [s for s in steps if s[0] == 0]
    if not ledger:
        raise FileNotFoundError(f"no 000_*.sql migration ledger in {schema_dir}")
    con.execute(ledger[0][2].read_text())
    done = {r[0] for r in con.execute("SELECT version FROM schema_version").fetchall()}
    applied = []
    for version, name, path in steps:
        if version == 0 or version in done:
            continue
        with transaction(con):
            con.execute(path.read_text())
            con.execute(
                "INSERT INTO schema_version VALUES (?, ?, now()::TIMESTAMP)", [version, name]
            )
        log.info("applied migration %03d_%s", version, name)
        applied.append(version)
    return applied


@contextlib.contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """BEGIN ... COMMIT, or ROLLBACK on any exception: a failed write leaves nothing behind."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def table_columns(con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    """Column names of a warehouse table, in order."""
    rows = con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
        "ORDER BY ordinal_position",
        [table],
    ).fetchall()
    if not rows:
        raise KeyError(f"no table {table!r} in the warehouse")
    return [r[0] for r in rows]


def has_primary_key(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    """Whether ``table`` declares a PRIMARY KEY (the big fact tables keep theirs in the writer)."""
    return bool(
        con.execute(
            "SELECT count(*) FROM duckdb_constraints() WHERE table_name = ? AND constraint_type = 'PRIMARY KEY'",
            [table],
        ).fetchone()[0]
    )


def upsert(con: duckdb.DuckDBPyConnection, table: str, frame: pd.DataFrame) -> int:
    """Insert or replace ``frame``'s rows by the table's primary key; return the row count.

    Columns are matched by name; table columns missing from the frame become NULL
    (or their default). Call inside :func:`transaction` to group several writes.
    """
    if frame.empty:
        return 0
    cols = [c for c in table_columns(con, table) if c in frame.columns]
    view = f"_upsert_{table}"
    con.register(view, frame[cols])
    col_list = ", ".join(f'"{c}"' for c in cols)
    try:
        con.execute(f"INSERT OR REPLACE INTO {table} ({col_list}) SELECT {col_list} FROM {view}")
    except BaseException:
        # an interrupted insert aborts the transaction, and unregistering then fails too:
        # the interrupt is what the caller must see
        with contextlib.suppress(duckdb.Error):
            con.unregister(view)
        raise
    con.unregister(view)
    return len(frame)


def query(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> pd.DataFrame:
    """Run a read query and return a DataFrame."""
    return con.execute(sql, params or []).df()


ARROW_BATCH = 1 << 20  # rows: a long read is converted a batch at a time


def query_categorical(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> pd.DataFrame:
    """:func:`query`, with text columns as pandas categoricals (through Arrow, never a Python
    string per row) and timestamps in nanoseconds as :func:`query` gives them: a long table of
    repeated ids (device telemetry: device, node and metric on every reading) takes a tenth of
    the memory, and is faster to fetch. The rows stream from DuckDB a batch at a time, each
    batch turned into categoricals before the next, so the whole result never sits in memory
    as text (6.7M telemetry rows: 1.6 GB peak read whole, 0.65 GB streamed)."""
    try:
        reader = con.sql(sql, params=params or None).to_arrow_reader(ARROW_BATCH)
    except duckdb.ResourceInUseException:
        # an unfinished execute() result on this connection (a fetchone() leaves one): a new
        # execute() ends it anyway; ended by a trivial one, the rows still stream (an execute()
        # result's Arrow reader copies them all first: 42M readings, 3.1 GB streamed, 7.0 GB so)
        con.execute("SELECT 1").fetchall()
        reader = con.sql(sql, params=params or None).to_arrow_reader(ARROW_BATCH)
    parts = [batch.to_pandas(strings_to_categorical=True) for batch in reader]
    if not parts:
        parts = [reader.schema.empty_table().to_pandas(strings_to_categorical=True)]
    frame = parts[0] if len(parts) == 1 else _concat_categorical(parts)
    for col in frame.columns:
        if pd.api.types.is_datetime64_dtype(frame[col]) and frame[col].dtype != "datetime64[ns]":
            frame[col] = frame[col].astype("datetime64[ns]")
    return frame


def _concat_categorical(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Batches stacked, a categorical column's categories the union of the batches' (in the
    order they appear), so no column falls back to Python strings."""
    out = {}
    for col in parts[0].columns:
        if all(isinstance(p[col].dtype, pd.CategoricalDtype) for p in parts):
            cats = [p[col] for p in parts]
            known = [c.cat.categories.dtype for c in cats if len(c.cat.categories)]
            if known:  # a batch of only nulls has categories of another dtype (pandas 3): none of them
                cats = [c if len(c.cat.categories) else c.astype(pd.CategoricalDtype(pd.Index([], dtype=known[0])))
                        for c in cats]
            out[col] = union_categoricals(cats, ignore_order=True)
        else:
            out[col] = pd.concat([p[col] for p in parts], ignore_index=True)
    return pd.DataFrame(out, copy=False)


def table_counts(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Rows per base table (schema_version excluded)."""
    names = [
        r[0]
        for r in con.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_type = 'BASE TABLE' AND table_name <> 'schema_version' ORDER BY 1"
        ).fetchall()
    ]
    rows = [(n, con.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0]) for n in names]
    return pd.DataFrame(rows, columns=["table", "rows"])


SPANS = {"utilization": "ts", "device_telemetry": "ts", "failures": "ts", "spot_prices": "ts"}


def summary(con: duckdb.DuckDBPyConnection) -> dict:
    """Rows per table and the [first, last] timestamp of each time-stamped kind."""
    counts = table_counts(con)
    spans = {}
    for table, col in SPANS.items():
        lo, hi = con.execute(f'SELECT min("{col}"), max("{col}") FROM "{table}"').fetchone()
        spans[table] = (None if lo is None else str(lo), None if hi is None else str(hi))
    return {"rows": dict(zip(counts["table"], counts["rows"].astype(int))), "spans": spans}
