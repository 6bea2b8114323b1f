"""One test per fault of the environment or of an input: each shows the one-line message,
the exit code (2: bad input, 1: the environment) and that nothing partial was written
(docs/errors.md lists them)."""
from __future__ import annotations

import errno
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from pipelines import cli
from pipelines.ingest import adapters
from pipelines.ingest import loading as ingest
from pipelines.store import warehouse

ROOT = Path(__file__).resolve().parents[2]

HEADER = "ts,cluster,pool,node_id,resource,used,capacity\n"


def row(hour: int, node: str = "n1") -> str:
    return f"2026-01-01T{hour:02d}:00:00,c,p,{node},gpu,1,8\n"


def fingerprint(db: Path) -> dict:
    """What the warehouse holds: its bytes, and (read-only) its rows per table."""
    files = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(db.parent.glob(db.name + "*"))
             if p.is_file() and p.stat().st_size}
    return {"files": files}


def made_warehouse(tmp_path: Path) -> Path:
    """A warehouse file with one ingested file in it."""
    db = tmp_path / "wh.duckdb"
    first = tmp_path / "first.csv"
    first.write_text(HEADER + row(0) + row(1))
    assert cli.main(["ingest", "--kind", "utilization", "--db", str(db), str(first)]) == 0
    return db


def one_line(text: str) -> str:
    """The one line of a message (no traceback, nothing else)."""
    lines = [x for x in text.splitlines() if x.strip()]
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


def counts(db: Path) -> dict[str, int]:
    with warehouse.open_warehouse(db, read_only=True) as con:
        return dict(con.execute("SELECT 'utilization', count(*) FROM utilization UNION ALL "
                                "SELECT 'rejects', count(*) FROM rejects").fetchall())


# --- inputs: CSV fields of any size, overlong lines, unterminated quotes; deep JSON ---------

def test_a_csv_field_of_any_size_loads(tmp_path, capsys):
    """Python's csv module refuses a field over 128 KiB; the readers lift it (a reject kept whole)."""
    db = made_warehouse(tmp_path)
    capsys.readouterr()
    big = tmp_path / "big.csv"
    big.write_text(HEADER + row(2) + row(3, "n" * 300_000) + row(4))
    assert cli.main(["ingest", "--kind", "utilization", "--db", str(db), str(big)]) == 0
    assert "read 3, loaded 2, rejected 1" in capsys.readouterr().out and counts(db) == {"utilization": 4, "rejects": 1}
    with warehouse.open_warehouse(db, read_only=True) as con:
        got = con.execute("SELECT line, length(raw), reason FROM rejects").fetchall()
    assert got == [(3, len(row(3, "n" * 300_000)) - 1, "node_id: longer than 256 characters")]


@pytest.mark.parametrize("mixed", [False, True], ids=["duckdb-reader", "python-reader"])
def test_a_line_over_2_mb_is_a_reject_and_the_others_load(tmp_path, capsys, mixed):
    """DuckDB's reader and the lenient Python one (mixed line endings) alike."""
    db = made_warehouse(tmp_path)
    capsys.readouterr()
    big = tmp_path / "big.csv"
    end = "\r\n" if mixed else "\n"
    big.write_bytes((HEADER.replace("\n", end) + row(2) + row(3, "x" * 3_000_000) + row(4)).encode())
    assert cli.main(["ingest", "--kind", "utilization", "--db", str(db), str(big)]) == 0
    out = capsys.readouterr().out
    assert "read 3, loaded 2, rejected 1" in out
    assert "line 3: line too long: 3000" in out and "over the 2000000 a line may hold" in out
    assert counts(db) == {"utilization": 4, "rejects": 1}
    with warehouse.open_warehouse(db, read_only=True) as con:
        assert con.execute("SELECT line, length(raw) FROM rejects").fetchone() == (3, adapters.PREVIEW)


