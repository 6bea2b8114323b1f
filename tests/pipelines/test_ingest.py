"""Ingest: every format against valid and malformed input, idempotency, atomicity."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from pipelines.ingest import loading as ingest
from pipelines.ingest.adapters import IngestFileError
from pipelines.store import warehouse
from tests.pipelines.ingest_files import UTIL_HEADER, prom, rejects, rows, write


def test_valid_csv_loads_and_converts_time_zones(con, tmp_path):
    p = write(tmp_path / "u.csv", UTIL_HEADER + ",extra\n"
              "2026-01-01T02:00:00+02:00,c1,p1,n1,gpu,2,8,x\n"
              "2026-01-01T00:00:00Z,c1,p1,n1,cpu,10,64,x\n"
              "1767225600,c1,p1,n2,gpu,1,8,x\n"
              "1767225600000,c1,p1,n2,cpu,3,64,x\n"
              "2026-01-01 00:00:00,c1,p1,n3,MEM,100,512,x\n")
    r = ingest.ingest_file(con, p, "utilization")
    assert (r.rows_read, r.rows_loaded, r.rows_rejected, r.status) == (5, 5, 0, "loaded")
    got = rows(con, "utilization")
    assert set(got["ts"]) == {pd.Timestamp("2026-01-01 00:00:00")}  # all five are the same instant
    assert set(got["resource"]) == {"gpu", "cpu", "mem"}


@pytest.mark.parametrize("gz,bom", [(True, False), (False, True), (True, True)])
def test_gzip_and_bom(con, tmp_path, gz, bom):
    name = "u.csv.gz" if gz else "u.csv"
    p = write(tmp_path / name, UTIL_HEADER + "\n2026-01-01T00:00:00,c,p,n1,gpu,1,8\n", gz=gz, bom=bom)
    assert ingest.ingest_file(con, p, "utilization").rows_loaded == 1


def test_bad_rows_are_rejected_with_line_and_reason(con, tmp_path):
    p = write(tmp_path / "u.csv", UTIL_HEADER + "\n"
              "2026-01-01T00:00:00,c,p,n1,gpu,1,8\n"      # 2 ok
              "not-a-time,c,p,n1,gpu,1,8\n"                # 3 bad ts
              "2026-01-01T00:00:00,c,p,n2,gpu,NaN,8\n"     # 4 NaN
              "2026-01-01T00:00:00,c,p,n3,gpu,-1,8\n"      # 5 negative
              "2026-01-01T00:00:00,c,p,n4,gpu,9,8\n"       # 6 above capacity
              "2026-01-01T00:00:00,c,p,n5,disk,1,8\n"      # 7 unknown resource
              "2026-01-01T00:00:00,c,p,n6,gpu,abc,8\n"     # 8 not a number
              "2026-01-01T00:00:00,c,p,n7,gpu,1\n"         # 9 short line
              "2026-01-01T01:00:00,c,p,n8,gpu,1,8\n"       # 10 } same key,
              "2026-01-01T01:00:00,c,p,n8,gpu,2,8\n"       # 11 } different values
              "2026-01-01T02:00:00,c,p,n9,gpu,1,8\n"       # 12 } same key,
              "2026-01-01T02:00:00,c,p,n9,gpu,1,8\n"       # 13 } same values: one row
              "abc\n")                                     # 14 a line far too short: one reject
    r = ingest.ingest_file(con, p, "utilization")
    assert (r.rows_read, r.rows_loaded, r.rows_rejected) == (13, 2, 10)
    bad = rejects(con)
    assert sorted(bad) == [3, 4, 5, 6, 7, 8, 9, 10, 11, 14]
    assert bad[14] == "malformed line: Expected Number of Columns: 7 Found: 1"
    assert "ts: unparseable timestamp 'not-a-time'" in bad[3]
    assert "used: not finite" in bad[4]
    assert "used: negative" in bad[5]
    assert bad[6] == "used above capacity"
    assert "resource: unknown value 'disk'" in bad[7]
    assert "used: not a number 'abc'" in bad[8]
    assert "malformed line" in bad[9]
    assert "twice in this file" in bad[10] and "twice in this file" in bad[11]
    raw = dict(con.execute("SELECT line, raw FROM rejects").fetchall())
    assert raw[3] == "not-a-time,c,p,n1,gpu,1,8"
    assert len(rows(con, "utilization")) == 2


def test_missing_column_is_unusable_and_writes_nothing(con, tmp_path):
    p = write(tmp_path / "u.csv", "ts,cluster,pool,node_id,resource,used\n2026-01-01,c,p,n,gpu,1\n")
    with pytest.raises(IngestFileError, match=r"u\.csv: missing column\(s\) capacity"):
        ingest.ingest_file(con, p, "utilization")
    assert warehouse.summary(con)["rows"]["ingest_batches"] == 0


def test_negative_price_and_spot_prices(con, tmp_path):
    p = write(tmp_path / "s.csv", "ts,provider,region,zone,instance_type,product,price\n"
              "2026-01-01T00:00:00Z,aws,us-east-1,us-east-1a,p5.48xlarge,Linux/UNIX,30.5\n"
              "2026-01-01T01:00:00Z,aws,us-east-1,us-east-1a,p5.48xlarge,Linux/UNIX,-1\n")
    r = ingest.ingest_file(con, p, "spot-prices")
    assert (r.rows_loaded, r.rows_rejected) == (1, 1)
    assert "price: negative" in rejects(con)[3]


def test_catalog_location_enum(con, tmp_path):
    header = ("provider,region,instance_type,location,resource,units,vcpus,memory_gb,on_demand_price,"
              "reserved_1y_price,reserved_3y_price,tflops\n")
    p = write(tmp_path / "c.csv", header + "aws,us-east-1,p5.48xlarge,public,gpu,8,192,2048,98.3,62,43,7916\n"
              "own,dc1,h100-node,private,gpu,8,224,2048,,,,7916\n"
              "x,y,z,moon,gpu,8,,,,,,\n")
    r = ingest.ingest_file(con, p, "catalog")
    assert (r.rows_loaded, r.rows_rejected) == (2, 1)
    assert "location: unknown value 'moon'" in rejects(con)[4]


def test_reingest_same_file_is_skipped_and_changes_nothing(con, tmp_path):
    p = write(tmp_path / "u.csv", UTIL_HEADER + "\n2026-01-01T00:00:00,c,p,n1,gpu,1,8\n")
    ingest.ingest_file(con, p, "utilization")
    before = rows(con, "utilization")
    again = ingest.ingest_file(con, p, "utilization")
    assert again.status == "skipped"
    pd.testing.assert_frame_equal(before, rows(con, "utilization"))


def test_overlapping_file_upserts_by_key(con, tmp_path):
    a = write(tmp_path / "a.csv", UTIL_HEADER + "\n2026-01-01T00:00:00,c,p,n1,gpu,1,8\n2026-01-01T01:00:00,c,p,n1,gpu,2,8\n")
    b = write(tmp_path / "b.csv", UTIL_HEADER + "\n2026-01-01T01:00:00,c,p,n1,gpu,5,8\n2026-01-01T02:00:00,c,p,n1,gpu,3,8\n")
    ingest.ingest_file(con, a, "utilization")
    ingest.ingest_file(con, b, "utilization")
    got = rows(con, "utilization")
    assert got["used"].tolist() == [1.0, 5.0, 3.0]


def test_failure_mid_file_rolls_back_everything(con, tmp_path, monkeypatch):
    p = write(tmp_path / "u.csv", UTIL_HEADER + "\n2026-01-01T00:00:00,c,p,n1,gpu,1,8\nbad,c,p,n1,gpu,1,8\n")

    def boom(*_a, **_k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(ingest, "_write_rejects", boom)  # fails after the rows were inserted
    with pytest.raises(RuntimeError, match="disk full"):
        ingest.ingest_file(con, p, "utilization")
    counts = warehouse.summary(con)["rows"]
    assert counts["utilization"] == 0 and counts["rejects"] == 0 and counts["ingest_batches"] == 0
    monkeypatch.undo()
    assert ingest.ingest_file(con, p, "utilization").rows_loaded == 1  # and a retry then works


def test_strict_mode_writes_nothing(con, tmp_path):
    p = write(tmp_path / "u.csv", UTIL_HEADER + "\n2026-01-01T00:00:00,c,p,n1,gpu,1,8\nbad,c,p,n1,gpu,1,8\n")
    with pytest.raises(ingest.StrictModeError):
        ingest.ingest_file(con, p, "utilization", strict=True)
    assert warehouse.summary(con)["rows"]["utilization"] == 0


def test_parquet_with_typed_columns(con, tmp_path):
    frame = pd.DataFrame({
        "ts": pd.to_datetime(["2026-01-01T00:00:00", "2026-01-01T01:00:00"]),
        "device_id": ["g0", "g0"], "node_id": ["n0", "n0"], "metric": ["gpu_temp", "gpu_temp"],
        "value": [61.5, float("inf")],
    })
    p = tmp_path / "t.parquet"
    frame.to_parquet(p)
    r = ingest.ingest_file(con, p, "telemetry")
    assert (r.rows_loaded, r.rows_rejected) == (1, 1)
    assert "value: not finite" in rejects(con)[2]


def test_unreadable_json_names_file_and_position(con, tmp_path):
    p = tmp_path / "broken.json"
    p.write_text('{"SpotPriceHistory": [ {"a": 1}, ')
    with pytest.raises(IngestFileError, match=r"broken\.json: .*line 1 column"):
        ingest.ingest_file(con, p, "spot-prices", "aws-json")


def test_a_generated_folder_ingests_by_kind(tmp_path, caplog):
    """`generate` writes bursts.csv and manifest.json beside the kinds: --kind takes its own file.
    Another data file beside a named one is left out too, but said (it may be of the kind)."""
    from pipelines.synth.files import write_fleet

    write_fleet(tmp_path / "gen", nodes=3, days=2, seed=0)
    with caplog.at_level("WARNING", logger="pipelines.ingest.loading"):
        assert [p.name for p in ingest.expand_paths([str(tmp_path / "gen")], "utilization")] == ["utilization.csv"]
    assert caplog.text == ""
    (tmp_path / "gen" / "dcgm-node0.json").write_text("{}")
    with caplog.at_level("WARNING", logger="pipelines.ingest.loading"):
        assert [p.name for p in ingest.expand_paths([str(tmp_path / "gen")], "utilization")] == ["utilization.csv"]
    assert "dcgm-node0.json not read: the folder has files named for utilization" in caplog.text
    (tmp_path / "gen" / "dcgm-node0.json").unlink()
    (tmp_path / "gen" / "prom").mkdir()
    (tmp_path / "gen" / "prom" / "dcgm-node1.json").write_text("{}")  # another folder: its own rule
    assert [p.name for p in ingest.expand_paths([str(tmp_path / "gen")], "utilization")] == [
        "utilization.csv", "dcgm-node1.json"]


def test_expand_paths(tmp_path):
    for name in ("a.csv", "b.csv", "sub/c.csv"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("x")
    assert len(ingest.expand_paths([str(tmp_path)])) == 3
    assert len(ingest.expand_paths([str(tmp_path / "*.csv")])) == 2


def test_epoch_after_the_sniffed_rows_falls_back_to_the_general_parser(con, tmp_path):
    lines = [f"2026-01-{d:02d}T{h:02d}:00:00Z,c,p,n1,gpu,1,8" for d in range(1, 12) for h in range(24)]
    lines.append("1767225600,c,p,n2,gpu,1,8")  # row 265: an epoch among ISO timestamps
    lines.append("2026-13-45T00:00:00Z,c,p,n3,gpu,1,8")
    p = write(tmp_path / "u.csv", UTIL_HEADER + "\n" + "\n".join(lines) + "\n")
    r = ingest.ingest_file(con, p, "utilization")
    assert (r.rows_loaded, r.rows_rejected) == (265, 1)
    assert "ts: unparseable timestamp '2026-13-45" in rejects(con)[267]
    got = con.execute("SELECT ts FROM utilization WHERE node_id = 'n2'").fetchone()[0]
    assert str(got) == "2026-01-01 00:00:00"


def test_iso_file_with_a_bad_timestamp_names_line_and_value(con, tmp_path):
    p = write(tmp_path / "u.csv", UTIL_HEADER + "\n2026-01-01T00:00:00Z,c,p,n1,gpu,1,8\nyesterday,c,p,n1,gpu,1,8\n")
    r = ingest.ingest_file(con, p, "utilization")
    assert (r.rows_loaded, r.rows_rejected) == (1, 1)
    assert rejects(con)[3] == "ts: unparseable timestamp 'yesterday'"


def test_invalid_utf8_line_is_a_reject_and_binary_file_is_unusable(con, tmp_path):
    p = tmp_path / "u.csv"
    p.write_bytes((UTIL_HEADER + "\n2026-01-01,c,p,n").encode() + b"\xff\xfe" + b"1,gpu,1,8\n2026-01-01,c,p,n2,gpu,1,8\n")
    r = ingest.ingest_file(con, p, "utilization")
    assert (r.rows_loaded, r.rows_rejected) == (1, 1)
    assert "not utf-8" in rejects(con)[2]
    junk = tmp_path / "junk.csv"
    junk.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(IngestFileError, match="junk.csv: missing column"):
        ingest.ingest_file(con, junk, "utilization")


def test_every_bad_row_is_kept_with_its_reason(con, tmp_path):
    lines = [f"2026-01-01T00:00:00,c,p,n{i},gpu,-1,8" for i in range(1500)]
    p = write(tmp_path / "u.csv", UTIL_HEADER + "\n" + "\n".join(lines) + "\n")
    r = ingest.ingest_file(con, p, "utilization")
    assert (r.rows_loaded, r.rows_rejected) == (0, 1500)
    assert con.execute("SELECT count(*), min(line), max(line) FROM rejects").fetchone() == (1500, 2, 1501)


def test_a_folder_with_one_kind_named_reads_only_that_kind(tmp_path, db_path, capsys):
    """`headroom convert` writes telemetry.csv and failures.csv side by side: ingesting the
    folder as telemetry reads telemetry.csv (and unnamed files), not failures.csv."""
    from pipelines import cli
    out = tmp_path / "pdm"
    out.mkdir()
    write(out / "telemetry.csv", "ts,device_id,node_id,metric,value\n2026-01-01T00:00:00Z,g0,n0,gpu_temp,61\n")
    write(out / "failures.csv", "ts,device_id,node_id,failure_type\n2026-01-02T00:00:00Z,g0,n0,xid\n")
    assert [p.name for p in ingest.expand_paths([str(out)], "telemetry")] == ["telemetry.csv"]
    assert [p.name for p in ingest.expand_paths([str(out)], "failures")] == ["failures.csv"]
    assert len(ingest.expand_paths([str(out)])) == 2
    assert cli.main(["ingest", "--kind", "telemetry", "--db", str(db_path), str(out)]) == 0
    assert cli.main(["ingest", "--kind", "failures", "--db", str(db_path), str(out)]) == 0
    assert "loaded 1" in capsys.readouterr().out


def test_a_skipped_reingest_with_other_labels_is_said(con, tmp_path, caplog):
    p = tmp_path / "u.json"
    p.write_text(prom([{"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": "n1", "gpu": "0"},
                         "values": [[1767225600, "50"]]}]))
    ingest.ingest_file(con, p, "utilization", cluster="wrong", pool="p")
    with caplog.at_level("WARNING"):
        r = ingest.ingest_file(con, p, "utilization", cluster="right", pool="p")
    assert r.status == "skipped" and "already ingested with --cluster wrong --pool p" in caplog.text
    assert rows(con, "utilization")["cluster"].tolist() == ["wrong"]


def test_a_fleet_folder_reads_files_named_for_a_kind(tmp_path, caplog):
    """`run --input` and serve's ingest-hourly: dated and JSON files of a kind are read,
    files named for nothing are not (a data file among them named once, in the flow's look;
    notes left alone), the catalog goes first."""
    from pipelines.ingest.loading import inputs_in

    for name in ("utilization.csv", "utilization-2026-02-01.csv.gz", "spot_prices.json", "catalog.parquet",
                 "device_telemetry_week5.csv", "bursts.csv", "manifest.json", "utilisation.csv", "notes.txt"):
        (tmp_path / name).write_text("x")
    with caplog.at_level("WARNING"):
        assert inputs_in(tmp_path, warn=False) and not caplog.text
        got = [(i["kind"], Path(i["path"]).name) for i in inputs_in(tmp_path)]
    assert got == [("catalog", "catalog.parquet"), ("utilization", "utilization-2026-02-01.csv.gz"),
                   ("utilization", "utilization.csv"), ("telemetry", "device_telemetry_week5.csv"),
                   ("spot-prices", "spot_prices.json")]
    assert "not read: utilisation.csv" in caplog.text and "notes.txt" not in caplog.text


def test_a_column_before_the_contract_ones_does_not_misname_rejects_or_refuse_epochs(con, tmp_path):
    """DuckDB's rejects table can name the wrong column when only some of a file's columns
    are read; the reject names the column the bad text is really in, and an epoch time
    among ISO ones still loads."""
    rows = "".join(f"x,{pd.Timestamp('2026-01-05') + pd.Timedelta(minutes=m):%Y-%m-%dT%H:%M:%SZ},c1,p1,n1,cpu,1,8\n"
                   for m in range(250))  # more than the reader samples for epoch numbers
    p = write(tmp_path / "u.csv", "label," + UTIL_HEADER + "\n" + rows + "x,1767700000,c1,p1,n1,cpu,1,8\n"
              "x,2026-01-05T15:00:00Z,c1,p1,n1,cpu,abc,8\nx,bad,c1,p1,n2,cpu,1,8\n")
    r = ingest.ingest_file(con, p, "utilization")
    assert (r.rows_loaded, r.rows_rejected) == (251, 2)
    assert rejects(con) == {253: "used: not a number 'abc'", 254: "ts: unparseable timestamp 'bad'"}


@pytest.mark.parametrize("gz, bom", [(False, False), (True, True)])
def test_reject_lines_are_the_file_lines_after_quoted_newlines_and_blank_lines(con, tmp_path, gz, bom):
    text = (UTIL_HEADER + "\n"
            "2026-01-05T13:00:00Z,c1,p1,\"n\n1\",cpu,1,8\n"        # lines 2-3: one record (a newline in a name)
            "\n"                                                  # line 4: blank
            "2026-01-05T13:00:00Z,c1,p1,n2,cpu,abc,8\n"           # line 5: cast error in the reader
            "2026-01-05T13:00:00Z,c1,p1,,cpu,1,8\n"               # line 6: missing node (validation)
            "\n\n"                                                # lines 7-8
            "bad,c1,p1,n3,cpu,1,8\n")                             # line 9
    p = write(tmp_path / ("u.csv.gz" if gz else "u.csv"), text, gz=gz, bom=bom)
    r = ingest.ingest_file(con, p, "utilization")
    assert r.rows_loaded == 0
    got = dict(con.execute("SELECT line, raw FROM rejects").fetchall())
    assert got == {2: "2026-01-05T13:00:00Z,c1,p1,\"n\n1\",cpu,1,8", 5: "2026-01-05T13:00:00Z,c1,p1,n2,cpu,abc,8",
                   6: "2026-01-05T13:00:00Z,c1,p1,,cpu,1,8", 9: "bad,c1,p1,n3,cpu,1,8"}


def test_files_that_are_not_what_their_names_say_are_named_errors(con, tmp_path):
    (tmp_path / "fake.csv.gz").write_text("not gzip at all\n")
    with pytest.raises(IngestFileError, match=r"fake\.csv\.gz.*unreadable: Not a gzipped file"):
        ingest.ingest_file(con, tmp_path / "fake.csv.gz", "utilization")
    zipped = write(tmp_path / "u.csv", UTIL_HEADER + "\n2026-01-05T13:00:00Z,c1,p1,n1,cpu,1,8\n", gz=True)
    with pytest.raises(IngestFileError, match="gzip-compressed but not named .gz"):
        ingest.ingest_file(con, zipped, "utilization")
    semi = write(tmp_path / "semi.csv", UTIL_HEADER.replace(",", ";") + "\n2026-01-05T13:00:00Z;c1;p1;n1;cpu;1;8\n")
    with pytest.raises(IngestFileError, match="separated by something other than commas"):
        ingest.ingest_file(con, semi, "utilization")
    # an AWS page whose NextToken (and anything else) comes before its SpotPriceHistory
    page = {"NextToken": "x" * 5000, "SpotPriceHistory": [
        {"AvailabilityZone": "us-east-1a", "InstanceType": "m5.large", "ProductDescription": "Linux/UNIX",
         "SpotPrice": "0.035", "Timestamp": "2026-01-05T13:00:00.000Z"}]}
    (tmp_path / "spot.json").write_text(json.dumps(page))
    assert ingest.ingest_file(con, tmp_path / "spot.json", "spot-prices").rows_loaded == 1


@pytest.mark.parametrize("epoch_too", [False, True])
def test_named_time_zones_are_converted_or_rejected_never_dropped(con, tmp_path, epoch_too):
    """A zone name (CET, America/New_York) moves the instant like an offset does, on the
    reader's fast path and on the general parser alike (an epoch row sends it there);
    an unknown name is a reject, not a silently naive time."""
    text = (UTIL_HEADER + "\n2026-01-05 16:00:00 CET,c1,p1,n1,cpu,1,8\n"
            "2026-01-05T13:00:00 America/New_York,c1,p1,n2,cpu,1,8\n2026-01-05 13:00:00 XYZ,c1,p1,n3,cpu,1,8\n"
            # RFC 3339's lower-case z, and `date +'%F %T %z'`'s space before the offset
            "2026-01-05T13:00:00z,c1,p1,n5,cpu,1,8\n2026-01-05 15:00:00 +0200,c1,p1,n6,cpu,1,8\n")
    if epoch_too:
        text += "1767620000,c1,p1,n4,cpu,1,8\n"
    r = ingest.ingest_file(con, write(tmp_path / "u.csv", text), "utilization")
    got = rows(con, "utilization").set_index("node_id")["ts"]
    assert got["n1"] == pd.Timestamp("2026-01-05 15:00") and got["n2"] == pd.Timestamp("2026-01-05 18:00")
    assert got["n5"] == got["n6"] == pd.Timestamp("2026-01-05 13:00")
    assert "n3" not in got.index and r.rows_rejected == 1
    assert next(iter(rejects(con).values())).startswith("ts: unparseable timestamp '2026-01-05 13:00:00 XYZ'")


def test_rows_that_move_a_node_to_another_cluster_are_counted_in_a_warning(con, tmp_path, caplog):
    east = write(tmp_path / "east.csv", UTIL_HEADER + "\n2026-01-05T13:00:00Z,east,p1,n1,cpu,1,8\n"
                 "2026-01-05T13:00:00Z,east,p1,n2,cpu,1,8\n")
    west = write(tmp_path / "west.csv", UTIL_HEADER + "\n2026-01-05T13:00:00Z,west,p1,n1,cpu,2,8\n")
    ingest.ingest_file(con, east, "utilization")
    with caplog.at_level("WARNING", logger="pipelines.ingest.loading"):
        ingest.ingest_file(con, west, "utilization")
    assert "west.csv: 1 row(s) replace readings of the same node, resource and time filed under another " \
           "cluster/pool (node n1: east/p1 -> west/p1)" in caplog.text
    assert sorted(rows(con, "utilization")["cluster"]) == ["east", "west"]


def test_reject_lines_in_a_file_with_old_mac_line_ends(con, tmp_path):
    text = (UTIL_HEADER + "\r2026-01-05T13:00:00Z,c1,p1,n1,cpu,1,8\r2026-01-05T13:00:00Z,c1,p1,n2,cpu,abc,8\r"
            "2026-01-05T13:00:00Z,c1,p1,,cpu,1,8\r")
    p = tmp_path / "u.csv"
    p.write_bytes(text.encode())
    ingest.ingest_file(con, p, "utilization")
    assert dict(con.execute("SELECT line, reason FROM rejects").fetchall()) == {
        3: "used: not a number 'abc'", 4: "node_id: missing"}


def test_extra_columns_without_a_name_or_named_twice_are_ignored(con, tmp_path):
    """A spreadsheet's trailing comma (an extra column with no name) and an extra column
    written twice are ignored like any extra; the contract's own columns twice stay an error."""
    p = write(tmp_path / "u.csv", UTIL_HEADER + ",note,note,\n2026-01-01T00:00:00,c,p,n1,gpu,1,8,a,b,\n")
    assert ingest.ingest_file(con, p, "utilization").rows_loaded == 1
    q = write(tmp_path / "v.csv", UTIL_HEADER + ",used\n2026-01-01T00:00:00,c,p,n1,gpu,1,8,2\n")
    with pytest.raises(IngestFileError, match="header repeats column.s. used"):
        ingest.ingest_file(con, q, "utilization")


