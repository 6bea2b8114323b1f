"""`headroom convert --from gcp-prices` on small files shaped like the public GCP price log."""
from __future__ import annotations

import pandas as pd

from pipelines import cli

HEADER = "snapshot_utc,commit,instance_type,region,hour,hour_spot,month,month_1y,month_3y,month_spot\n"


def test_gcp_prices_drop_placeholders_and_keep_the_newest_price(tmp_path, capsys) -> None:
    (tmp_path / "gcp_instance_specs_latest.csv").write_text(
        "instance_type,cpu,ram,a100,l4\na2-highgpu-1g,12,85,1,\nf1-micro,1,0.6,,\nn2-standard-8,8,32,,\n")
    (tmp_path / "gcp_compute_price_changes_2023.csv.gz").write_bytes(_gz(pd.DataFrame({
        "snapshot_utc": ["2023-06-01T00:00:00+00:00"] * 3, "commit": "a" * 12,
        "instance_type": ["a2-highgpu-1g", "f1-micro", "n2-standard-8"], "region": "us-central1",
        "hour": [3.67, 0.0076, 0.0], "hour_spot": [1.10, 0.0, 0.0], "month": [2681.0, 5.5, 0.0],
        "month_1y": [1689.0, 5.5, 0.0], "month_3y": [938.0, 5.5, 0.0], "month_spot": [803.0, 0.0, 0.0],
    })))
    (tmp_path / "gcp_compute_price_changes_2024.csv.gz").write_bytes(_gz(pd.DataFrame({
        "snapshot_utc": ["2024-03-01T00:00:00+00:00"], "commit": "b" * 12, "instance_type": ["a2-highgpu-1g"],
        "region": "us-central1", "hour": [3.80], "hour_spot": [1.20], "month": [2774.0], "month_1y": [1747.0],
        "month_3y": [970.0], "month_spot": [876.0],
    })))
    out = tmp_path / "out"
    files = [str(tmp_path / f"gcp_compute_price_changes_{y}.csv.gz") for y in (2024, 2023)]  # any order
    assert cli.main(["convert", "--from", "gcp-prices", "--out", str(out), *files]) == 0
    cat = pd.read_csv(out / "catalog.csv").set_index("instance_type")
    # n2-standard-8 priced 0 (a placeholder) is not in the catalog; the A100 carries 2024's price
    assert sorted(cat.index) == ["a2-highgpu-1g", "f1-micro"]
    assert cat.loc["a2-highgpu-1g", "on_demand_price"] == 3.80
    assert cat.loc["a2-highgpu-1g", "reserved_1y_price"] == round(1747.0 / 730, 6)
    # its GPU model gives the TFLOPS the planner compares GPUs by; a CPU machine has none
    assert cat.loc["a2-highgpu-1g", "tflops"] == 312.0 and pd.isna(cat.loc["f1-micro", "tflops"])
    # f1-micro's "committed" price equals its monthly price: no commitment to recommend
    assert pd.isna(cat.loc["f1-micro", "reserved_1y_price"]) and pd.isna(cat.loc["f1-micro", "reserved_3y_price"])
    # a shared core, listed at 1 vCPU: 0.2 of one (priced as a whole vCPU, a cluster cost 5x too little)
    assert (cat.loc["f1-micro", "units"], cat.loc["f1-micro", "vcpus"]) == (0.2, 0.2)
    spot = pd.read_csv(out / "spot_prices.csv")
    assert (spot["price"] > 0).all() and sorted(spot["price"]) == [1.10, 1.20]
    assert "catalog.csv: 2 rows" in capsys.readouterr().out


def _gz(frame: pd.DataFrame) -> bytes:
    import gzip

    return gzip.compress(frame.to_csv(index=False).encode())


