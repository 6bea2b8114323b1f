"""`headroom run` and `headroom serve --list` end to end."""
from __future__ import annotations

import re

import pytest

from pipelines import cli
from pipelines.store import warehouse


@pytest.mark.slow
def test_run_generates_ingests_and_is_idempotent(prefect_harness, tmp_path, db_path, monkeypatch, capsys):
    monkeypatch.setenv("HEADROOM_DATA_DIR", str(tmp_path / "fleet"))
    args = ["run", "--db", str(db_path), "--nodes", "3", "--days", "2", "--stages", "none"]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "warehouse:" in out and "ingest (" in out and "the warehouse holds " in out
    with warehouse.open_warehouse(db_path) as con:
        first = warehouse.summary(con)
    assert all(first["rows"][t] > 0 for t in ("utilization", "device_telemetry", "spot_prices", "instance_catalog"))
    assert first["rows"]["rejects"] == 0
    assert cli.main(args) == 0  # same seed, same files: every file is skipped, nothing changes
    assert "skipped (already ingested)" in capsys.readouterr().out
    with warehouse.open_warehouse(db_path) as con:
        assert warehouse.summary(con) == first


def test_run_rejects_a_missing_input_folder(tmp_path, db_path, capsys):
    assert cli.main(["run", "--db", str(db_path), "--input", str(tmp_path / "nope")]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_run_refuses_an_unknown_stage_before_any_work(tmp_path, db_path, capsys):
    from pipelines.cli import main

    assert main(["run", "--db", str(db_path), "--input", str(tmp_path), "--stages", "trian"]) == 2
    assert "unknown stage(s) ['trian']" in capsys.readouterr().err and not db_path.exists()


@pytest.mark.parametrize(("stages", "said"), [("", "name stages"), ("none,train", "or none alone")])
def test_run_refuses_empty_or_contradictory_stages(tmp_path, db_path, capsys, stages, said):
    assert cli.main(["run", "--db", str(db_path), "--input", str(tmp_path), "--stages", stages]) == 2
    assert said in capsys.readouterr().err and not db_path.exists()


def test_run_says_a_data_dir_that_is_a_file(tmp_path, db_path, monkeypatch, capsys):
    (tmp_path / "afile").write_text("")
    monkeypatch.setenv("HEADROOM_DATA_DIR", str(tmp_path / "afile" / "sub"))
    assert cli.main(["run", "--db", str(db_path), "--nodes", "3", "--days", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines()[-1].endswith("HEADROOM_DATA_DIR " + str(tmp_path / "afile" / "sub") + ": "
                                         + str(tmp_path / "afile") + " is a file, not a folder")


@pytest.mark.parametrize(("env", "stages", "said"), [
    ({"HEADROOM_ALERT_WEBHOOK": "ftp://h/x"}, "detect", "webhook URL ftp://h/... must start with http"),
    ({"HEADROOM_REPORT_DIR": "afile"}, "report", "HEADROOM_REPORT_DIR: report folder"),
    ({"HEADROOM_REPORT_DIR": "afile"}, "detect", "alerts.jsonl: {tmp}/afile is a file, not a folder"),
])
def test_run_checks_where_its_stages_write_before_any_work(tmp_path, db_path, monkeypatch, capsys, env, stages,
                                                            said):
    """A sink or report folder that cannot work stops run at once, not after ingest and models."""
    (tmp_path / "afile").write_text("")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "utilization.csv").write_text("ts,cluster,pool,node_id,resource,used,capacity\n")
    monkeypatch.delenv("HEADROOM_ALERT_JSONL", raising=False)  # run sets its default; restored after
    for key, value in env.items():
        monkeypatch.setenv(key, str(tmp_path / value) if key == "HEADROOM_REPORT_DIR" else value)
    assert cli.main(["run", "--db", str(db_path), "--input", str(tmp_path / "in"), "--stages", stages]) == 2
    assert said.format(tmp=tmp_path) in capsys.readouterr().err and not db_path.exists()


def test_faults_score_refuses_a_jsonl_folder(tmp_path, db_path, capsys):
    from pipelines.cli import main
    from pipelines.store import warehouse

    with warehouse.open_warehouse(db_path):
        pass
    assert main(["faults", "score", "--db", str(db_path), "--jsonl", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
    (tmp_path / "afile").write_text("")
    for command in (["faults", "score"], ["detect"]):
        assert main([*command, "--db", str(db_path), "--jsonl", str(tmp_path / "afile" / "x.jsonl")]) == 2
        assert f"{tmp_path / 'afile'} is a file, not a folder" in capsys.readouterr().err


def test_a_failed_sink_exits_1_from_faults_score_as_from_detect(db_path, monkeypatch, capsys):
    """faults score printed the sink's failure and exited 0: a scheduler running it never saw
    the sink was down."""
    import pipelines.flows.detect as detect_module
    from pipelines.cli import main
    from pipelines.store import warehouse

    with warehouse.open_warehouse(db_path):
        pass
    out = {"faults": {"fired": 1}, "delivery_failed": {"webhook:127.0.0.1#ab12": "ConnectError: refused"}}
    monkeypatch.setattr(detect_module, "detect_flow", lambda **kw: out)
    for command in (["faults", "score"], ["detect", "--detectors", "faults"]):
        assert main([*command, "--db", str(db_path)]) == 1
        assert "error: alert sink webhook:127.0.0.1#ab12 failed" in capsys.readouterr().err


def test_faults_say_when_no_model_scores_the_fleet(db_path):
    """A warehouse of utilization only: "trained 0, fired 0" alone read like a fleet with no
    fault ahead; the step says there is no model, and what it learns from."""
    from datetime import datetime

    from anomaly.fault_features import FaultPolicy
    from pipelines.detect.jobs import detect_faults
    from pipelines.store import warehouse

    with warehouse.open_warehouse(db_path):
        pass
    out = detect_faults(str(db_path), datetime(2026, 3, 1), [], FaultPolicy())
    assert out["fired"] == 0 and out["threshold_note"] == (
        "no fault model yet: it learns from device telemetry and failures (the warehouse holds 0 telemetry row(s) "
        "and 0 failure(s); a failure must fall a horizon inside the telemetry)")


def test_serve_lists_deployments(tmp_path, db_path, capsys):
    assert cli.main(["serve", "--list", "--db", str(db_path), "--input", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "headroom-run/ingest-hourly" in out and "5 * * * *" in out  # flow/deployment, as prefect takes it


@pytest.mark.slow
def test_a_failing_stage_is_reported_and_the_others_still_run(prefect_harness, tmp_path, db_path, monkeypatch,
                                                              capsys):
    """Half a day of utilization is too short to forecast: train fails with its message, not
    a traceback; plan and report, which do not need this run's forecasts, still run; exit 1."""
    import pandas as pd

    from pipelines.synth.files import write_fleet

    monkeypatch.setenv("HEADROOM_REPORT_DIR", str(tmp_path / "reports"))
    fleet = tmp_path / "fleet"
    write_fleet(fleet, nodes=3, days=2, seed=0)
    util = pd.read_csv(fleet / "utilization.csv")
    util[util["ts"] < sorted(util["ts"].unique())[12 * 12]].to_csv(fleet / "utilization.csv", index=False)
    for f in fleet.iterdir():
        if f.name.split(".")[0] not in ("utilization", "catalog"):
            f.unlink()
    rc = cli.main(["run", "--db", str(db_path), "--input", str(fleet), "--stages", "train,plan,report"])
    captured = capsys.readouterr()
    assert rc == 1
    # (not checked: "Traceback" absent from stderr; run alone, Prefect's console handler may
    # still hold an earlier test's closed capture stream and print a logging error there)
    assert re.search(r"^train: FAILED \(\d+\.\d s\): HistoryError", captured.out, re.M)
    assert "stage(s) train failed" in captured.err
    # each stage's headline, in the order the stages ran, each with its time
    heads = re.findall(r"^(\w+)(?::| \(\d+\.\d s\))", captured.out, re.M)
    assert heads == ["ingest", "ingest", "train", "plan", "report", "warehouse"], heads
    assert re.search(r"^plan \(\d+\.\d s\): run plan-", captured.out, re.M)


def test_ctrl_c_inside_a_stage_query_stops_the_run(prefect_harness, tmp_path, db_path, monkeypatch, capsys):
    """DuckDB turns Ctrl-C into RuntimeError('Query interrupted'): that is the run's interrupt,
    not a stage failure after which plan and report go on."""
    from pipelines.flows import run as run_module
    from pipelines.synth.files import write_fleet

    write_fleet(tmp_path / "fleet", nodes=3, days=2, seed=0, telemetry=False)
    ran = []

    def fake(stage: str):
        def flow(db_path: str, **_: object) -> dict:
            ran.append(stage)
            if stage == "train":
                raise RuntimeError("Query interrupted")
            return {}
        return flow

    monkeypatch.setattr(run_module, "stage_flow", fake)
    rc = cli.main(["run", "--db", str(db_path), "--input", str(tmp_path / "fleet"), "--stages", "train,plan"])
    assert (rc, ran) == (130, ["train"])
    assert "interrupted" in capsys.readouterr().err


def test_run_reports_an_unusable_input_file_like_ingest(prefect_harness, tmp_path, db_path, capsys):
    """A utilization.csv without its capacity column: exit 2 and the file and problem named,
    as `headroom ingest` says it, not a traceback; -v may follow the subcommand."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "utilization.csv").write_text("ts,cluster,pool,node_id,resource,used\n2026-01-01,c,p,n,cpu,1\n")
    rc = cli.main(["run", "--db", str(db_path), "--input", str(folder), "--stages", "none"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "utilization.csv" in err and "capacity" in err and "Traceback" not in err
    assert cli._verbose_first(["run", "-v", "--db", "x"]) == ["-v", "run", "--db", "x"]
    assert cli._verbose_first(["run", "-vvv"]) == ["-vvv", "run"]
    assert cli._verbose_first(["ingest", "--", "-v"]) == ["ingest", "--", "-v"]  # a file named -v


def test_the_hourly_ingest_waits_for_files_and_a_bad_one_holds_back_no_other(prefect_harness, tmp_path):
    """serve's ingest-hourly (run_flow with no stages): an empty drop folder is a quiet hour;
    a bad file fails the run, named, after the good ones went in (and it is tried again)."""
    from pipelines.flows.ingest import IngestBatchError
    from pipelines.flows.run import run_flow
    from pipelines.store import warehouse

    drop, db = tmp_path / "drop", tmp_path / "w.duckdb"
    drop.mkdir()
    assert run_flow(str(db), str(drop), stages=[]) == {"ingest": {"files": [], "summary": None}}
    (drop / "utilization-a.csv").write_bytes(bytes(range(256)) * 4)  # not a CSV at all
    (drop / "utilization-b.csv").write_text("ts,cluster,pool,node_id,resource,used,capacity\n"
                                            "2026-01-05T13:00:00Z,c,p,n1,cpu,1,8\n")
    with pytest.raises(IngestBatchError, match=r"1 of 2 file\(s\) not ingested .*utilization-a\.csv") as err:
        run_flow(str(db), str(drop), stages=[])
    assert "\x00" not in str(err.value)  # the binary header is not printed
    with warehouse.open_warehouse(db) as con:
        assert con.execute("SELECT count(*) FROM utilization").fetchone()[0] == 1


def test_run_input_takes_raw_exports_recognised_by_content(prefect_harness, tmp_path, db_path, capsys):
    """A folder of what users have, no file named for its kind: a GWA-T-12 trace folder, an
    AWS describe-spot-price-history page and a DCGM query_range export. `run --input` reads
    each as `ingest` would (the GWA files' pool is their folder), and names the file it
    cannot place."""
    import json

    from pipelines.store import warehouse as wh
    from tests.pipelines.ingest_files import prom, write

    gwa = ("Timestamp [ms];\tCPU cores;\tCPU capacity provisioned [MHZ];\tCPU usage [MHZ];\tCPU usage [%];\t"
           "Memory capacity provisioned [KB];\tMemory usage [KB];\tDisk read throughput [KB/s];\t"
           "Disk write throughput [KB/s];\tNetwork received throughput [KB/s];\tNetwork transmitted throughput [KB/s]\n"
           "1372629804;\t2;\t5851.9989;\t2925.99945;\t50.0;\t8388608.0;\t1048576.0;\t0;\t0;\t0;\t0\n")
    drop = tmp_path / "exports"
    (drop / "rnd-2013-07").mkdir(parents=True)
    write(drop / "rnd-2013-07" / "1.csv", gwa)
    write(drop / "rnd-2013-07" / "2.csv", gwa.replace("2925.99945", "1000.0"))  # (same bytes: one file)
    write(drop / "spot.json", json.dumps({"SpotPriceHistory": [
        {"AvailabilityZone": "us-east-1a", "InstanceType": "p4d.24xlarge", "ProductDescription": "Linux/UNIX",
         "SpotPrice": "9.5", "Timestamp": "2026-01-01T00:00:00+00:00"}]}))
    labels = {"Hostname": "node-1", "gpu": "0", "UUID": "GPU-aaa"}
    write(drop / "dcgm.json", prom([{"metric": {"__name__": "DCGM_FI_DEV_GPU_TEMP", **labels},
                                     "values": [[1767225600, "65"]]}]))
    write(drop / "notes.csv", "a,b\n1,2\n")
    assert cli.main(["run", "--db", str(db_path), "--input", str(drop), "--stages", "none"]) == 0
    with wh.open_warehouse(db_path) as con:
        util = con.execute("SELECT DISTINCT cluster, pool, node_id FROM utilization ORDER BY node_id").fetchall()
        assert util == [("exports", "rnd-2013-07", "vm1"), ("exports", "rnd-2013-07", "vm2")]
        assert con.execute("SELECT count(*) FROM spot_prices").fetchone()[0] == 1
        assert con.execute("SELECT metric FROM device_telemetry").fetchall() == [("gpu_temp",)]


def test_generate_refuses_a_span_past_what_pandas_holds(tmp_path, capsys):
    assert cli.main(["generate", "--out", str(tmp_path / "g"), "--start", "2262-04-10"]) == 2
    assert "28 days from it leave the years 1678-2261" in capsys.readouterr().err
    assert not (tmp_path / "g").exists()


def test_train_names_a_dask_address_nothing_answers(db_path, monkeypatch, capsys):
    with warehouse.open_warehouse(db_path):
        pass
    monkeypatch.setenv("HEADROOM_DASK_ADDRESS", "tcp://127.0.0.1:1")
    assert cli.main(["train", "--db", str(db_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "HEADROOM_DASK_ADDRESS=tcp://127.0.0.1:1: no Dask scheduler answers" in err


def test_run_refuses_fleet_options_beside_input(tmp_path, db_path, capsys):
    assert cli.main(["run", "--db", str(db_path), "--input", str(tmp_path), "--nodes", "5"]) == 2
    assert "--nodes shape a generated fleet; with --input the files are the fleet" in capsys.readouterr().err