@pytest.mark.parametrize("first_end,other_end", [("\r\n", "\n"), ("\n", "\r\n")])
def test_a_file_whose_line_endings_change_midway_is_read_with_every_reject_placed(con, tmp_path, first_end,
                                                                                    other_end):
    """CRLF lines with an LF one appended (``echo >>``): DuckDB's strict reader refuses the
    whole file, so the lenient reader takes it; its rejects still name their lines, and a
    line with too many fields is a reject, not truncated."""
    lines = [UTIL_HEADER, "2026-01-01T00:00:00,c,p,n1,gpu,1,8", "2026-01-01T01:00:00,c,p,n1,gpu,x,8",
             "2026-01-01T02:00:00,c,p,n1,gpu,1,8,9", "2026-01-01T03:00:00,c,p,n1,gpu,1"]
    text = first_end.join(lines[:3]) + first_end + other_end.join([*lines[3:], "2026-01-01T04:00:00,c,p,n1,gpu,2,8"])
    r = ingest.ingest_file(con, write(tmp_path / "m.csv", text + other_end), "utilization")
    assert (r.rows_read, r.rows_loaded, r.rows_rejected) == (5, 2, 3)
    assert rejects(con) == {3: "used: not a number 'x'", 4: "malformed line: expected 7 fields, found 8",
                            5: "malformed line: expected 7 fields, found 6"}
    assert rows(con, "utilization")["used"].tolist() == [1.0, 2.0]


