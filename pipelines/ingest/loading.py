"""Ingest one input file into the warehouse: read (adapter), validate (SQL), write (one
transaction). Valid rows are upserted by primary key; bad rows go to ``rejects`` with
their line, raw text and reason; a file already ingested (same sha256) is skipped."""
from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd

from pipelines.ingest import adapters, csv_lines, registry, validate
from pipelines.ingest.adapters import IngestFileError, RawInput
from pipelines.ingest.contract import KindSpec, spec_for
from pipelines.ingest.prometheus import DCGM_TELEMETRY, DCGM_UTIL
from pipelines.runtime.text import printable
from pipelines.store import warehouse

log = logging.getLogger(__name__)

DATA_SUFFIXES = (".csv", ".csv.gz", ".parquet", ".pq", ".json", ".json.gz")

# file stems by ingest kind, as a fleet folder or `headroom convert` names them (catalog
# first: planners read it)
KIND_FILES = {
    "catalog": ("catalog",),
    "utilization": ("utilization",),
    "telemetry": ("telemetry", "device_telemetry"),
    "failures": ("failures",),
    "spot-prices": ("spot_prices", "spot-prices"),
}


@dataclass(frozen=True)
class IngestResult:
    """What happened to one file."""

    path: str
    kind: str
    fmt: str
    batch_id: str
    sha256: str
    rows_read: int
    rows_loaded: int
    rows_rejected: int
    status: str  # loaded | skipped | rejected (strict mode: nothing written)
    sample_reasons: tuple[str, ...] = ()
    swallowed: tuple[tuple[int, int], ...] = ()  # (line, lines after it) of each unterminated quote
    reject_lines: int = 0  # lines in ``rejects``: one per line, fewer than rows where a line gave several


def counts_text(read: int, loaded: int, rejected: int, swallowed: tuple[tuple[int, int], ...] | list = (),
                reject_lines: int = 0) -> str:
    """``read N, loaded N, rejected N`` and, when rows repeat what was loaded already (in this
    file or before), how many; the lines in ``rejects`` where a line gave several rows (a GWA
    line: cpu and mem); and the lines an unterminated quote swallowed (they are no rows at
    all, so the counts alone would hide them)."""
    same = read - loaded - rejected
    on = f" row(s) on {reject_lines} line(s)" if reject_lines and reject_lines != rejected else ""
    extra = f", {same} row(s) repeating one already loaded (in this file or before)" if same > 0 else ""
    for line, lines in (s for s in swallowed if s[1]):
        extra += f"; 1 reject swallowed {lines} line(s) after an unterminated quote at line {line}"
    return f"read {read}, loaded {loaded}, rejected {rejected}{on}{extra}"


class StrictModeError(Exception):
    """``--strict`` and the file had bad rows: nothing of it was written."""

    def __init__(self, result: IngestResult) -> None:
        super().__init__(
            f"{result.path}: {result.rows_rejected} bad row(s) in strict mode, nothing written; "
            + "; ".join(result.sample_reasons[:3])
        )
        self.result = result


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _collect_rejects(con: duckdb.DuckDBPyConnection, raw: RawInput, spec: KindSpec) -> pd.DataFrame:
    """All rejects of the file, one row per line: (line, raw, reason)."""
    bad = con.execute(
        "SELECT _idx, _reason FROM _checked WHERE _reason IS NOT NULL ORDER BY _idx"
    ).fetchall()
    where = {}
    if bad and raw.locate is not None:
        where = raw.locate([int(i) for i, _ in bad])
    rows = [(line, text, reason) for line, text, reason in raw.structural]
    for idx, reason in bad:
        line, text = where.get(int(idx), (-(int(idx) + 1), None))
        rows.append((line, text, reason))
    frame = pd.DataFrame(rows, columns=["line", "raw", "reason"])
    if frame.empty:
        return frame
    # one input line can yield several rows (a GWA line has cpu and mem): one reject per line
    return (
        frame.groupby("line", sort=True)
        .agg(raw=("raw", "first"), reason=("reason", lambda r: " | ".join(dict.fromkeys(r))))
        .reset_index()
    )


