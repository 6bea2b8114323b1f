"""Ingest of the formats users already have: AWS spot-price JSON, Prometheus query_range JSON, GWA-T-12."""
from __future__ import annotations

import json
import re

import pytest

from pipelines.ingest import loading as ingest
from pipelines.ingest.adapters import IngestFileError
from tests.pipelines.ingest_files import prom, rejects, rows, write


def test_aws_json(con, tmp_path):
    doc = {"SpotPriceHistory": [
        {"AvailabilityZone": "us-east-1a", "InstanceType": "g5.xlarge", "ProductDescription": "Linux/UNIX",
         "SpotPrice": "0.4123", "Timestamp": "2026-01-01T00:00:00+00:00"},
        {"AvailabilityZone": "us-east-1b", "InstanceType": "g5.xlarge", "ProductDescription": "Linux/UNIX",
         "SpotPrice": "-0.1", "Timestamp": "2026-01-01T00:00:00.000Z"},
        "junk",  # an element that is no object: kept as it was, not as {}
    ]}
    p = tmp_path / "spot.json"
    p.write_text(json.dumps(doc))
    r = ingest.ingest_file(con, p, "spot-prices")
    assert (r.fmt, r.rows_loaded, r.rows_rejected) == ("aws-json", 1, 2)
    got = rows(con, "spot_prices")
    assert got.loc[0, "region"] == "us-east-1" and got.loc[0, "price"] == pytest.approx(0.4123)
    assert con.execute("SELECT raw FROM rejects WHERE line = 3").fetchone()[0] == '"junk"'


def test_prometheus_dcgm_telemetry_and_gpu_utilization(con, tmp_path):
    labels = {"Hostname": "node-1", "gpu": "0", "UUID": "GPU-aaa"}
    results = [
        {"metric": {"__name__": "DCGM_FI_DEV_GPU_TEMP", **labels}, "values": [[1767225600, "65"], [1767225660, "66"]]},
        {"metric": {"__name__": "DCGM_FI_DEV_XID_ERRORS", **labels}, "values": [[1767225600, "0"]]},
        {"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", **labels}, "values": [[1767225600, "50"]]},
        {"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": "node-1", "gpu": "1", "UUID": "GPU-bbb"},
         "values": [[1767225600, "100"]]},
    ]
    p = tmp_path / "dcgm.json"
    p.write_text(prom(results))
    r = ingest.ingest_file(con, p, "telemetry")
    assert (r.fmt, r.rows_loaded) == ("prometheus-json", 5)
    assert set(rows(con, "device_telemetry")["metric"]) == {"gpu_temp", "xid", "gpu_util"}
    ingest.ingest_file(con, p, "utilization", cluster="c1", pool="h100")
    u = rows(con, "utilization")
    assert u[["node_id", "resource", "used", "capacity", "cluster"]].values.tolist() == [["node-1", "gpu", 1.5, 2.0, "c1"]]


def test_prometheus_node_exporter_cpu(con, tmp_path):
    def series(cpu, mode, vals):
        return {"metric": {"__name__": "node_cpu_seconds_total", "instance": "n1:9100", "cpu": cpu, "mode": mode},
                "values": [[1767225600 + 60 * i, str(v)] for i, v in enumerate(vals)]}
    # cpu0: 30 s user per 60 s -> 0.5 busy; cpu1: 60 s idle -> 0 busy
    p = tmp_path / "node.json"
    p.write_text(prom([series("0", "user", [0, 30, 60]), series("0", "idle", [0, 30, 60]),
                        series("1", "idle", [0, 60, 120]), series("1", "user", [0, 0, 0])]))
    ingest.ingest_file(con, p, "utilization")
    u = rows(con, "utilization")
    assert u["used"].tolist() == [0.5, 0.5] and u["capacity"].tolist() == [2.0, 2.0]


