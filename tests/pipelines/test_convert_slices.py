"""`headroom convert` on other slices of the public traces than the ones developed on: what
differs in another slice (no event in it, a partial last line, gzip, files named in another
order, a second product) changes no id and loses no row silently."""
from __future__ import annotations

import gzip

import pandas as pd
import pytest

from pipelines import cli

GCP_HEADER = "snapshot_utc,commit,instance_type,region,hour,hour_spot,month,month_1y,month_3y,month_spot\n"


def test_the_newest_gcp_price_wins_whatever_the_files_are_named(tmp_path) -> None:
    (tmp_path / "gcp_instance_specs_latest.csv").write_text("instance_type,cpu,ram\nn2-standard-8,8,32\n")
    (tmp_path / "a_part.csv").write_text(GCP_HEADER + "2026-03-01T00:00:00+00:00,b,n2-standard-8,us-central1,"
                                         "0.40,0.1,292,200,150,70\n")
    (tmp_path / "z_part.csv").write_text(GCP_HEADER + "2023-03-01T00:00:00+00:00,a,n2-standard-8,us-central1,"
                                         "0.30,0.1,219,150,100,70\n")
    assert cli.main(["convert", "--from", "gcp-prices", "--out", str(tmp_path / "o"), str(tmp_path / "z_part.csv"),
                     str(tmp_path / "a_part.csv")]) == 0
    cat = pd.read_csv(tmp_path / "o" / "catalog.csv")
    assert cat["on_demand_price"].tolist() == [0.40] and "_as_of" not in cat.columns


def test_an_offer_takes_its_newest_snapshot_whole(tmp_path) -> None:
    """The newest snapshot (by time: 11:00+05:00 is before 10:00+00:00) has no commitment
    price: the offer has none, rather than an older snapshot's beside the new on-demand one."""
    (tmp_path / "gcp_instance_specs_latest.csv").write_text("instance_type,cpu,ram\nn2-standard-8,8,32\n")
    (tmp_path / "p.csv").write_text(GCP_HEADER + "2026-01-01T10:00:00+00:00,a,n2-standard-8,us-central1,"
                                    "0.50,0.1,365,,,70\n2026-01-01T11:00:00+05:00,b,n2-standard-8,us-central1,"
                                    "0.40,0.1,292,150,100,70\n")
    assert cli.main(["convert", "--from", "gcp-prices", "--out", str(tmp_path / "o"), str(tmp_path / "p.csv")]) == 0
    cat = pd.read_csv(tmp_path / "o" / "catalog.csv")
    assert cat["on_demand_price"].tolist() == [0.50] and cat["reserved_1y_price"].isna().all()


def test_aws_on_demand_keeps_the_linux_price_and_refuses_two(tmp_path, caplog, capsys) -> None:
    src = tmp_path / "on_demand_prices.csv"
    head = "instance_type,region,product_description,on_demand_usd_per_hour\n"
    src.write_text(head + "c3.xlarge,us-east-1,Linux/UNIX,0.21\nc3.xlarge,us-east-1,Windows,0.376\n")
    assert cli.main(["convert", "--from", "aws-on-demand", "--out", str(tmp_path / "o"), str(src)]) == 0
    assert pd.read_csv(tmp_path / "o" / "catalog.csv")["on_demand_price"].tolist() == [0.21]
    assert "1 row(s) of Windows left out" in caplog.text
    src.write_text(head + "c3.xlarge,us-east-1,Linux/UNIX,0.21\nc3.xlarge,us-east-1,Linux/UNIX,0.25\n")
    assert cli.main(["convert", "--from", "aws-on-demand", "--out", str(tmp_path / "o2"), str(src)]) == 2
    assert "line 2, column 'instance_type': c3.xlarge in us-east-1 has two on-demand prices" in capsys.readouterr().err