def _stage(con: duckdb.DuckDBPyConnection, spec: KindSpec, raw: RawInput, path: Path) -> bool:
    """Type and check ``_raw`` into ``_checked`` and mark conflicting duplicate keys;
    return whether any key repeats among good rows."""
    con.execute("DROP TABLE IF EXISTS _checked")
    sql = validate.checked_sql(spec, "_raw", raw.typed, positions=not raw.lazy)
    try:
        con.execute(f"CREATE TEMP TABLE _checked AS {sql}")
    except duckdb.Error as exc:  # a lazy CSV is only really read here
        raise IngestFileError(path, f"unreadable: {str(exc).splitlines()[0]}") from exc
    repeated = con.execute(validate.has_repeated_keys_sql("_checked")).fetchone()[0]
    if repeated:
        key = ", ".join(f'"{c}"' for c in spec.key)
        con.execute(
            "UPDATE _checked SET _reason = 'same key (" + ", ".join(spec.key) + ") twice in this file "
            f"with different values' WHERE _reason IS NULL AND ({key}) IN ({validate.conflicting_keys_sql(spec, '_checked')})"
        )
    return repeated




def unchanged_files(con: duckdb.DuckDBPyConnection, inputs: list[dict]) -> dict[int, IngestResult]:
    """Of ``inputs`` (``{"kind", "path", "cluster"?, "pool"?}``), by position, those loaded
    already from the same path at the same size and modification time (with the same labels,
    where the format takes them): their "skipped" results, from one query, so that a drop
    folder's hourly ingest opens no task and reads no byte of a file it has loaded."""
    rows = []
    for i, item in enumerate(inputs):
        try:
            stat = Path(item["path"]).stat()
        except OSError:  # gone or unreadable: ingest_file says so
            continue
        labels = json.dumps({"cluster": item.get("cluster", "default"), "pool": item.get("pool", "default")},
                            sort_keys=True)
        # the path as ingest_file records it
        rows.append((i, spec_for(item["kind"]).kind, str(Path(item["path"])), stat.st_size, stat.st_mtime_ns, labels))
    if not rows:
        return {}
    # the files as query parameters, one list per column (no table registered on the connection)
    columns = ["i", "kind", "path", "file_size", "file_mtime_ns", "labels"]
    stats = ", ".join(f"unnest(?::{t}[]) AS {c}" for c, t in zip(columns, ("BIGINT", "VARCHAR", "VARCHAR", "BIGINT",
                                                                            "BIGINT", "VARCHAR")))
    found = con.execute(
        f"SELECT s.i, s.kind, s.path, b.source_format, b.batch_id, b.sha256, b.rows_read FROM (SELECT {stats}) s "
        "JOIN ingest_batches b USING (kind, path, file_size, file_mtime_ns) "
        "WHERE b.labels IS NULL OR b.labels = s.labels OR NOT list_contains(?, b.source_format) "
        "QUALIFY row_number() OVER (PARTITION BY s.i ORDER BY b.finished_at DESC) = 1",
        [[r[j] for r in rows] for j in range(len(columns))] + [list(registry.LABELLED)]).fetchall()
    return {int(i): IngestResult(path, kind, fmt, batch, sha, int(read), 0, 0, "skipped")
            for i, kind, path, fmt, batch, sha, read in found}