@pytest.mark.parametrize("name,node", [("7.csv.gz", "vm7"), ("host-a.csv.gz", "host-a")])
def test_gwa_t12(con, tmp_path, name, node):
    text = ("Timestamp [ms];\tCPU cores;\tCPU capacity provisioned [MHZ];\tCPU usage [MHZ];\tCPU usage [%];\t"
            "Memory capacity provisioned [KB];\tMemory usage [KB];\tDisk read throughput [KB/s];\t"
            "Disk write throughput [KB/s];\tNetwork received throughput [KB/s];\tNetwork transmitted throughput [KB/s]\n"
            "1372629804;\t2;\t5851.9989;\t2925.99945;\t50.0;\t8388608.0;\t1048576.0;\t0;\t0;\t0;\t0\n"
            "1372630104;\t2;\t5851.9989;\tabc;\t0.5;\t8388608.0;\t458575.4;\t0;\t0;\t0;\t0\n")
    # a numbered file is VM N, named as convert --from bitbrains-hourly names it
    p = write(tmp_path / name, text, gz=True)
    r = ingest.ingest_file(con, p, "utilization", cluster="bitbrains", pool="rnd")
    assert (r.fmt, r.rows_read, r.rows_loaded, r.rows_rejected) == ("gwa-t12", 4, 3, 1)
    u = rows(con, "utilization")
    cpu = u[(u["resource"] == "cpu")].iloc[0]
    assert cpu["node_id"] == node and cpu["used"] == pytest.approx(1.0) and cpu["capacity"] == 2.0
    mem = u[(u["resource"] == "mem")].iloc[0]
    assert mem["used"] == pytest.approx(1.0) and mem["capacity"] == pytest.approx(8.0)
    assert "used: not a number 'abc'" in rejects(con)[3]


def test_prometheus_nan_is_rejected_and_counter_resets_count(con, tmp_path):
    """A NaN sample rejects its host-step (a sum skipping it read NaN as 0); after a counter
    reset the new value is the increase, as in Prometheus' rate()."""
    gpu = [{"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": "n1", "gpu": g},
            "values": [[1767225600, a], [1767225660, b]]} for g, a, b in (("0", "50", "NaN"), ("1", "70", "80"))]
    cpu = [{"metric": {"__name__": "node_cpu_seconds_total", "instance": "n1", "cpu": "0", "mode": m},
            "values": [[1767225600 + 60 * i, str(v)] for i, v in enumerate(vals)]}
           for m, vals in (("user", [100, 130, 20]), ("idle", [100, 130, 160]))]
    p = tmp_path / "u.json"
    p.write_text(prom(gpu + cpu))
    r = ingest.ingest_file(con, p, "utilization", cluster="c", pool="p")
    u = rows(con, "utilization")
    assert u[u["resource"] == "gpu"]["used"].tolist() == [pytest.approx(1.2)]  # 08:01 rejected
    assert u[u["resource"] == "cpu"]["used"].tolist() == [pytest.approx(0.5), pytest.approx(20 / 60)]
    assert r.rows_rejected == 1 and next(iter(rejects(con).values())) == "used: not finite 'NaN'"


def test_prometheus_cpu_nan_rejects_its_step_only(con, tmp_path):
    """A NaN counter sample is rejected; the next step is measured from the sample before it."""
    cpu = [{"metric": {"__name__": "node_cpu_seconds_total", "instance": "n1", "cpu": "0", "mode": m},
            "values": [[1767225600 + 60 * i, v] for i, v in enumerate(vals)]}
           for m, vals in (("user", ["0", "30", "NaN", "90"]), ("idle", ["0", "30", "60", "90"]))]
    p = tmp_path / "u.json"
    p.write_text(prom(cpu))
    r = ingest.ingest_file(con, p, "utilization", cluster="c", pool="p")
    assert rows(con, "utilization")["used"].tolist() == [pytest.approx(0.5), pytest.approx(0.5)]
    assert r.rows_rejected == 1 and next(iter(rejects(con).values())) == "used: not finite 'NaN'"