@pytest.mark.parametrize("mixed", [False, True], ids=["duckdb-reader", "python-reader"])
def test_an_unterminated_quote_names_its_line_and_the_lines_it_swallowed(tmp_path, capsys, mixed):
    db = made_warehouse(tmp_path)
    capsys.readouterr()
    lines = [row(h) for h in range(2, 20)]
    lines[5] = '2026-01-01T07:00:00,c,p,"n1,gpu,1,8\n'  # line 7 of the file: its quote never closes
    f = tmp_path / "quote.csv"
    f.write_bytes((HEADER.replace("\n", "\r\n" if mixed else "\n") + "".join(lines)).encode())
    assert cli.main(["ingest", "--kind", "utilization", "--db", str(db), str(f)]) == 0  # as any file with rejects
    out = capsys.readouterr().out
    assert "read 6, loaded 5, rejected 1; 1 reject swallowed 12 line(s) after an unterminated quote at line 7" in out
    assert "line 7: unterminated quote: the quoted value opened on line 7 never closes, so the 12 line(s)" in out
    assert counts(db) == {"utilization": 7, "rejects": 1}  # 2 before, the 5 lines before the quote


@pytest.mark.parametrize("fmt, kind, doc", [
    ("aws", "spot-prices", '{{"SpotPriceHistory": {}}}'),
    ("prom", "utilization", '{{"status": "success", "data": {{"resultType": "matrix", "result": {}}}}}'),
])
def test_json_nested_100000_deep_is_one_line_exit_2_nothing_written(tmp_path, capsys, fmt, kind, doc):
    db = made_warehouse(tmp_path)
    before = fingerprint(db)
    capsys.readouterr()
    deep = tmp_path / f"{fmt}.json"
    deep.write_text(doc.format("[" * 100_000 + "]" * 100_000))
    assert cli.main(["ingest", "--kind", kind, "--db", str(db), str(deep)]) == 2
    captured = capsys.readouterr()
    line = one_line(captured.out + captured.err)
    assert line == f"error: {deep}: {adapters.NESTED_TOO_DEEP}"
    assert fingerprint(db) == before


def test_a_plan_config_nested_too_deep_is_one_line(tmp_path, capsys):
    db = made_warehouse(tmp_path)
    before = fingerprint(db)
    capsys.readouterr()
    conf = tmp_path / "plan.toml"
    conf.write_text("a = " + "[" * 100_000 + "]" * 100_000)
    assert cli.main(["plan", "--db", str(db), "--config", str(conf)]) == 2
    line = one_line(capsys.readouterr().err)
    assert line == f"headroom plan: error: {conf}: not a plan config (values nested too deep to read)"
    assert fingerprint(db) == before


@pytest.mark.parametrize("general", [False, True], ids=["reader-fast-path", "general-parser"])
def test_dst_ambiguous_and_nonexistent_local_times_follow_the_standard_offset_rule(tmp_path, capsys, general):
    """docs/input-contract.md: ambiguous and nonexistent local times are read at the zone's
    standard offset; a summer abbreviation is a reject. An epoch row sends the file to the
    general timestamp parser, which must agree with the reader's fast path."""
    db = made_warehouse(tmp_path)
    capsys.readouterr()
    text = (HEADER + "2026-11-01 01:30:00 America/New_York,c,p,ny-repeated,gpu,1,8\n"
            "2026-03-08 02:30:00 America/New_York,c,p,ny-skipped,gpu,1,8\n"
            "2026-10-25 02:30:00 Europe/Berlin,c,p,berlin-repeated,gpu,1,8\n"
            "2026-03-29 02:30:00 CET,c,p,cet-skipped,gpu,1,8\n"
            "2026-04-05 02:30:00 Australia/Sydney,c,p,sydney-repeated,gpu,1,8\n"
            "2026-11-01 01:30:00 EDT,c,p,edt,gpu,1,8\n")
    if general:
        text += "1767620000,c,p,epoch,gpu,1,8\n"
    f = tmp_path / "dst.csv"
    f.write_text(text)
    assert cli.main(["ingest", "--kind", "utilization", "--db", str(db), str(f)]) == 0
    assert "line 7: ts: unparseable timestamp '2026-11-01 01:30:00 EDT'" in capsys.readouterr().out
    with warehouse.open_warehouse(db, read_only=True) as con:
        got = dict(con.execute("SELECT node_id, strftime(ts, '%Y-%m-%d %H:%M') FROM utilization").fetchall())
    assert {k: v for k, v in got.items() if k not in ("n1", "epoch")} == {
        "ny-repeated": "2026-11-01 06:30",      # EST (-5), the second 01:30
        "ny-skipped": "2026-03-08 07:30",       # EST (-5): 03:30 EDT
        "berlin-repeated": "2026-10-25 01:30",  # CET (+1), the second 02:30
        "cet-skipped": "2026-03-29 01:30",      # CET (+1): 03:30 CEST
        "sydney-repeated": "2026-04-04 16:30",  # AEST (+10), the second 02:30
    }