def test_timestamps_pandas_cannot_hold_are_rejects(con, tmp_path):
    """A year 9999 or 0001 row would load, then break every step that reads the warehouse."""
    p = write(tmp_path / "u.csv", UTIL_HEADER + "\n9999-12-31T23:00:00Z,c,p,n1,gpu,1,8\n"
              "0001-01-01 00:00:00,c,p,n1,gpu,1,8\n99999999999999,c,p,n1,gpu,1,8\n2026-01-01,c,p,n1,gpu,1,8\n")
    r = ingest.ingest_file(con, p, "utilization")
    assert (r.rows_loaded, r.rows_rejected) == (1, 3)
    assert all("outside the years 1678-2261" in x for x in rejects(con).values())


def test_a_slash_in_a_cluster_or_pool_name_is_a_reject(con, tmp_path):
    """cluster/pool/resource is a series' id: 'eu/west' would put its series in another group."""
    p = write(tmp_path / "u.csv", UTIL_HEADER + "\n2026-01-01T00:00:00,eu/west,p,n1,gpu,1,8\n"
              "2026-01-01T00:00:00,eu,p/1,n2,gpu,1,8\n2026-01-01T00:00:00,eu,p,n3,gpu,1,8\n")
    r = ingest.ingest_file(con, p, "utilization")
    assert (r.rows_loaded, r.rows_rejected) == (1, 2)
    assert set(rejects(con).values()) == {"cluster and pool names cannot contain '/'"}