def test_prometheus_duplicate_series_are_not_summed_twice(con, tmp_path, caplog):
    """One exporter scraped by two jobs: the same samples collapse; series that disagree
    reject their host and step instead of being added up."""
    def gpu(job, values):
        return {"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": "n1", "gpu": "0", "job": job},
                "values": [[1767225600 + 60 * i, v] for i, v in enumerate(values)]}
    def mem(name, job, value):
        return {"metric": {"__name__": name, "instance": "n1:9100", "job": job}, "values": [[1767225600, value]]}
    gib = 1024 ** 3
    results = [gpu("a", ["50", "60"]), gpu("b", ["50", "70"]),
               mem("node_memory_MemTotal_bytes", "a", str(64 * gib)), mem("node_memory_MemTotal_bytes", "b", str(64 * gib)),
               mem("node_memory_MemAvailable_bytes", "a", str(40 * gib)),
               mem("node_memory_MemAvailable_bytes", "b", str(40 * gib))]
    p = tmp_path / "dup.json"
    p.write_text(prom(results))
    with caplog.at_level("WARNING"):
        r = ingest.ingest_file(con, p, "utilization", cluster="c", pool="p")
    u = rows(con, "utilization").set_index("resource")
    assert u.loc["gpu", ["used", "capacity"]].tolist() == [0.5, 1.0]
    assert u.loc["mem", ["used", "capacity"]].tolist() == [24.0, 64.0]
    assert r.rows_rejected == 1
    assert rejects(con) == {1000002: "series with the same labels disagree at this time and host"}
    assert "collapsed into one" in caplog.text and "disagree" in caplog.text


def test_prometheus_utilization_samples_without_a_time_are_rejects(con, tmp_path):
    results = [{"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": h, "gpu": "0"},
                "values": [[1767225600, "50"], [None, "60"]]} for h in ("n1", "n2")]
    p = tmp_path / "u.json"
    p.write_text(prom(results))
    r = ingest.ingest_file(con, p, "utilization", cluster="c", pool="p")
    assert (r.rows_read, r.rows_loaded, r.rows_rejected) == (4, 2, 2)  # they used to vanish
    assert all(x.startswith("ts: missing") for x in rejects(con).values())


def test_prometheus_telemetry_without_a_device_label_and_bad_samples_are_rejects(con, tmp_path):
    results = [{"metric": {"__name__": "DCGM_FI_DEV_GPU_TEMP"}, "values": [[1767225600, "60"]]},
               {"metric": {"__name__": "DCGM_FI_DEV_GPU_TEMP", "UUID": "GPU-1"},
                "values": [[1767225600, "61"], "oops", [None, "62"], [1e30, "63"]]}]
    p = tmp_path / "t.json"
    p.write_text(prom(results))
    r = ingest.ingest_file(con, p, "telemetry")
    assert (r.rows_loaded, r.rows_rejected) == (1, 4)
    reasons = sorted(rejects(con).values())
    assert any(x.startswith("device_id: missing") for x in reasons)
    assert "ts: missing; value: missing" in reasons and "ts: unparseable timestamp '1e+30'" in reasons


def test_aws_local_and_wavelength_zones_belong_to_their_region() -> None:
    from pipelines.ingest.aws_json import _aws_region

    assert [_aws_region(z) for z in ("us-east-1a", "us-west-2-lax-1a", "us-east-1-wl1-bos-wlz-1",
                                     "us-gov-west-1b", "ap-northeast-1c")] == [
        "us-east-1", "us-west-2", "us-east-1", "us-gov-west-1", "ap-northeast-1"]


@pytest.mark.parametrize("doc, message", [
    ({"status": "success", "data": [1]}, "'data' must be an object"),
    ({"status": "success", "data": {"resultType": "matrix", "result": ["x"]}}, "series 1 of data.result"),
    ({"status": "error", "errorType": "bad_data", "error": "parse error"}, "(status 'error'): bad_data parse error"),
])
def test_prometheus_malformed_responses_are_clear(con, tmp_path, doc, message):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(IngestFileError, match=re.escape(message)):
        ingest.ingest_file(con, p, "utilization", "prometheus-json")
    with pytest.raises(IngestFileError, match=re.escape(message)):  # recognised without --format too
        ingest.ingest_file(con, p, "utilization")


def test_gwa_t12_never_loads_megahertz_as_cores(con, tmp_path):
    text = ("Timestamp [ms];\tCPU cores;\tCPU capacity provisioned [MHZ];\tCPU usage [MHZ];\tCPU usage [%];\t"
            "Memory capacity provisioned [KB];\tMemory usage [KB]\n"
            "1372629804;\t4;\t0;\t2;\t0;\t8388608.0;\t1048576.0\n")
    p = write(tmp_path / "8.csv", text)
    r = ingest.ingest_file(con, p, "utilization", cluster="b", pool="p")
    assert r.rows_rejected == 1 and rows(con, "utilization")["resource"].tolist() == ["mem"]
    assert next(iter(rejects(con).values())) == (
        "cpu: usage in MHz cannot be converted to cores with 4 CPU cores and 0 MHz provisioned")
    again = ingest.ingest_file(con, p, "utilization", cluster="b", pool="p")  # re-ingest: nothing new
    assert (again.rows_read, again.rows_loaded) == (r.rows_read, 0) and len(rejects(con)) == 1