def test_a_gcp_specs_sidecar_listing_a_machine_twice_is_named(tmp_path, capsys) -> None:
    (tmp_path / "gcp_instance_specs_latest.csv").write_text("instance_type,cpu,ram\nn2-standard-8,8,32\n"
                                                            "n2-standard-8,8,64\n")
    (tmp_path / "p.csv").write_text(GCP_HEADER + "2026-01-01T10:00:00+00:00,a,n2-standard-8,us-central1,"
                                    "0.50,0.1,365,,,70\n")
    assert cli.main(["convert", "--from", "gcp-prices", "--out", str(tmp_path / "o"), str(tmp_path / "p.csv")]) == 2
    err = capsys.readouterr().err
    assert "gcp_instance_specs_latest.csv: line 3, column 'instance_type': n2-standard-8 listed twice" in err, err
    assert "read beside" in err and not (tmp_path / "o").exists()
    # an exact repeat, or a repeat of a machine no price names, is harmless (it converted before)
    (tmp_path / "gcp_instance_specs_latest.csv").write_text("instance_type,cpu,ram\nn2-standard-8,8,32\n"
                                                            "n2-standard-8,8,32\nc9-x,4,8\nc9-x,4,16\n")
    assert cli.main(["convert", "--from", "gcp-prices", "--out", str(tmp_path / "o"), str(tmp_path / "p.csv")]) == 0
    assert pd.read_csv(tmp_path / "o" / "catalog.csv")["memory_gb"].tolist() == [32]


def test_a_titan_slice_with_no_failure_in_it_gives_an_empty_table(tmp_path) -> None:
    src = tmp_path / "gc.csv"
    src.write_text("SN,location,insert,remove,duration,out,event\n"
                   "0320117100060,c11-2c1s4n1,2017-04-09 21:36:19,2019-08-01 20:07:33,72916274,FALSE,\n")
    assert cli.main(["convert", "--from", "titan", "--out", str(tmp_path / "o"), str(src)]) == 0
    assert pd.read_csv(tmp_path / "o" / "failures.csv").empty