def test_aws_on_demand_counts_vcpus_and_gpus(tmp_path, caplog) -> None:
    """The planner counts CPU pools in vCPUs: a c3.xlarge is 4 of them, not 1 instance."""
    src = tmp_path / "on_demand_prices.csv"
    src.write_text("instance_type,region,product_description,on_demand_usd_per_hour\n"
                   "c3.xlarge,us-east-1,Linux/UNIX,0.21\ng2.2xlarge,us-east-1,Linux/UNIX,0.65\n"
                   "x9.huge,us-east-1,Linux/UNIX,9.0\n")
    assert cli.main(["convert", "--from", "aws-on-demand", "--out", str(tmp_path / "o"), str(src)]) == 0
    cat = pd.read_csv(tmp_path / "o" / "catalog.csv").set_index("instance_type")
    assert cat.loc["c3.xlarge", ["resource", "units", "vcpus"]].tolist() == ["cpu", 4, 4]
    assert cat.loc["g2.2xlarge", ["resource", "units"]].tolist() == ["gpu", 1]
    assert "x9.huge" not in cat.index and "x9.huge unknown" in caplog.text


def test_bitbrains_hourly_leaves_out_vm_hours_without_cores(tmp_path, caplog) -> None:
    src = tmp_path / "rnd_vm_hourly_2013-07.csv"
    src.write_text("hour_utc,vm_id,cpu_cores,cpu_capacity_mhz_mean,cpu_usage_mhz_mean,mem_usage_kb_mean,"
                   "mem_capacity_kb_mean\n"
                   "2013-07-01T00:00:00Z,1,2,5000,1250,1048576,4194304\n"
                   "2013-07-01T00:00:00Z,2,0,0,0,0,0\n"
                   "2013-07-01T00:00:00Z,3,2,5000,6000,5242880,4194304\n"
                   "2013-07-01T00:00:00Z,4,2,5000,1000,1363148,512\n")
    assert cli.main(["convert", "--from", "bitbrains-hourly", "--out", str(tmp_path / "o"), str(src)]) == 0
    util = pd.read_csv(tmp_path / "o" / "utilization.csv")
    cpu = util[util["resource"] == "cpu"]
    assert cpu["node_id"].tolist() == ["vm1", "vm3", "vm4"]
    assert cpu["used"].tolist() == [0.5, 2.0, 0.4]  # 1250 MHz at 2500 MHz per core; 6000 MHz clipped to 2 cores
    mem = util[util["resource"] == "mem"]
    assert mem["node_id"].tolist() == ["vm1", "vm3"] and mem["used"].tolist() == [1.0, 4.0]
    assert (util["used"] <= util["capacity"]).all()  # every row is in the contract: ingest rejects none
    assert "1 VM-hour(s) with 0 cores left out" in caplog.text and "1 VM-hour(s) with 0 memory left out" in caplog.text
    assert "1 cpu VM-hour(s) above their provisioned capacity clipped" in caplog.text
    assert "1 mem VM-hour(s) using more than 1.5x their capacity left out" in caplog.text  # vm4: 1.3 GB of 512 KB