def test_gwa_t12_counts_say_rows_and_the_lines_rejects_holds(con, tmp_path):
    """A GWA line is two rows (cpu, mem); a line with both bad is one reject: the counts said
    "rejected 3" beside 2 lines in rejects."""
    text = ("Timestamp [ms];\tCPU cores;\tCPU capacity provisioned [MHZ];\tCPU usage [MHZ];\tCPU usage [%];\t"
            "Memory capacity provisioned [KB];\tMemory usage [KB]\n"
            "1372629804;\t4;\t0;\t2;\t0;\t8388608.0;\tx\n"
            "1372630104;\t4;\t0;\t2;\t0;\t8388608.0;\t1048576.0\n")
    r = ingest.ingest_file(con, write(tmp_path / "9.csv", text), "utilization", cluster="b", pool="p")
    assert (r.rows_read, r.rows_rejected, r.reject_lines) == (4, 3, 2) and len(rejects(con)) == 2
    said = ingest.counts_text(r.rows_read, r.rows_loaded, r.rows_rejected, r.swallowed, r.reject_lines)
    assert said == "read 4, loaded 1, rejected 3 row(s) on 2 line(s)"
    assert ingest.counts_text(4, 1, 3) == "read 4, loaded 1, rejected 3"


def test_prometheus_series_that_map_to_nothing_are_said(con, tmp_path, caplog):
    noname = [{"metric": {"Hostname": "n1", "gpu": "0"}, "values": [[1767225600, "50"]]}]
    p = tmp_path / "noname.json"
    p.write_text(prom(noname))
    with pytest.raises(IngestFileError, match=r"no series of a metric that utilization maps .*no __name__ label"):
        ingest.ingest_file(con, p, "utilization", "prometheus-json")
    mixed = [{"metric": {"__name__": "DCGM_FI_DEV_GPU_TEMP", "Hostname": "n1", "gpu": "0"},
              "values": [[1767225600, "60"]]},
             {"metric": {"__name__": "DCGM_FI_DEV_FB_USED", "Hostname": "n1", "gpu": "0"},
              "values": [[1767225600, "1000"]]}]
    q = tmp_path / "mixed.json"
    q.write_text(prom(mixed))
    with caplog.at_level("WARNING"):
        r = ingest.ingest_file(con, q, "telemetry", "prometheus-json")
    assert r.rows_loaded == 1 and "1 sample(s) of metric(s) DCGM_FI_DEV_FB_USED are not loaded" in caplog.text


def test_prometheus_samples_that_cannot_be_loaded_are_rejects_or_warnings_never_lost(con, tmp_path, caplog):
    """Memory needs MemTotal and MemAvailable at the same step: one without the other is a
    reject that says so; a NaN CPU sample's reject points at that sample; the counters'
    first step (no rate yet) is named in a warning."""
    gib = 1024 ** 3
    t0 = 1767225600

    def mem(name, times, value):
        return {"metric": {"__name__": name, "instance": "n1:9100"}, "values": [[t, str(value)] for t in times]}

    def cpu(mode, values):
        return {"metric": {"__name__": "node_cpu_seconds_total", "instance": "n1:9100", "cpu": "0", "mode": mode},
                "values": [[t0 + 60 * i, v] for i, v in enumerate(values)]}

    results = [mem("node_memory_MemTotal_bytes", [t0, t0 + 60], 64 * gib),
               mem("node_memory_MemAvailable_bytes", [t0, t0 + 90], 40 * gib),
               cpu("idle", ["100", "130", "160"]), cpu("user", ["10", "NaN", "40"])]
    p = tmp_path / "n1.json"
    p.write_text(prom(results))
    with caplog.at_level("WARNING", logger="pipelines.ingest.prometheus"):
        r = ingest.ingest_file(con, p, "utilization", cluster="c", pool="p")
    got = rejects(con)
    assert got[1000002] == "mem: no node_memory_MemAvailable_bytes sample at this time and host"
    assert got[2000002] == "mem: no node_memory_MemTotal_bytes sample at this time and host"
    nan_reject = con.execute("SELECT raw, reason FROM rejects WHERE line = 4000002").fetchone()
    assert '"NaN"' in nan_reject[0] and nan_reject[1].startswith("used: not")
    assert r.rows_rejected == 3 and r.rows_loaded == 2  # mem at t0, cpu at t0 + 120
    assert "1 host step(s) (the query's first, at 2026-01-01 00:00:00 UTC) are not loaded" in caplog.text
    assert "2 memory sample(s)" in caplog.text