def test_categorical_read_streams_in_batches_and_after_an_unfinished_result(monkeypatch) -> None:
    """Rows read a batch at a time equal one read: categories the union of the batches'
    (a batch of only nulls included), timestamps in ns; a connection holding an unfinished
    execute() result still reads (that result ended first, so it streams); an empty result
    keeps its columns."""
    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT range AS i, CASE WHEN range < 4 THEN 'n' || (range % 3) END AS s, "
                "TIMESTAMP '2026-01-01' + to_minutes(range) AS ts FROM range(10)")
    one = warehouse.query_categorical(con, "SELECT * FROM t WHERE i < ? ORDER BY i", [9])
    monkeypatch.setattr(warehouse, "ARROW_BATCH", 3)
    many = warehouse.query_categorical(con, "SELECT * FROM t WHERE i < ? ORDER BY i", [9])
    assert isinstance(many["s"].dtype, pd.CategoricalDtype) and many["ts"].dtype == "datetime64[ns]"
    assert many["s"].dropna().astype(str).tolist() == ["n0", "n1", "n2", "n0"] and many["s"].isna().sum() == 5
    pd.testing.assert_frame_equal(many.astype({"s": object}), one.astype({"s": object}))
    con.execute("SELECT * FROM t")  # left unfetched
    pd.testing.assert_frame_equal(warehouse.query_categorical(con, "SELECT * FROM t WHERE i < ? ORDER BY i", [9]),
                                  many)
    empty = warehouse.query_categorical(con, "SELECT * FROM t WHERE i < 0")
    assert list(empty.columns) == ["i", "s", "ts"] and empty.empty