# --- the warehouse file: corrupt, foreign, empty -------------------------------------------

def test_garbage_bytes_are_no_warehouse_exit_2_untouched(tmp_path, capsys):
    db = tmp_path / "wh.duckdb"
    db.write_bytes(os.urandom(5000))
    before = fingerprint(db)
    for argv in (["status"], ["ingest", "--kind", "utilization", str(write_csv(tmp_path))]):
        assert cli.main([argv[0], "--db", str(db), *argv[1:]]) == 2
        line = one_line(capsys.readouterr().err)
        assert line.startswith(f"headroom {argv[0]}: error: {db} is not a DuckDB warehouse file (it starts")
    assert fingerprint(db) == before


@pytest.mark.parametrize("damage", ["truncated", "checksum"])
def test_a_corrupt_warehouse_is_one_line_exit_2_untouched(tmp_path, capsys, damage):
    """A DuckDB file cut short, or with blocks overwritten: refused at open, or where a query
    first meets the bad block; never written to."""
    db = made_warehouse(tmp_path)
    data = bytearray(db.read_bytes())
    if damage == "truncated":
        data = data[:len(data) // 5]
    else:
        for i in range(len(data) // 5, len(data) * 2 // 5):
            data[i] = (i * 7) % 256
    db.write_bytes(bytes(data))
    before = fingerprint(db)
    for argv in (["status"], ["ingest", "--kind", "utilization", str(write_csv(tmp_path))]):
        assert cli.main([argv[0], "--db", str(db), *argv[1:]]) == 2
        line = one_line(capsys.readouterr().err)
        assert line.startswith(f"headroom {argv[0]}: error: warehouse {db}: not a readable DuckDB file, it is "
                               "corrupt or truncated (")
        assert line.endswith("nothing was written: restore it from a backup, or give --db a new file and "
                             "ingest the inputs again")
    assert fingerprint(db) == before


def test_a_log_left_by_a_crash_beside_a_restored_warehouse_is_one_line(tmp_path, capsys):
    """A run killed mid-write leaves its .wal; the warehouse restored from a backup beside it
    made every command a traceback ("Failure while replaying WAL file")."""
    db = made_warehouse(tmp_path)
    backup = tmp_path / "backup.duckdb"
    shutil.copy(db, backup)
    code = (f"import duckdb, os, signal\nc = duckdb.connect({str(db)!r})\n"
            "c.execute('CREATE TABLE a AS SELECT 1 AS i'); c.execute('CHECKPOINT')\n"
            "c.execute('CREATE TABLE b AS SELECT 1 AS i')\nos.kill(os.getpid(), signal.SIGKILL)\n")
    subprocess.run([sys.executable, "-c", code], check=False)
    assert Path(f"{db}.wal").exists()
    shutil.copy(backup, db)
    for argv in (["status"], ["ingest", "--kind", "utilization", str(write_csv(tmp_path))]):
        assert cli.main([argv[0], "--db", str(db), *argv[1:]]) == 2
        line = one_line(capsys.readouterr().err)
        assert f"its write-ahead log {db}.wal belongs to another copy of the file" in line
        assert line.endswith(f"move {db}.wal aside (the log of the crashed run's unfinished writes) and run the "
                             "command again")


def test_a_foreign_duckdb_database_is_refused_and_never_migrated_into(tmp_path, capsys, monkeypatch):
    db = tmp_path / "theirs.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE customers (id INTEGER, name VARCHAR); INSERT INTO customers VALUES (1, 'a')")
    before = fingerprint(db)
    without_prefect(monkeypatch)
    argvs = (["status"], ["ingest", "--kind", "utilization", str(write_csv(tmp_path))],
             ["report", "--out", str(tmp_path / "r")])
    for argv in argvs:
        assert cli.main([argv[0], "--db", str(db), *argv[1:]]) == 2
        line = one_line(capsys.readouterr().err)
        assert line == (f"headroom {argv[0]}: error: {db}: a DuckDB database of something else (tables "
                        "customers), not a headroom warehouse; nothing was written to it: give --db (or "
                        "HEADROOM_DB) a new file or a headroom warehouse")
    assert fingerprint(db) == before
    with duckdb.connect(str(db), read_only=True) as con:
        assert [r[0] for r in con.execute("SHOW TABLES").fetchall()] == ["customers"]
    assert not (tmp_path / "r").exists()


def test_an_empty_duckdb_file_is_read_without_writing_and_made_a_warehouse_by_a_writer(tmp_path, capsys):
    db = tmp_path / "new.duckdb"
    duckdb.connect(str(db)).close()
    before = fingerprint(db)
    assert cli.main(["status", "--db", str(db)]) == 0
    assert "utilization  empty" in capsys.readouterr().out
    assert fingerprint(db) == before
    assert cli.main(["ingest", "--kind", "utilization", "--db", str(db), str(write_csv(tmp_path))]) == 0
    assert counts(db) == {"utilization": 1, "rejects": 0}


def test_reading_commands_never_open_the_warehouse_for_writing(tmp_path, capsys, monkeypatch):
    db = made_warehouse(tmp_path)
    opened = []
    real = duckdb.connect

    def spy(target, *args, read_only=False, **kwargs):
        opened.append((str(target), read_only))
        return real(target, *args, read_only=read_only, **kwargs)

    monkeypatch.setattr(warehouse.duckdb, "connect", spy)
    assert cli.main(["status", "--db", str(db)]) in (0, 1)  # 1: stale data, as status says
    assert opened and all(ro for path, ro in opened if path == str(db)), opened


# --- the environment: full disk, read-only file system, no permission ---------------------

def write_csv(tmp_path: Path, name: str = "more.csv", rows: int = 1) -> Path:
    f = tmp_path / name
    f.write_text(HEADER + "".join(row(h % 24, f"m{h}") for h in range(10, 10 + rows)))
    return f


def duckdb_fault(target: str, text: str) -> duckdb.IOException:
    """What DuckDB raises when the file system refuses a write (its words, its type)."""
    return duckdb.IOException(f'IO Error: Could not write file "{target}": {text}')


def test_disk_full_at_the_warehouse_commit_is_one_line_exit_1_rolled_back(tmp_path, capsys, monkeypatch):
    """The write point of every ingest: the rows, then its rejects, in one transaction."""
    db = made_warehouse(tmp_path)
    before = counts(db)
    capsys.readouterr()

    def full(con, batch_id, path, rejects):
        raise duckdb_fault(f"{db}.wal", "No space left on device")

    monkeypatch.setattr(ingest, "_write_rejects", full)
    assert cli.main(["ingest", "--kind", "utilization", "--db", str(db), str(write_csv(tmp_path))]) == 1
    line = one_line(capsys.readouterr().err)
    assert line == (f"headroom ingest: error: warehouse {db}: disk full at {db}.wal (No space left on device); "
                    "nothing of this step was written: free space on its file system, or move it (--db, "
                    "HEADROOM_DB) to one with room, and run again")
    assert counts(db) == before


@pytest.mark.parametrize("text, what", [("Read-only file system", "read-only file system"),
                                        ("Permission denied", "permission denied")])
def test_a_warehouse_that_cannot_be_opened_for_writing_is_one_line_exit_1(tmp_path, capsys, monkeypatch, text,
                                                                          what):
    """DuckDB refuses to open the file read-write (a read-only mount, a file of another user):
    writers stop with one line; readers still read it."""
    db = made_warehouse(tmp_path)
    before = fingerprint(db)
    capsys.readouterr()
    real = duckdb.connect

    def refuse(target, *args, read_only=False, **kwargs):
        if str(target) == str(db) and not read_only:
            raise duckdb.IOException(f'IO Error: Cannot open file "{target}": {text}')
        return real(target, *args, read_only=read_only, **kwargs)

    monkeypatch.setattr(warehouse.duckdb, "connect", refuse)
    assert cli.main(["ingest", "--kind", "utilization", "--db", str(db), str(write_csv(tmp_path))]) == 1
    line = one_line(capsys.readouterr().err)
    assert line.startswith(f"headroom ingest: error: warehouse {db}: {what}; nothing of this step was written: ")
    assert cli.main(["status", "--db", str(db)]) in (0, 1)
    assert "utilization           2 rows" in capsys.readouterr().out
    assert fingerprint(db) == before


def test_disk_full_writing_the_report_is_one_line_exit_1_old_report_kept(tmp_path, capsys, monkeypatch):
    db = made_warehouse(tmp_path)
    out = tmp_path / "reports"
    without_prefect(monkeypatch)
    assert cli.main(["report", "--db", str(db), "--out", str(out)]) == 0
    old = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", full)
    monkeypatch.setattr(Path, "write_text", full)
    assert cli.main(["report", "--db", str(db), "--out", str(out)]) == 1
    line = one_line(capsys.readouterr().err)
    assert line.startswith(f"headroom report: error: {out}/")
    assert line.endswith(": disk full (No space left on device); nothing was written (what was there is "
                         "unchanged): free space on its file system, or write it elsewhere, and run again")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == old


def test_disk_full_writing_a_new_report_folder_leaves_no_folder(tmp_path, capsys, monkeypatch):
    db = made_warehouse(tmp_path)
    without_prefect(monkeypatch)
    capsys.readouterr()

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    assert cli.main(["report", "--db", str(db), "--out", str(tmp_path / "new" / "reports")]) == 1
    assert "disk full" in one_line(capsys.readouterr().err)
    assert not (tmp_path / "new").exists()


def without_prefect(monkeypatch) -> None:
    """``headroom report`` with the report flow's tasks called in-process: the same reads,
    page and writes, without starting Prefect's API (seconds this file has not got)."""
    from pipelines.flows import report as flow

    def run(db_path: str, out_dir: str) -> dict:
        data = flow.load_task.fn(db_path, 5.0)
        page = flow.render_task.fn(data)
        return {**flow.write_task.fn(out_dir, page, data), "sections": {}}

    monkeypatch.setattr(flow, "report_flow", run)


# --- real faults: a tiny tmpfs, a read-only remount, no DAC override (skipped where denied)

@functools.cache
def _namespaces() -> bool:
    """Whether this process may mount a tmpfs in a private mount namespace (root in a container, say)."""
    if not shutil.which("unshare") or sys.platform != "linux":
        return False
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt && umount /mnt"],
                           capture_output=True, timeout=20)
    return probe.returncode == 0