def ingest_file(
    con: duckdb.DuckDBPyConnection,
    path: str | Path,
    kind: str,
    fmt: str = "auto",
    *,
    strict: bool = False,
    cluster: str = "default",
    pool: str = "default",
    run_id: str | None = None,
) -> IngestResult:
    """Ingest one file in one transaction. Raises IngestFileError (unusable file, nothing
    written) or StrictModeError (bad rows under ``strict``, nothing written). ``run_id`` names
    the ingest (a command or flow run) the batch comes in with."""
    path = Path(path)
    spec = spec_for(kind)
    if not path.is_file():
        raise IngestFileError(path, "no such file")
    if not adapters.readable(path):
        raise IngestFileError(path, adapters.UNREADABLE, code=1)
    # a file is known by its bytes; one at the same path, of the same size and modification
    # time as one loaded is that one, and is not read again (a drop folder's hourly ingest
    # hashed every file it ever held: 39 ms each, a minute an hour after a year)
    known = unchanged_files(con, [{"kind": kind, "path": path, "cluster": cluster, "pool": pool}])
    if known:
        return known[0]
    stat = path.stat()
    sha = file_sha256(path)
    batch_id = f"{spec.kind}-{sha[:16]}"
    prior = con.execute(
        "SELECT batch_id, rows_read, rows_loaded, rows_rejected, source_format, labels, path FROM ingest_batches "
        "WHERE sha256 = ? AND kind = ?", [sha, spec.kind]).fetchone()
    if prior is not None and prior[6] == str(path):
        # the bytes of a batch seen again at its path (touched, or loaded before migration 080
        # kept sizes and times): its size and time now, so the next run need not read them
        con.execute("UPDATE ingest_batches SET file_size = ?, file_mtime_ns = ? WHERE batch_id = ?",
                    [stat.st_size, stat.st_mtime_ns, batch_id])
    labels = json.dumps({"cluster": cluster, "pool": pool}, sort_keys=True)
    if prior:
        if prior[4] in registry.LABELLED and prior[5] is not None and prior[5] != labels:
            was = json.loads(prior[5])
            log.warning("%s was already ingested with --cluster %s --pool %s; it is skipped and its rows keep "
                        "those (this run's --cluster %s --pool %s are not applied)",
                        path, was["cluster"], was["pool"], cluster, pool)
        return IngestResult(str(path), spec.kind, prior[4], prior[0], sha, prior[1], 0, 0, "skipped")
    started = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    raw = registry.read_input(con, path, spec, fmt, cluster, pool)
    try:
        repeated = _stage(con, spec, raw, path)
    except IngestFileError as exc:  # a lazy CSV is only really read here
        if not (raw.lazy and adapters.dialect_error(exc.__cause__)):
            raise
        raw = adapters.read_csv_python(con, path, spec)
        repeated = _stage(con, spec, raw, path)
    if raw.lazy:
        # the one-pass read found the file clean, or we read it again to place the rejects
        structural = adapters.csv_structural(con, spec, raw)
        dirty = con.execute("SELECT count(*) FROM _checked WHERE _reason IS NOT NULL").fetchone()[0]
        if structural is None or dirty:
            raw = adapters.read_csv(con, path, spec, fast_timestamps=None if structural is not None else False)
            repeated = _stage(con, spec, raw, path)
        else:
            n = con.execute("SELECT count(*) FROM _checked").fetchone()[0]
            raw = dataclasses.replace(raw, rows_read=n + len(structural), structural=structural)
    rejects = _collect_rejects(con, raw, spec)
    n_bad_rows = con.execute("SELECT count(*) FROM _checked WHERE _reason IS NOT NULL").fetchone()[0]
    cols = ", ".join(f'"{c}"' for c in spec.columns)
    good = f"SELECT DISTINCT {cols} FROM _checked WHERE _reason IS NULL" if repeated else f"SELECT {cols} FROM _checked WHERE _reason IS NULL"
    n_good = con.execute(f"SELECT count(*) FROM ({good})").fetchone()[0]
    rows_rejected = n_bad_rows + len(raw.structural)
    # shown on a terminal: a rejected name's escape codes or newlines are not sent to it
    reasons = tuple(f"line {r.line}: {printable(r.reason)}" for r in rejects.head(5).itertuples())
    swallowed = () if rejects.empty else tuple(s for r in rejects["reason"] if (s := csv_lines.swallowed_by(r)))
    result = IngestResult(str(path), spec.kind, raw.fmt, batch_id, sha, raw.rows_read, n_good, rows_rejected,
                          "loaded", reasons, swallowed, len(rejects))
    if strict and rows_rejected:
        _drop_staging(con)
        raise StrictModeError(IngestResult(**{**result.__dict__, "rows_loaded": 0, "status": "rejected"}))
    with warehouse.transaction(con):
        _write_rows(con, spec, good, path)
        _write_rejects(con, batch_id, path, rejects)
        con.execute(
            "INSERT INTO ingest_batches (batch_id, kind, source_format, path, sha256, rows_read, rows_loaded, "
            "rows_rejected, status, started_at, finished_at, labels, file_size, file_mtime_ns, run_id) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'loaded', ?, now()::TIMESTAMP, ?, ?, ?, ?)",
            [batch_id, spec.kind, raw.fmt, str(path), sha, raw.rows_read, n_good, rows_rejected, started,
             labels if raw.fmt in registry.LABELLED else None, stat.st_size, stat.st_mtime_ns, run_id],
        )
    _drop_staging(con)
    log.info("ingested %s: read %d loaded %d rejected %d", path, raw.rows_read, n_good, rows_rejected)
    return result