def test_prometheus_memory_rejects_blame_the_series_at_fault(con, tmp_path):
    gib = 1024 ** 3
    t0 = 1767225600

    def mem(name, values):
        return {"metric": {"__name__": name, "instance": "n1:9100"},
                "values": [[t0 + 60 * i, v] for i, v in enumerate(values)]}

    p = tmp_path / "m.json"
    p.write_text(prom([mem("node_memory_MemTotal_bytes", [str(64 * gib)] * 2),
                        mem("node_memory_MemAvailable_bytes", [str(40 * gib), "NaN"])]))
    ingest.ingest_file(con, p, "utilization", cluster="c", pool="p")
    assert list(rejects(con)) == [2000002]  # MemAvailable's NaN sample, not MemTotal's good one
    only = tmp_path / "total_only.json"
    only.write_text(prom([mem("node_memory_MemTotal_bytes", [str(64 * gib)] * 3)]))
    r = ingest.ingest_file(con, only, "utilization", cluster="c", pool="p")
    assert (r.rows_read, r.rows_rejected) == (3, 3)  # counted and kept, not gone without a trace


def test_prometheus_empty_results_and_infinite_counters(con, tmp_path):
    """An empty matrix loads nothing as telemetry (it used to crash); +Inf in a CPU counter
    rejects its step as NaN does, instead of reading as a counter reset (a busy core)."""
    p = tmp_path / "e.json"
    p.write_text(prom([]))
    assert ingest.ingest_file(con, p, "telemetry").rows_read == 0
    cpu = [{"metric": {"__name__": "node_cpu_seconds_total", "instance": "n1", "cpu": "0", "mode": m},
            "values": [[1767225600 + 60 * i, v] for i, v in enumerate(vals)]}
           for m, vals in (("user", ["0", "30", "+Inf", "90", "120"]), ("idle", ["0", "30", "60", "90", "120"]))]
    q = tmp_path / "u.json"
    q.write_text(prom(cpu))
    r = ingest.ingest_file(con, q, "utilization", cluster="c", pool="p")
    assert rows(con, "utilization")["used"].tolist() == [pytest.approx(0.5)] * 3
    assert r.rows_rejected == 1


def test_prometheus_copies_among_some_series_leave_the_others_alone(con, tmp_path):
    """Only series that share their labels (or repeat a time) are checked for copies: a host
    scraped twice collapses (and rejects the step where its copies disagree), the host
    beside it loads whole, and a repeated time within one series is a disagreement too."""
    def gpu(host, job, values):
        return {"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": host, "gpu": "0", "job": job},
                "values": [[1767225600 + 60 * i, v] for i, v in enumerate(values)]}
    twice = {"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": "n3", "gpu": "0"},
             "values": [[1767225600, "5"], [1767225600, "6"], [1767225660, "7"]]}
    p = tmp_path / "mix.json"
    p.write_text(prom([gpu("n1", "a", ["50", "60", "70"]), gpu("n1", "b", ["50", "65", "70"]),
                        gpu("n2", "a", ["10", "20", "30"]), twice]))
    r = ingest.ingest_file(con, p, "utilization", cluster="c", pool="p")
    got = rows(con, "utilization")
    assert (r.rows_loaded, r.rows_rejected) == (6, 2)
    assert got.loc[got["node_id"] == "n2", "used"].tolist() == [0.1, 0.2, 0.3]
    assert got.loc[got["node_id"] == "n1", "used"].tolist() == [0.5, 0.7]
    assert got.loc[got["node_id"] == "n3", "used"].tolist() == [0.07]
    assert set(rejects(con).values()) == {"series with the same labels disagree at this time and host"}