def test_a_bad_sidecar_is_named_not_the_file_given(tmp_path, capsys) -> None:
    (tmp_path / "gcp_instance_specs_latest.csv").write_text("instance_type,vcpus\na2-highgpu-1g,12\n")
    given = tmp_path / "gcp_compute_price_changes_2023.csv.gz"
    given.write_bytes(_gz(pd.DataFrame({
        "snapshot_utc": ["2023-06-01T00:00:00+00:00"], "commit": "a" * 12, "instance_type": ["a2-highgpu-1g"],
        "region": "us-central1", "hour": [3.67], "hour_spot": [1.10], "month": [2681.0], "month_1y": [1689.0],
        "month_3y": [938.0], "month_spot": [803.0],
    })))
    assert cli.main(["convert", "--from", "gcp-prices", "--out", str(tmp_path / "out"), str(given)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'gcp_instance_specs_latest.csv'}: no column 'cpu', 'ram' (read beside {given}" in err
    assert not (tmp_path / "out" / "spot_prices.csv").exists()  # nothing written
    # a count that is not a number, or below 0 (-2 GPUs made a GPU machine a 12-vCPU CPU offer)
    for row, said in (("a2-highgpu-1g,four,85,1", "line 2, column 'cpu': 'four' is not a number"),
                      ("a2-highgpu-1g,12,85,-2", "line 2, column 'a100': negative count")):
        (tmp_path / "gcp_instance_specs_latest.csv").write_text(f"instance_type,cpu,ram,a100\n{row}\n")
        assert cli.main(["convert", "--from", "gcp-prices", "--out", str(tmp_path / "out"), str(given)]) == 2
        assert f"{tmp_path / 'gcp_instance_specs_latest.csv'}: {said}" in capsys.readouterr().err
    # a negative spot price is an error naming its line, as aws-spot's (it was dropped, silently)
    given.write_bytes(_gz(pd.DataFrame({
        "snapshot_utc": ["2023-06-01T00:00:00+00:00"], "commit": "a" * 12, "instance_type": ["a2-highgpu-1g"],
        "region": "us-central1", "hour": [3.67], "hour_spot": [-0.05], "month": [2681.0], "month_1y": [1689.0],
        "month_3y": [938.0], "month_spot": [803.0]})))
    assert cli.main(["convert", "--from", "gcp-prices", "--out", str(tmp_path / "out"), str(given)]) == 2
    assert "line 2, column 'hour_spot': negative price (1 such row(s))" in capsys.readouterr().err


def test_alibaba_gpu_machines_carry_tflops_and_the_bitbrains_total_counts_cores(tmp_path) -> None:
    (tmp_path / "node_info_df.csv").write_text(
        "gpu_model,gpu_capacity_num,cpu_num,node_name\nA100-SXM4-80GB,8,128,n1\nA100-SXM4-80GB,8,128,n2\n"
        "H800,8,192,n3\nGPU-series-1,2,64,n4\n")
    assert cli.main(["convert", "--from", "alibaba-nodes", "--out", str(tmp_path / "ali"),
                     str(tmp_path / "node_info_df.csv")]) == 0
    cat = pd.read_csv(tmp_path / "ali" / "catalog.csv").set_index("instance_type")
    assert cat.loc["A100-SXM4-80GB-8g-128c", "tflops"] == 8 * 312.0 and cat.loc["H800-8g-192c", "tflops"] == 8 * 989.0
    assert pd.isna(cat.loc["GPU-series-1-2g-64c", "tflops"])  # unknown model: not compared
    # no GPU, or 1e20 of them (written as "A10--9223372036854775808g-128c"): named, nothing written
    for count in ("0", "1e20"):
        (tmp_path / "bad_nodes.csv").write_text(f"gpu_model,gpu_capacity_num,cpu_num,node_name\nA10,{count},128,n1\n")
        assert cli.main(["convert", "--from", "alibaba-nodes", "--out", str(tmp_path / "bad"),
                         str(tmp_path / "bad_nodes.csv")]) == 2
        assert not (tmp_path / "bad").exists()

    (tmp_path / "cluster.csv").write_text("bucket_start_utc,n_vms,cpu_capacity_mhz_sum,cpu_usage_mhz_sum,"
                                          "mem_usage_kb_sum\n2013-07-01T00:00:00Z,2,11012.0,2753.0,100\n")
    assert cli.main(["convert", "--from", "bitbrains-cluster", "--out", str(tmp_path / "bbc"),
                     str(tmp_path / "cluster.csv")]) == 0
    util = pd.read_csv(tmp_path / "bbc" / "utilization.csv")
    assert (util["used"].iloc[0], util["capacity"].iloc[0]) == (1.0, 4.0)  # cores, not GHz


def test_convert_errors_name_the_file_and_line_and_leave_nothing(tmp_path, capsys) -> None:
    import gzip

    out = tmp_path / "out"
    (tmp_path / "nab.csv").write_text("timestamp,value\n2014-02-14 14:30:00,12\n2014-02-14 14:35:00,abc\n")
    assert cli.main(["convert", "--from", "nab", "--out", str(out), str(tmp_path / "nab.csv")]) == 2
    assert "nab.csv: not a nab file (line 3, column 'value': 'abc' is not a number" in capsys.readouterr().err
    (tmp_path / "late.csv").write_text("timestamp,value\n2014-02-14 14:30:00,12\n2014-13-14 14:35:00,1\n")
    assert cli.main(["convert", "--from", "nab", "--out", str(out), str(tmp_path / "late.csv")]) == 2
    assert "line 3, column 'timestamp': unparseable timestamp '2014-13-14 14:35:00'" in capsys.readouterr().err
    whole = gzip.compress(("timestamp_utc,region,availability_zone,instance_type,product_description,"
                           "spot_price_usd_per_hour\n" + "2015-01-01T00:00:00Z,us-east-1,us-east-1a,m3.medium,"
                           "Linux/UNIX,0.01\n" * 2000).encode())
    (tmp_path / "cut.csv.gz").write_bytes(whole[: len(whole) // 2])
    assert cli.main(["convert", "--from", "aws-spot", "--out", str(out), str(tmp_path / "cut.csv.gz")]) == 2
    assert "cut.csv.gz: unreadable (Compressed file ended" in capsys.readouterr().err
    assert not out.exists()  # a failed conversion leaves no folder behind


def test_azure_pdm_error_log_becomes_event_counters(tmp_path) -> None:
    """PdM errors beside the telemetry become a counter per error type at every hour of the
    machine (errors so far since the error log began, so that slices of one history give the
    same counter at the same hour), which the fault features read as events: an error before
    the telemetry began raises the counter but is no event in it."""
    from anomaly.fault_features import FaultPolicy, build_fault_features

    hours = pd.date_range("2015-01-01 06:00", periods=6, freq="h")
    tel = pd.DataFrame({"datetime": [h.strftime("%Y-%m-%d %H:%M:%S") for h in hours] * 2,
                        "machineID": [1] * 6 + [2] * 6, "volt": 170.0, "rotate": 450.0, "pressure": 100.0,
                        "vibration": 40.0})
    given = tmp_path / "PdM_telemetry.csv"
    tel.to_csv(given, index=False)
    (tmp_path / "PdM_errors.csv").write_text(
        "datetime,machineID,errorID\n"
        "2014-12-31T06:00:00.000000,1,error1\n"  # before the telemetry: counted, no event in it
        "2015-01-01T08:00:00.000000,1,error1\n2015-01-01T10:00:00.000000,1,error1\n"
        "2015-01-01T09:00:00.000000,2,error5\n")
    assert cli.main(["convert", "--from", "azure-pdm", "--out", str(tmp_path / "out"), str(given)]) == 0
    out = pd.read_csv(tmp_path / "out" / "telemetry.csv")
    e1 = out[(out["device_id"] == "machine1") & (out["metric"] == "error1")]
    assert e1["value"].tolist() == [1, 1, 2, 2, 3, 3]
    e5 = out[(out["device_id"] == "machine2") & (out["metric"] == "error5")]
    assert e5["value"].tolist() == [0, 0, 0, 1, 1, 1]
    assert set(out["metric"]) == {"volt", "rotate", "pressure", "vibration", "error1", "error5"}
    out["ts"] = pd.to_datetime(out["ts"])
    feats = build_fault_features(out, FaultPolicy(windows=("3h",))).set_index(["device_id", "ts"])
    assert feats.loc[("machine1", hours[4]), "ev_error1_count_3h"] == 2  # the errors at 08:00 and 10:00
    assert feats.loc[("machine2", hours[5]), "ev_error5_hours_since"] == 2
    # the same hours in two overlapping slices: the same counters, so ingest sees one reading
    tel.iloc[[0, 1, 2, 3, 6, 7, 8, 9]].to_csv(tmp_path / "a.csv", index=False)
    tel.iloc[[2, 3, 4, 5, 8, 9, 10, 11]].to_csv(tmp_path / "b.csv", index=False)
    assert cli.main(["convert", "--from", "azure-pdm", "--out", str(tmp_path / "ab"), str(tmp_path / "a.csv"),
                     str(tmp_path / "b.csv")]) == 0
    both = pd.read_csv(tmp_path / "ab" / "telemetry.csv").drop_duplicates()
    key = ["ts", "device_id", "metric"]
    assert not both.duplicated(key).any()
    pd.testing.assert_frame_equal(both.sort_values(key).reset_index(drop=True),
                                  out.assign(ts=out["ts"].dt.strftime("%Y-%m-%dT%H:%M:%S")).sort_values(key)
                                  .reset_index(drop=True), check_dtype=False)


def test_azure_pdm_bad_time_in_a_sidecar_names_that_file(tmp_path, capsys) -> None:
    given = tmp_path / "PdM_telemetry.csv"
    given.write_text("datetime,machineID,volt,rotate,pressure,vibration\n2015-01-01 06:00:00,1,170,450,100,40\n")
    for name, header in (("PdM_errors.csv", "errorID"), ("PdM_failures.csv", "failure")):
        (tmp_path / name).write_text(f"datetime,machineID,{header}\n2015-01-01T06:00:00,1,x\nnot a time,1,x\n")
        assert cli.main(["convert", "--from", "azure-pdm", "--out", str(tmp_path / "out"), str(given)]) == 2
        err = capsys.readouterr().err
        assert f"{tmp_path / name}: line 3, column 'datetime': unparseable timestamp 'not a time'" in err
        (tmp_path / name).unlink()
    assert not (tmp_path / "out").exists()


def test_convert_reads_timestamps_as_ingest_does_and_names_files_it_did_not_write(tmp_path, caplog) -> None:
    """A zone name converts to UTC (it was kept as local time, an hour late for CET), epoch
    seconds and milliseconds are times (they were read as nanoseconds after 1970); a
    <kind>.csv in --out that this run did not write is named in a warning."""
    (tmp_path / "nab.csv").write_text("timestamp,value\n2014-02-14 17:00:00 CET,40\n1392386400,10\n"
                                      "1392386400000,11\n2014-02-14T12:00:00-05:00,1\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "failures.csv").write_text("ts,device_id,node_id,failure_type\n")
    (out / "utilization-old.csv").write_text("ts,cluster,pool,node_id,resource,used,capacity\n")  # ingest takes it
    (out / "notes.txt").write_text("not data")
    assert cli.main(["convert", "--from", "nab", "--out", str(out), str(tmp_path / "nab.csv")]) == 0
    ts = pd.read_csv(out / "utilization.csv")["ts"].tolist()
    assert ts == ["2014-02-14T16:00:00", "2014-02-14T14:00:00", "2014-02-14T14:00:00", "2014-02-14T17:00:00"]
    assert "failures.csv was not written by this convert" in caplog.text
    assert "utilization-old.csv was not written by this convert" in caplog.text and "notes.txt" not in caplog.text


def test_gcp_offers_silent_for_over_a_year_are_taken_as_withdrawn(tmp_path, caplog) -> None:
    """The log never says an offer was withdrawn: 2024's GPU-less a3-megagpu-8g prices, at a
    ninth of an H100's, would otherwise be the cheapest GPUs in the catalog for good."""
    (tmp_path / "gcp_instance_specs_latest.csv").write_text(
        "instance_type,cpu,ram,h100-80gb,h100-80gb-mega\na3-highgpu-8g,208,1872,8,\na3-megagpu-8g,208,1872,,8\n")
    (tmp_path / "gcp_compute_price_changes_2024.csv.gz").write_bytes(_gz(pd.DataFrame({
        "snapshot_utc": ["2024-08-17T12:14:16+02:00"] * 2, "commit": "a" * 12,
        "instance_type": ["a3-megagpu-8g", "a3-highgpu-8g"], "region": "us-central1", "hour": [10.12, 88.49],
        "hour_spot": [5.66, 40.0], "month": [7385.0, 64597.0], "month_1y": [5105.0, 44810.0],
        "month_3y": [3259.0, 28370.0], "month_spot": [4133.0, 29200.0],
    })))
    (tmp_path / "gcp_compute_price_changes_2026.csv.gz").write_bytes(_gz(pd.DataFrame({
        "snapshot_utc": ["2026-07-22T16:23:37+02:00"], "commit": "b" * 12, "instance_type": ["a3-highgpu-8g"],
        "region": "us-central1", "hour": [88.49], "hour_spot": [50.6], "month": [64597.0], "month_1y": [44810.0],
        "month_3y": [28370.0], "month_spot": [36944.0],
    })))
    files = [str(tmp_path / f"gcp_compute_price_changes_{y}.csv.gz") for y in (2024, 2026)]
    assert cli.main(["convert", "--from", "gcp-prices", "--out", str(tmp_path / "o"), *files]) == 0
    cat = pd.read_csv(tmp_path / "o" / "catalog.csv")
    assert cat["instance_type"].tolist() == ["a3-highgpu-8g"]
    assert "1 offer(s) last priced over 365 days" in caplog.text and "a3-megagpu-8g us-central1 (2024-08-17)" in caplog.text
    # the 2024 file alone: its offers are as new as its newest snapshot, all kept
    assert cli.main(["convert", "--from", "gcp-prices", "--out", str(tmp_path / "p"), files[0]]) == 0
    assert len(pd.read_csv(tmp_path / "p" / "catalog.csv")) == 2