def headroom_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEADROOM_")}
    home = tmp_path / "prefect-home"
    home.mkdir(exist_ok=True)
    env.update(PYTHONPATH=str(ROOT), PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false")
    return env


def in_namespace(tmp_path: Path, script: str) -> subprocess.CompletedProcess:
    """``script`` (sh) in a private mount namespace, ``$M`` a 4 MiB tmpfs, ``$HR`` headroom."""
    if not _namespaces():
        pytest.skip("cannot mount a tmpfs here (unshare -m denied)")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    head = f"set -u; M={mnt}; HR='{sys.executable} -m pipelines.cli'; mount -t tmpfs -o size=4m tmpfs $M\n"
    return subprocess.run(["unshare", "-m", "sh", "-c", head + textwrap.dedent(script)], capture_output=True,
                          text=True, env=headroom_env(tmp_path), cwd=tmp_path, timeout=120)


def test_real_disk_full_at_the_warehouse_and_an_export(tmp_path, capsys):
    db = made_warehouse(tmp_path)
    before, rows_before = fingerprint(db), counts(db)
    nab = tmp_path / "nab.csv"
    nab.write_text("timestamp,value\n2026-01-01 00:00:00,12.5\n2026-01-01 00:05:00,13\n")
    r = in_namespace(tmp_path, f"""
        cp {db} $M/wh.duckdb
        dd if=/dev/zero of=$M/fill bs=64k 2>/dev/null
        $HR ingest --kind utilization --db $M/wh.duckdb {write_csv(tmp_path, rows=500)} 2>ingest.err; echo $? >ingest.rc
        $HR convert --from nab --out $M/conv {nab} 2>convert.err; echo $? >convert.rc
        rm $M/fill; mkdir after; cp -a $M/. after/
    """)
    assert r.returncode == 0, r.stderr
    mnt = tmp_path / "mnt"
    line = one_line((tmp_path / "ingest.err").read_text())
    assert (tmp_path / "ingest.rc").read_text().strip() == "1"
    assert line.startswith(f"headroom ingest: error: warehouse {mnt}/wh.duckdb: disk full")
    assert "(No space left on device); nothing of this step was written: free space" in line
    after = tmp_path / "after" / "wh.duckdb"
    assert fingerprint(after)["files"] == {"wh.duckdb": before["files"]["wh.duckdb"]}  # a WAL left is empty
    assert counts(after) == rows_before
    line = one_line((tmp_path / "convert.err").read_text())
    assert (tmp_path / "convert.rc").read_text().strip() == "1"
    assert line == (f"headroom convert: error: {mnt}/conv/utilization.csv: disk full (No space left on device); "
                    "nothing was written (what was there is unchanged): free space on its file system, or write "
                    "it elsewhere, and run again")
    assert sorted(p.name for p in (tmp_path / "after").iterdir()) in (["wh.duckdb"], ["wh.duckdb", "wh.duckdb.wal"])


def test_real_read_only_file_system_writers_stop_readers_read(tmp_path):
    db = made_warehouse(tmp_path)
    before = fingerprint(db)
    r = in_namespace(tmp_path, f"""
        cp {db} $M/wh.duckdb
        mount -o remount,ro $M
        $HR ingest --kind utilization --db $M/wh.duckdb {write_csv(tmp_path)} 2>ingest.err; echo $? >ingest.rc
        $HR status --db $M/wh.duckdb >status.out 2>status.err; echo $? >status.rc
        $HR plan replay --utilization {write_csv(tmp_path)} --out $M/table.csv 2>replay.err; echo $? >replay.rc
        mkdir after; cp -a $M/. after/
    """)
    assert r.returncode == 0, r.stderr
    mnt = tmp_path / "mnt"
    assert (tmp_path / "ingest.rc").read_text().strip() == "1"
    assert one_line((tmp_path / "ingest.err").read_text()) == (
        f"headroom ingest: error: warehouse {mnt}/wh.duckdb: read-only file system; nothing of this step was "
        "written: remount the file system read-write or copy the warehouse to a writable place (--db, "
        "HEADROOM_DB); status and report read it where it is")
    assert (tmp_path / "status.rc").read_text().strip() in ("0", "1"), (tmp_path / "status.err").read_text()
    assert "utilization           2 rows" in (tmp_path / "status.out").read_text()
    assert (tmp_path / "replay.rc").read_text().strip() == "1"
    assert one_line((tmp_path / "replay.err").read_text()) == (
        f"headroom plan replay: error: {mnt}/table.csv: read-only file system; nothing was written (what was there is "
        "unchanged): remount the file system read-write, or write elsewhere")
    assert fingerprint(tmp_path / "after" / "wh.duckdb")["files"] == {"wh.duckdb": before["files"]["wh.duckdb"]}


def test_real_permission_denied_writers_stop_readers_read(tmp_path):
    """The warehouse and its folder read-only to this user: as root, with the capabilities
    that override file modes dropped (setpriv); as anyone else, the modes alone."""
    db = made_warehouse(tmp_path)
    before = fingerprint(db)
    folder = db.parent / "locked"
    folder.mkdir()
    locked = folder / "wh.duckdb"
    shutil.copy(db, locked)
    locked.chmod(0o444)
    folder.chmod(0o555)
    prefix = []
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("root, and no setpriv to drop CAP_DAC_OVERRIDE")
        prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner"]
    hr = [*prefix, sys.executable, "-m", "pipelines.cli"]
    try:
        w = subprocess.run([*hr, "ingest", "--kind", "utilization", "--db", str(locked), str(write_csv(tmp_path))],
                           capture_output=True, text=True, env=headroom_env(tmp_path), timeout=120)
        s = subprocess.run([*hr, "status", "--db", str(locked)], capture_output=True, text=True,
                           env=headroom_env(tmp_path), timeout=120)
        n = subprocess.run([*hr, "ingest", "--kind", "utilization", "--db", str(folder / "sub" / "new.duckdb"),
                            str(write_csv(tmp_path))], capture_output=True, text=True, env=headroom_env(tmp_path),
                           timeout=120)
    finally:
        folder.chmod(0o755)
    if w.returncode == 0 and not prefix:
        pytest.skip("file modes do not deny this user")
    assert w.returncode == 1, w.stderr
    assert one_line(w.stderr) == (
        f"headroom ingest: error: warehouse {locked}: permission denied; nothing of this step was written: let "
        "this user read and write the file and its folder (chmod, chown), or use another --db")
    assert s.returncode in (0, 1) and "utilization           2 rows" in s.stdout, s.stderr
    assert n.returncode == 1
    assert one_line(n.stderr).startswith(f"headroom ingest: error: warehouse {folder}/sub/new.duckdb: permission "
                                         f"denied at {folder}/sub; nothing of this step was written")
    assert fingerprint(locked)["files"] == {"wh.duckdb": before["files"]["wh.duckdb"]}
    assert not (folder / "sub").exists()
