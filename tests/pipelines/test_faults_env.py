"""One test per fault of the environment or of an input: each shows the one-line message,
the exit code (2: bad input, 1: the environment) and that nothing partial was written
(docs/errors.md lists them)."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from pipelines import cli
from pipelines.ingest import adapters
from pipelines.store import warehouse

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
    """Python's csv module refuses a field over 128 KiB; the readers lift the limit."""
    db = made_warehouse(tmp_path)
    capsys.readouterr()
    big = tmp_path / "big.csv"
    big.write_text(HEADER + row(2) + row(3, "n" * 300_000) + row(4))
    assert cli.main(["ingest", "--kind", "utilization", "--db", str(db), str(big)]) == 0
    assert "read 3, loaded 3, rejected 0" in capsys.readouterr().out
    assert counts(db) == {"utilization": 5, "rejects": 0}


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