@pytest.mark.parametrize(("source", "text", "said"), [
    ("azure-pdm", "datetime,machineID,volt,rotate,pressure,vibration\n2015-01-01 06:00:00,1,170,450,100,40\n"
                  "2015-01-01 07:00:00,,170,450,100,40\n", "line 3, column 'machineID': missing id"),
    ("alibaba-nodes", "gpu_model,gpu_capacity_num,cpu_num,node_name\nA10,1,128,2\nA10,1\n",
     "line 3, column 'cpu_num': missing count"),
    # one empty vm_id read every id as a float: vm1.0 and vmnan, exit 0
    ("bitbrains-hourly", "hour_utc,vm_id,cpu_cores,cpu_capacity_mhz_mean,cpu_usage_mhz_mean,mem_capacity_kb_mean,"
                         "mem_usage_kb_mean\n2013-07-01 00:00:00,1,2,5000,1000,4194304,1048576\n"
                         "2013-07-01 00:00:00,,2,5000,1000,4194304,1048576\n", "line 3, column 'vm_id': missing id"),
    # a row cut short was left out as a VM-hour "with 0 cores"
    ("bitbrains-hourly", "hour_utc,vm_id,cpu_cores,cpu_capacity_mhz_mean,cpu_usage_mhz_mean,mem_capacity_kb_mean,"
                         "mem_usage_kb_mean\n2013-07-01 00:00:00,1,2,5000,1000,4194304,1048576\n"
                         "2013-07-01 01:00:00,1\n", "line 3, column 'cpu_cores': missing number"),
    ("bitbrains-hourly", "hour_utc,vm_id,cpu_cores,cpu_capacity_mhz_mean,cpu_usage_mhz_mean,mem_capacity_kb_mean,"
                         "mem_usage_kb_mean\n2013-07-01 00:00:00,1,2,5000,1000,4194304,1048576\n"
                         "2013-07-01 01:00:00,1, ,5000,1000,4194304,1048576\n", "line 3, column 'cpu_cores': missing"),
    # another kind's file: its columns are said, not "two on-demand prices" from its rows
    ("aws-on-demand", "timestamp_utc,region,availability_zone,instance_type,product_description,"
                      "spot_price_usd_per_hour\n2015-03-11 16:54:38+00:00,us-east-1,us-east-1a,c3.xlarge,Linux,0.03\n"
                      "2015-03-11 16:58:12+00:00,us-east-1,us-east-1a,c3.xlarge,Linux,0.03\n",
     "not an aws-on-demand file (no column 'on_demand_usd_per_hour')"),
    ("titan", "timestamp,value\n2014-02-14 14:27:00,51.8\n", "no column 'SN', 'event', 'remove', 'location'"),
    # rows ingest or hazard reject were passed on, to be named by a line of the converted file
    ("titan", "SN,location,insert,remove,duration,out,event\n1,c1,2018-03-01,2018-04-01,1,FALSE,dbe\n"
              "2,c1,2018-03-27,2018-03-03,1,FALSE,otb\n", "line 3, column 'remove': removed before it was inserted"),
    ("aws-spot", "timestamp_utc,region,availability_zone,instance_type,product_description,spot_price_usd_per_hour\n"
                 "2015-03-11 16:54:38+00:00,us-east-1,us-east-1a,c3.xlarge,Linux,0.03\n"
                 "2015-03-11 16:58:12+00:00,us-east-1,us-east-1a,c3.xlarge,Linux,abc\n",
     "line 3, column 'spot_price_usd_per_hour': 'abc' is not a number"),
    ("aws-spot", "timestamp_utc,region,availability_zone,instance_type,product_description,spot_price_usd_per_hour\n"
                 "2015-03-11 16:54:38+00:00,us-east-1,us-east-1a,c3.xlarge,Linux,-1\n",
     "line 2, column 'spot_price_usd_per_hour': negative price"),
])
def test_a_partial_last_line_is_named_not_a_renamed_id(tmp_path, capsys, source: str, text: str, said: str) -> None:
    src = tmp_path / "in.csv"
    src.write_text(text)
    assert cli.main(["convert", "--from", source, "--out", str(tmp_path / "o"), str(src)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and said in err, err
    assert not (tmp_path / "o").exists()


def test_pdm_ids_stay_as_written_and_missing_sidecars_are_said(tmp_path, caplog) -> None:
    src = tmp_path / "tel.csv"
    src.write_text("datetime,machineID,volt,rotate,pressure,vibration\n2015-01-01 06:00:00,12,170,450,100,40\n")
    assert cli.main(["convert", "--from", "azure-pdm", "--out", str(tmp_path / "o"), str(src)]) == 0
    assert set(pd.read_csv(tmp_path / "o" / "telemetry.csv")["device_id"]) == {"machine12"}
    assert "no PdM_errors.csv beside it" in caplog.text and "no PdM_failures.csv beside it" in caplog.text


def test_a_gzipped_nab_series_keeps_its_name_and_a_folder_is_said(tmp_path, capsys) -> None:
    text = "timestamp,value\n2014-02-14 14:27:00,51.8\n2014-02-14 14:32:00,58.9\n"
    (tmp_path / "ec2_x.csv").write_text(text)
    (tmp_path / "gz").mkdir()
    (tmp_path / "gz" / "ec2_x.csv.gz").write_bytes(gzip.compress(text.encode()))
    for name, src in (("plain", tmp_path / "ec2_x.csv"), ("gzip", tmp_path / "gz" / "ec2_x.csv.gz")):
        assert cli.main(["convert", "--from", "nab", "--out", str(tmp_path / name), str(src)]) == 0
    plain, gz = (pd.read_csv(tmp_path / n / "utilization.csv") for n in ("plain", "gzip"))
    pd.testing.assert_frame_equal(plain, gz)
    assert set(plain["node_id"]) == {"ec2_x"}
    capsys.readouterr()
    assert cli.main(["convert", "--from", "nab", "--out", str(tmp_path / "o"), str(tmp_path / "gz")]) == 2
    assert "is a folder; give the files in it" in capsys.readouterr().err


def test_a_bad_value_after_blank_lines_names_its_own_line(tmp_path, capsys) -> None:
    """pandas skips blank lines, so its record number is not the file's line; the error must be."""
    nab = tmp_path / "s.csv"
    nab.write_text("timestamp,value\n2014-01-01 00:00:00,1\n\n2014-01-01 00:05:00,2\n  \n\n2014-01-01 00:10:00,x\n")
    assert cli.main(["convert", "--from", "nab", "--out", str(tmp_path / "o"), str(nab)]) == 2
    assert "line 7, column 'value': 'x' is not a number" in capsys.readouterr().err
    pdm = tmp_path / "pdm"
    pdm.mkdir()
    (pdm / "PdM_telemetry.csv").write_text("datetime,machineID,volt,rotate,pressure,vibration\n"
                                           "2015-01-01 06:00:00,1,1,1,1,1\n")
    (pdm / "PdM_errors.csv").write_text("datetime,machineID,errorID\n\n2015-01-01 06:00:00,1,error1\n\n"
                                        "2015-01-01 07:00:00,,error1\n")
    assert cli.main(["convert", "--from", "azure-pdm", "--out", str(tmp_path / "o2"),
                     str(pdm / "PdM_telemetry.csv")]) == 2
    assert "PdM_errors.csv: line 5, column 'machineID': missing id" in capsys.readouterr().err
