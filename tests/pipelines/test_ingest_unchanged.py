"""A file loaded already is known by its path, size and modification time: not read again.

A drop folder's hourly ingest hashed every file it ever held, each in a Prefect task of its
own: 13.9 s for 12 files, 27.3 s for 360, about a minute an hour after a year of daily files."""
from __future__ import annotations

import os

import pytest

from pipelines import cli
from pipelines.ingest import loading
from pipelines.store import warehouse

from .test_ingest_cli import util_file


def never(*_args, **_kwargs):
    raise AssertionError("read again")


def test_the_cli_skips_a_loaded_file_without_reading_it(tmp_path, db_path, monkeypatch, capsys):
    f = util_file(tmp_path / "u.csv")
    ingest = ["ingest", "--kind", "utilization", "--db", str(db_path), str(f)]
    assert cli.main(ingest) == 0
    with monkeypatch.context() as m:
        m.setattr(loading, "file_sha256", never)
        assert cli.main(ingest) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith(f"{f}: skipped, already ingested as batch")
    # touched: read once (the same bytes: skipped), its new time kept, then known again
    stat = f.stat()
    os.utime(f, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert cli.main(ingest) == 0
    with monkeypatch.context() as m:
        m.setattr(loading, "file_sha256", never)
        assert cli.main(ingest) == 0
    # new bytes at the same path and size: a new batch
    f.write_text(f.read_text().replace(",gpu,1,8", ",gpu,2,8"))
    assert cli.main(ingest) == 0
    with warehouse.open_warehouse(db_path, read_only=True) as con:
        assert con.execute("SELECT count(*), count(DISTINCT path) FROM ingest_batches").fetchone() == (2, 1)
        assert con.execute("SELECT sum(used) FROM utilization").fetchone()[0] == 6


@pytest.mark.slow
def test_the_flow_skips_loaded_files_without_a_task_each(prefect_harness, tmp_path, db_path, monkeypatch):
    from pipelines.flows.ingest import ingest_flow

    inputs = [{"kind": "utilization", "path": str(util_file(tmp_path / f"u{i}.csv", node=f"n{i}"))} for i in range(3)]
    first = ingest_flow(str(db_path), inputs)["files"]
    assert [r["status"] for r in first] == ["loaded"] * 3
    with monkeypatch.context() as m:  # neither a file's task nor its bytes
        m.setattr(loading, "file_sha256", never)
        m.setattr(loading, "ingest_file", never)
        again = ingest_flow(str(db_path), inputs)["files"]
    assert [r["status"] for r in again] == ["skipped"] * 3
    assert [(r["path"], r["batch_id"], r["rows_read"]) for r in again] == [
        (r["path"], r["batch_id"], r["rows_read"]) for r in first]