LABEL_COLUMNS = ("cluster", "pool")  # where a row belongs, not part of its key


def _write_rows(con: duckdb.DuckDBPyConnection, spec: KindSpec, good: str, path: Path) -> None:
    """Upsert by the natural key. The big fact tables carry no ART index (it made bulk
    loads 5x slower), so the key is kept here: delete the rows the file replaces, then insert.
    Rows that replace ones filed under another cluster or pool are counted in a warning: the
    key has no cluster, so node ids that repeat across clusters overwrite each other."""
    cols = ", ".join(f'"{c}"' for c in spec.columns)
    if warehouse.has_primary_key(con, spec.table):
        con.execute(f"INSERT OR REPLACE INTO {spec.table} ({cols}) {good}")
        return
    if con.execute(f"SELECT EXISTS (SELECT 1 FROM {spec.table})").fetchone()[0]:
        con.execute(f"CREATE OR REPLACE TEMP TABLE _good AS {good}")
        on = " AND ".join(f't."{c}" = g."{c}"' for c in spec.key)
        labels = [c for c in LABEL_COLUMNS if c in spec.columns and c not in spec.key]
        if labels:
            moved = con.execute(
                f"SELECT count(*), any_value(t.node_id), any_value(concat_ws('/', {', '.join('t.' + c for c in labels)})), "
                f"any_value(concat_ws('/', {', '.join('g.' + c for c in labels)})) FROM {spec.table} t JOIN _good g "
                f"ON {on} WHERE " + " OR ".join(f"t.{c} IS DISTINCT FROM g.{c}" for c in labels)
            ).fetchone()
            if moved[0]:
                log.warning("%s: %d row(s) replace readings of the same node, resource and time filed under another "
                            "%s (node %s: %s -> %s); node ids are the key, so ones that repeat across clusters "
                            "overwrite each other: make them unique (e.g. prefix the cluster)", path, moved[0],
                            "/".join(labels), moved[1], moved[2], moved[3])
        con.execute(f"DELETE FROM {spec.table} t USING _good g WHERE {on}")
        good = f"SELECT {cols} FROM _good"
    con.execute(f"INSERT INTO {spec.table} ({cols}) {good}")


def _write_rejects(con: duckdb.DuckDBPyConnection, batch_id: str, path: Path, rejects: pd.DataFrame) -> None:
    if rejects.empty:
        return
    frame = rejects.assign(batch_id=batch_id, path=str(path))
    warehouse.upsert(con, "rejects", frame)


def _drop_staging(con: duckdb.DuckDBPyConnection) -> None:
    adapters.drop_raw(con)
    con.execute("DROP TABLE IF EXISTS _checked; DROP TABLE IF EXISTS _want; DROP TABLE IF EXISTS _good")


def kind_named(name: str) -> str | None:
    """The kind a file name is for: a stem of ``KIND_FILES`` alone or followed by ``-``,
    ``_`` or ``.`` and more (``utilization-2026-02-01.csv``), with a data suffix; else None."""
    low = name.lower()
    if not low.endswith(DATA_SUFFIXES):
        return None
    # the longest stem first, so device_telemetry is not read as something else
    for kind, stem in sorted(((k, st) for k, stems in KIND_FILES.items() for st in stems),
                             key=lambda ks: -len(ks[1])):
        if low.startswith(stem) and (len(low) == len(stem) or low[len(stem)] in "-_."):
            return kind
    return None


GENERATED_EXTRAS = ("bursts.csv", "manifest.json")  # what `generate` writes beside the kinds: not data


def expand_paths(patterns: list[str], kind: str | None = None) -> list[Path]:
    """Files, globs or folders (folders: the data files inside, recursively, sorted). With
    ``kind``, each folder that holds files named for that kind contributes just those (the
    output of ``headroom generate`` or ``convert`` holds other kinds and other files beside
    them); otherwise its files named for another kind are left out (logged)."""
    import glob

    out: list[Path] = []
    for pat in patterns:
        p = Path(pat)
        if p.is_dir():
            found = sorted(q for q in p.rglob("*") if q.is_file() and q.name.lower().endswith(DATA_SUFFIXES))
            by_folder: dict[Path, list[Path]] = {}
            for q in found:
                by_folder.setdefault(q.parent, []).append(q)
            for folder, here in sorted(by_folder.items()):  # the rule holds per folder
                named = [q for q in here if kind is not None and kind_named(q.name) == kind]
                take = named or [q for q in here if kind is None or kind_named(q.name) is None]
                if kind is not None and len(take) < len(here):
                    log.info("%s: %s not read as %s", folder, ", ".join(q.name for q in here if q not in take), kind)
                    unnamed = [q.name for q in here if q not in take and kind_named(q.name) is None
                               and q.name not in GENERATED_EXTRAS]
                    if unnamed:  # data that may well be of this kind, left out only by the naming rule
                        log.warning("%s: %s not read: the folder has files named for %s, so only those are "
                                    "(name the others %s-<anything> too, or pass them as files)", folder,
                                    ", ".join(unnamed), kind, kind.replace("-", "_"))
                out.extend(take)
        elif any(ch in pat for ch in "*?["):
            matched = sorted(Path(m) for m in glob.glob(pat, recursive=True) if Path(m).is_file())
            if not matched:  # the others may match: say which pattern found nothing (a typo?)
                log.warning("%s matches no file", pat)
            out.extend(matched)
        else:
            out.append(p)
    return out


def inputs_in(folder: Path, warn: bool = True) -> list[dict]:
    """The ingest inputs of a fleet folder, catalog first, then by name: its files named for a
    kind (``<kind>.csv``, ``<kind>-<anything>.csv.gz``, ``.parquet`` or ``.json``), and the
    raw exports ``ingest`` recognises by content anywhere under it (:func:`raw_input`): a
    GWA-T-12 folder, AWS spot-price JSON, Prometheus JSON. Other data files (``DATA_SUFFIXES``)
    are named in a warning (``warn``); the rest (notes, READMEs) are left alone."""
    order = list(KIND_FILES)
    found, unknown, unread, dangling = [], [], [], []
    for p in sorted(q for q in folder.rglob("*") if q.name.lower().endswith(DATA_SUFFIXES)
                    and (q.is_file() or q.is_symlink() and not q.exists())):
        kind = kind_named(p.name) if p.parent == folder else None
        if not p.exists():  # a link to nothing
            dangling.append(p)
        elif kind is not None:  # one this user may not read is tried, and its ingest says so
            found.append({"kind": kind, "path": str(p)})
        elif not adapters.readable(p):
            unread.append(p)
        elif (raw := raw_input(p, folder)) is not None:
            found.append(raw)
        elif p.name not in GENERATED_EXTRAS:
            unknown.append(p)
    for files, why in ((unknown, "neither named for a kind nor a recognised export"),
                       (unread, "unreadable to this user (permission denied)"), (dangling, "link to nothing")):
        if files and warn:
            log.warning("%s: %d file(s) %s, not read: %s", folder, len(files), why,
                        ", ".join(str(q.relative_to(folder)) for q in files[:5]))
    return sorted(found, key=lambda f: (order.index(f["kind"]), f["path"]))


def raw_input(path: Path, root: Path) -> dict | None:
    """The ingest input of a raw export recognised by its content, else None: GWA-T-12 per-VM
    files are utilization (cluster: the folder given, pool: the file's own folder), AWS
    ``describe-spot-price-history`` JSON spot prices, Prometheus ``query_range`` JSON telemetry
    when it holds a DCGM telemetry metric, else utilization (cluster and pool: the folder
    given, and the file's stem)."""
    try:
        fmt = registry.detect_format(path)
    except IngestFileError:
        return None
    if fmt == "gwa-t12":
        return {"kind": "utilization", "path": str(path), "format": fmt, "cluster": root.name,
                "pool": path.parent.name}
    if fmt == "aws-json":
        return {"kind": "spot-prices", "path": str(path), "format": fmt}
    if fmt == "prometheus-json":
        head = adapters.head(path, 65536)
        telemetry = any(f'"{m}"' in head for m in DCGM_TELEMETRY if m != DCGM_UTIL)
        stem = path.name.split(".")[0]
        return {"kind": "telemetry" if telemetry else "utilization", "path": str(path), "format": fmt,
                "cluster": root.name, "pool": stem}
    return None
