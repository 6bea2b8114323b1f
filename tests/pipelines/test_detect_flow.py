"""The detect flow end to end on a small synthetic warehouse file."""
from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest

from anomaly.cusum import CusumDetector, CusumPolicy
from anomaly.fault_features import FaultPolicy
from pipelines.detect import alerts as alerting
from pipelines.flows.detect import detect_flow
from pipelines.store import detection as detect_store
from pipelines.store import warehouse
from pipelines.synth.fleet import generate_fleet

TABLES = {"utilization": "utilization", "telemetry": "device_telemetry", "failures": "failures",
          "spot_prices": "spot_prices", "catalog": "instance_catalog"}


def load(con, fleet: dict[str, pd.DataFrame], cut: pd.Timestamp | None = None) -> None:
    for key, table in TABLES.items():
        frame = fleet[key]
        if cut is not None and "ts" in frame.columns:
            frame = frame[frame["ts"] < cut]
        cols = [c for c in warehouse.table_columns(con, table) if c in frame.columns]
        con.register("_load", frame[cols])
        con.execute(f"INSERT INTO {table} ({', '.join(cols)}) SELECT {', '.join(cols)} FROM _load")
        con.unregister("_load")


@pytest.fixture(scope="module")
def fleet() -> dict[str, pd.DataFrame]:
    return generate_fleet(nodes=4, days=10, seed=3)


def test_detect_flow_resumes_and_never_repeats(prefect_harness, db_path: Path, tmp_path: Path, fleet):
    cut = fleet["utilization"]["ts"].min() + pd.Timedelta(days=8)
    with warehouse.open_warehouse(db_path) as con:
        load(con, fleet, cut)
    jsonl = tmp_path / "alerts.jsonl"
    t0 = cut.to_pydatetime()  # detection as the data arrives (a prediction about a past window is not raised)
    out = detect_flow(str(db_path), now=t0, jsonl_path=str(jsonl))
    assert set(out) >= {"bursts", "faults", "spikes", "delivered", "firing", "pending_deliveries"}
    assert out["pending_deliveries"] == 0
    with warehouse.open_warehouse(db_path) as con:
        states = detect_store.load_states(con, "cusum")
        series = detect_store.demand_series(con)
        n_alerts = con.execute("SELECT count(*) FROM alerts").fetchone()[0]
        n_models = con.execute("SELECT count(*) FROM models WHERE kind = 'fault_predictor'").fetchone()[0]
        fault_metrics = json.loads(con.execute("SELECT metrics FROM models WHERE kind = 'fault_predictor'").fetchone()[0])
        n_spike_models = con.execute("SELECT count(*) FROM models WHERE kind = 'spike_predictor'").fetchone()[0]
    assert n_models == out["faults"]["trained"] == 1  # the fleet has failures to learn from
    assert n_spike_models == out["spikes"]["trained"] == 1  # ... and spikes
    # the fault model says what its threshold gave on out-of-fold scores: what to expect of its alerts
    assert {"threshold", "out_of_fold"} <= set(fault_metrics)
    assert fault_metrics["out_of_fold"]["events"] > 0 and 0 <= fault_metrics["out_of_fold"]["recall"] <= 1
    assert set(states) == set(series["unique_id"])
    assert all(st.last_ts == series["ds"].max() for st in states.values())
    lines = jsonl.read_text().splitlines() if jsonl.exists() else []
    assert len(lines) == out["delivered"][f"jsonl:{jsonl.resolve()}"]
    with warehouse.open_warehouse(db_path) as con:
        predicted = warehouse.query(con, "SELECT kind, window_start, window_end, labels, summary FROM alerts "
                                         "WHERE kind IN ('hardware_fault', 'price_spike')")
    assert "price_spike" in set(predicted["kind"])
    # a window covers the whole predicted span: two horizons from the floored scoring time
    span = predicted["window_end"] - predicted["window_start"]
    assert (span == predicted["kind"].map({"hardware_fault": pd.Timedelta("48h"),
                                           "price_spike": pd.Timedelta("12h")})).all()

    # the same warehouse again: nothing new to detect, nothing delivered twice
    again = detect_flow(str(db_path), now=t0 + pd.Timedelta(minutes=15), jsonl_path=str(jsonl))
    assert again["bursts"]["events"] == 0 and again["bursts"]["fired"] == 0
    assert again["faults"]["fired"] == 0 and again["spikes"]["fired"] == 0
    assert again["faults"]["trained"] == 0  # the registered models are fresh: reused
    assert again["spikes"]["trained"] == 0
    assert again["delivered"][f"jsonl:{jsonl.resolve()}"] == 0
    # another file (detect --jsonl elsewhere) hears the alerts already firing, once
    other = tmp_path / "other.jsonl"
    elsewhere = detect_flow(str(db_path), now=t0 + pd.Timedelta(minutes=20), jsonl_path=str(other))
    with warehouse.open_warehouse(db_path) as con:
        firing = con.execute("SELECT count(*) FROM alerts WHERE status = 'firing'").fetchone()[0]
    assert firing > 0
    assert elsewhere["delivered"][f"jsonl:{other.resolve()}"] == firing == len(other.read_text().splitlines())
    with warehouse.open_warehouse(db_path) as con:
        assert con.execute("SELECT count(*) FROM alerts").fetchone()[0] == n_alerts

    # new data arrives: detection continues from the saved states
    with warehouse.open_warehouse(db_path) as con:
        con.execute("DELETE FROM utilization")
        con.execute("DELETE FROM device_telemetry")
        con.execute("DELETE FROM failures")
        con.execute("DELETE FROM spot_prices")
        con.execute("DELETE FROM instance_catalog")
        load(con, fleet)
    # (the clock moves on with the data: a run's clock is the end of what it may read)
    later = detect_flow(str(db_path), now=fleet["utilization"]["ts"].max().to_pydatetime(), jsonl_path=str(jsonl),
                        detectors=["bursts"])
    assert set(later) == {"bursts", "delivered", "firing", "pending_deliveries"}
    with warehouse.open_warehouse(db_path) as con:
        resumed = detect_store.load_states(con, "cusum")
    assert all(st.last_ts > states[uid].last_ts for uid, st in resumed.items())
    # continued, not started over: the states are those one pass of the detector gives from the
    # saved ones, refitted once a day after their last calibration (the flow's default)
    with warehouse.open_warehouse(db_path) as con:
        series_now = detect_store.demand_series(con)
    _ev, expected = CusumDetector(CusumPolicy(season_length=24)).detect(series_now, states=states)
    assert {u: st.to_dict() for u, st in resumed.items()} == {u: st.to_dict() for u, st in expected.items()}
    assert all((st.calibrated_at - states[uid].calibrated_at) in (pd.Timedelta("1D"), pd.Timedelta("2D"))
               for uid, st in resumed.items())
    for line in jsonl.read_text().splitlines():
        assert json.loads(line)["status"] in ("firing", "resolved")


def test_detect_flow_rejects_unknown_detector(prefect_harness, db_path: Path):
    with pytest.raises(ValueError, match="unknown detector"):
        detect_flow(str(db_path), detectors=["tea-leaves"])


def test_a_sink_flag_keeps_the_other_configured_sinks(prefect_harness, db_path: Path, tmp_path: Path,
                                                       monkeypatch):
    """`--webhook` on the command line must not switch off the JSONL sink set in the environment."""
    monkeypatch.setenv("HEADROOM_ALERT_JSONL", str(tmp_path / "env.jsonl"))
    out = detect_flow(str(db_path), now=datetime(2026, 2, 1), webhook_url="http://127.0.0.1:9/hook",
                      detectors=["bursts"])
    assert set(out["delivered"]) == {f"jsonl:{(tmp_path / 'env.jsonl').resolve()}",
                                     alerting.url_sink_name("webhook", "http://127.0.0.1:9/hook")}


def test_detect_cli_refuses_a_sink_that_can_never_work(db_path: Path, tmp_path: Path, capsys):
    from pipelines.cli import main

    with warehouse.open_warehouse(db_path):
        pass
    assert main(["detect", "--db", str(db_path), "--webhook", "127.0.0.1:8080/hook"]) == 2
    assert "must start with http" in capsys.readouterr().err
    assert main(["detect", "--db", str(db_path), "--jsonl", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_detect_exits_1_when_a_detector_is_skipped(prefect_harness, db_path: Path, fleet, monkeypatch, capsys):
    """Spot prices too many to rate hourly: the other detectors still run and deliver, and the
    command says so and exits 1, so a scheduler sees it."""
    from anomaly import spike_features
    from pipelines.cli import main

    with warehouse.open_warehouse(db_path) as con:
        load(con, fleet)
    monkeypatch.setattr(spike_features, "MAX_GRID_ROWS", 10)
    assert main(["detect", "--db", str(db_path), "--detectors", "bursts,spikes"]) == 1
    captured = capsys.readouterr()
    assert "  bursts  events" in captured.out and "error: spikes detection skipped: spot prices:" in captured.err


def test_detect_cli_keeps_alert_urls_out_of_flow_parameters(db_path: Path, monkeypatch):
    """Prefect stores (and shows) flow parameters in plain text: the CLI hands the URLs to
    the flow through its own environment instead."""
    import pipelines.flows.detect as detect_module
    from pipelines.cli import main

    with warehouse.open_warehouse(db_path):
        pass
    seen = {}

    import os

    def fake_flow(**kwargs):
        seen.update(kwargs, env=os.environ.get("HEADROOM_ALERT_WEBHOOK"))
        return {}

    monkeypatch.setattr(detect_module, "detect_flow", fake_flow)
    monkeypatch.delenv("HEADROOM_ALERT_WEBHOOK", raising=False)
    url = "https://hooks.example.com/services/T0/B0/XSECRETX"
    assert main(["detect", "--db", str(db_path), "--webhook", url]) == 0
    assert seen.pop("env") == url and url not in json.dumps(seen, default=str)
    # for that run only: a later run in the same process (a test's `headroom run`) posted to it too
    assert "HEADROOM_ALERT_WEBHOOK" not in os.environ


def test_delivery_does_not_hold_the_warehouse_while_sending(db_path: Path):
    """A slow receiver must not keep another process (an hourly ingest) from writing."""
    import subprocess
    import sys

    from anomaly.alert import Alert
    from pipelines.flows.detect import deliver

    class ProbeSink:
        """A receiver that, while it is being sent to, has another process write the warehouse."""

        name = "probe"

        def __init__(self) -> None:
            self.rc: int | None = None

        def send(self, alerts: list) -> None:
            code = ("import sys; from pipelines.store import warehouse; "
                    "warehouse.connect(sys.argv[1], lock_timeout_s=2).close()")
            self.rc = subprocess.run([sys.executable, "-c", code, str(db_path)], capture_output=True).returncode

    alert = Alert(kind="hardware_fault", entity="g1", window_start=pd.Timestamp("2026-01-10"),
                  window_end=pd.Timestamp("2026-01-11"), severity="critical", probability=0.9)
    with warehouse.open_warehouse(db_path) as con:
        alerting.sync_alerts(con, "hardware_fault", [alert], datetime(2026, 1, 10), ["probe"])
    probe = ProbeSink()
    assert deliver.fn(str(db_path), datetime(2026, 1, 10), [probe]) == {"delivered": {"probe": 1}, "failed": {}}
    assert probe.rc == 0  # the other process got the warehouse while the alert was being sent


def test_the_burst_detector_reads_only_what_its_states_need(tmp_path: Path, monkeypatch):
    """After the first run, detect reads the calibration span (28 days) before the states'
    last refit, not the whole history: on 45 days the states and alerts equal those of a
    detector that reads everything, run after run."""
    from pipelines.detect import steps as detect_steps
    from pipelines.flows.detect import detect_bursts

    fleet = generate_fleet(nodes=3, days=40, seed=2, telemetry=False)
    policy = CusumPolicy()
    full_read = detect_steps.burst_read_since
    reads: dict[str, list] = {"bounded": [], "full": []}
    out = {}
    for name in ("bounded", "full"):
        db = tmp_path / f"{name}.duckdb"
        with warehouse.open_warehouse(db) as con:
            load(con, {**fleet, "utilization": fleet["utilization"].iloc[:0]})
        since = full_read if name == "bounded" else (lambda states, policy: None)
        monkeypatch.setattr(detect_steps, "burst_read_since",
                            lambda states, policy, f=since, r=reads[name]: r.append(f(states, policy)) or r[-1])
        start = fleet["utilization"]["ts"].min()
        for day in (33, 40):
            cut = start + pd.Timedelta(days=day)
            with warehouse.open_warehouse(db) as con:
                con.execute("DELETE FROM utilization")
                load(con, {**{k: fleet[k].iloc[:0] for k in TABLES}, "utilization": fleet["utilization"]}, cut)
            detect_bursts.fn(str(db), cut.to_pydatetime(), ["x"], policy)
        with warehouse.open_warehouse(db) as con:
            out[name] = (detect_store.load_states(con, "cusum"),
                         con.execute("SELECT fingerprint, status, starts_at, ends_at FROM alerts ORDER BY 1").fetchall())
    assert reads["bounded"][0] is None and all(r is not None for r in reads["bounded"][1:])
    assert reads["bounded"][-1] > start + pd.Timedelta(days=3)  # later runs skip the first days
    assert out["bounded"][0] == out["full"][0] and out["bounded"][1] == out["full"][1]
    assert out["bounded"][1]  # there were bursts to find


def test_training_a_model_does_not_hold_the_warehouse(db_path: Path, fleet, monkeypatch):
    """The fault model fits for minutes on a large fleet: meanwhile another process (the
    hourly ingest) must get the warehouse; the model is registered after."""
    import subprocess
    import sys

    from anomaly.faults import FaultPredictor
    from pipelines.flows.detect import train_fault_model

    with warehouse.open_warehouse(db_path) as con:
        load(con, fleet)
    rc: list[int] = []
    fit = FaultPredictor.fit

    def probing_fit(self, *args, **kwargs):
        code = ("import sys; from pipelines.store import warehouse; "
                "warehouse.connect(sys.argv[1], lock_timeout_s=2).close()")
        rc.append(subprocess.run([sys.executable, "-c", code, str(db_path)], capture_output=True).returncode)
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(FaultPredictor, "fit", probing_fit)
    assert train_fault_model.fn(str(db_path), datetime(2026, 1, 1), FaultPolicy(), "1D") is True
    assert rc and set(rc) == {0}  # the other process got the warehouse at each fit (and the new-device one's)
    with warehouse.open_warehouse(db_path) as con:
        assert con.execute("SELECT count(*) FROM models WHERE kind = 'fault_predictor'").fetchone()[0] == 1
        # the readings come with their ids as categoricals: a tenth of the memory of a string per row
        tel = detect_store.telemetry(con)
    assert isinstance(tel["device_id"].dtype, pd.CategoricalDtype) and tel["ts"].dtype == "datetime64[ns]"


def test_predictions_about_a_window_already_past_are_not_raised(prefect_harness, db_path: Path, tmp_path: Path,
                                                                 fleet):
    """A feed that stopped a month ago: its last spike and fault scores are about windows long
    over. A live detect raises none of them, and one still firing resolves."""
    with warehouse.open_warehouse(db_path) as con:
        load(con, fleet)
        end = detect_store.data_end(con)
    live = detect_flow(str(db_path), now=end, detectors=["spikes"], jsonl_path=str(tmp_path / "a.jsonl"))
    assert live["spikes"]["fired"] > 0
    month_later = detect_flow(str(db_path), now=end + pd.Timedelta(days=30), detectors=["spikes"],
                              jsonl_path=str(tmp_path / "a.jsonl"))
    assert month_later["spikes"]["fired"] == 0 and month_later["spikes"]["resolved"] == live["spikes"]["fired"]


def test_detect_as_of_replays_historical_data(db_path: Path, monkeypatch, capsys, fleet):
    import pipelines.flows.detect as detect_module
    from pipelines.cli import main

    with warehouse.open_warehouse(db_path) as con:
        load(con, fleet)
        end = detect_store.data_end(con)
    seen = []
    monkeypatch.setattr(detect_module, "detect_flow", lambda **kw: seen.append(kw.get("now")) or {})
    assert main(["detect", "--db", str(db_path), "--as-of", "data"]) == 0
    assert main(["detect", "--db", str(db_path), "--as-of", "2026-01-10T12:00:00+02:00"]) == 0
    assert main(["detect", "--db", str(db_path)]) == 0
    assert seen == [end, datetime(2026, 1, 10, 10, 0), None]
    assert main(["detect", "--db", str(db_path), "--as-of", "yesterday-ish"]) == 2
    assert "--as-of 'yesterday-ish' is not now or data, and is not a time" in capsys.readouterr().err
    # '' and NaT parse as NaT (a NOT NULL traceback); a future time registered models dated then,
    # fresh to every live run until that date; an empty --detectors ran all three
    for bad, said in (("", "--as-of '' is not now or data, and is not a time"), ("NaT", "--as-of 'NaT' is not now"),
                      ("2199-01-01", "--as-of '2199-01-01' is after both now and the data's end"),
                      ("2999-01-01", "--as-of '2999-01-01' is not now or data, and is not between 1970 and 2200")):
        assert main(["detect", "--db", str(db_path), "--as-of", bad]) == 2
        assert said in capsys.readouterr().err
    assert main(["detect", "--db", str(db_path), "--detectors", ","]) == 2
    assert "--detectors ',' names none" in capsys.readouterr().err
    assert len(seen) == 3  # no flow ran for any of them


def test_a_replay_as_of_a_time_sees_only_what_was_known_then(prefect_harness, db_path: Path, tmp_path: Path,
                                                             fleet):
    """detect with a clock T on the whole warehouse does what a live run at T on the data up
    to T did: the same CUSUM states (none read past T), models trained on the past only,
    the same alerts."""
    cut = fleet["utilization"]["ts"].min() + pd.Timedelta(days=8)
    t = (cut - pd.Timedelta(seconds=1)).to_pydatetime()  # the data up to t is the data before cut
    past = tmp_path / "past.duckdb"
    for path, until in ((db_path, None), (past, cut)):
        with warehouse.open_warehouse(path) as con:
            load(con, fleet, until)
    seen = {}
    for path in (db_path, past):
        detect_flow(str(path), now=t, jsonl_path=str(tmp_path / f"{path.stem}.jsonl"))
        with warehouse.open_warehouse(path) as con:
            seen[path.stem] = {
                "states": con.execute("SELECT unique_id, last_ts, state FROM detector_state ORDER BY ALL").fetchall(),
                "models": con.execute("SELECT kind, data_cutoff, params, metrics, created_at FROM models "
                                      "ORDER BY ALL").fetchall(),
                "alerts": con.execute("SELECT fingerprint, status, probability, summary FROM alerts "
                                      "ORDER BY ALL").fetchall(),
            }
    whole, known = seen[db_path.stem], seen["past"]
    assert known["states"] and known["models"] and known["alerts"]  # there is something to compare
    assert all(pd.Timestamp(last) < cut for _, last, _ in whole["states"])
    assert all(pd.Timestamp(cutoff) <= pd.Timestamp(t) for _, cutoff, _, _, _ in whole["models"])
    assert whole == known


def test_detect_exits_1_when_a_sink_fails_and_keeps_its_alerts_pending(prefect_harness, db_path: Path, fleet,
                                                                        capsys):
    """A webhook that is down: the alerts stay pending for the next run, and the command says
    so on stderr and exits 1, so that cron or a scheduler notices the sink is down."""
    import socket

    from pipelines.cli import main

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    with warehouse.open_warehouse(db_path) as con:
        load(con, fleet)
    code = main(["detect", "--db", str(db_path), "--detectors", "spikes", "--as-of", "data",
                 "--webhook", f"http://127.0.0.1:{port}/hook", "--json"])
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["spikes"]["fired"] > 0 and out["pending_deliveries"] == out["firing"] > 0
    assert code == 1 and f"error: alert sink webhook:127.0.0.1:{port}#" in captured.err
    assert "stay pending for the next run" in captured.err and "/hook" not in captured.err  # the path may be a secret


def test_two_detect_runs_at_once_send_a_pending_delivery_once(db_path: Path, tmp_path: Path):
    """Run A reads its pending deliveries and, while it sends them (the warehouse closed), run B,
    another process, delivers to the same sink: B must not send what A is sending (it would
    arrive twice, with one delivery_id), and both runs together leave it delivered."""
    import subprocess
    import sys

    from anomaly.alert import Alert
    from pipelines.flows.detect import deliver

    out = tmp_path / "alerts.jsonl"
    name = f"jsonl:{out.resolve()}"
    now = datetime(2026, 1, 10)

    class SlowSink:
        """Sink A: while it sends, run B (another process) runs the deliver step on the same sink."""

        def __init__(self) -> None:
            self.name, self.b = name, ""

        def send(self, alerts: list) -> None:
            code = ("import sys, json; from datetime import datetime; from pathlib import Path; "
                    "from pipelines.detect.alerts import JsonlSink; from pipelines.flows.detect import deliver; "
                    "print(json.dumps(deliver.fn(sys.argv[1], datetime(2026, 1, 10, 0, 5), "
                    "[JsonlSink(Path(sys.argv[2]), name=sys.argv[3])])))")
            b = subprocess.run([sys.executable, "-c", code, str(db_path), str(out), name],
                               capture_output=True, text=True)
            assert b.returncode == 0, b.stderr
            self.b = b.stdout
            alerting.JsonlSink(out, name=name).send(alerts)

    alert = Alert(kind="hardware_fault", entity="g1", window_start=pd.Timestamp("2026-01-10"),
                  window_end=pd.Timestamp("2026-01-11"), severity="critical", probability=0.9)
    with warehouse.open_warehouse(db_path) as con:
        alerting.sync_alerts(con, "hardware_fault", [alert], now, [name])
    a = SlowSink()
    assert deliver.fn(str(db_path), now, [a]) == {"delivered": {name: 1}, "failed": {}}
    ids = [json.loads(line)["delivery_id"] for line in out.read_text().splitlines()]
    assert len(ids) == 1, ids  # without a claim: B sent it too, [id, id]
    assert json.loads(a.b.strip().splitlines()[-1]) == {"delivered": {name: 0}, "failed": {}}
    with warehouse.open_warehouse(db_path) as con:
        assert con.execute("SELECT state FROM alert_deliveries").fetchall() == [("delivered",)]


def test_a_state_this_headroom_cannot_read_is_calibrated_afresh(con, caplog) -> None:
    """A newer headroom's state (a field this one does not know) stopped every burst run with
    a TypeError; now its series alone is left out, said, and calibrated as a new one."""
    from anomaly.cusum import CusumState

    frame = pd.DataFrame({"unique_id": "c/p/gpu", "ds": pd.date_range("2026-01-01", periods=24 * 21, freq="h"),
                          "y": [5.0 + (h % 24 > 8) for h in range(24 * 21)]})
    states = CusumDetector(CusumPolicy(season_length=24)).fit(frame).states_
    now = datetime(2026, 1, 22)
    detect_store.save_states(con, "cusum", {**states, "c/q/gpu": states["c/p/gpu"]}, now)
    # the same states again (a run that read nothing new, or a replay behind) write nothing
    assert detect_store.save_states(con, "cusum", states, datetime(2026, 1, 21)) == 0
    assert warehouse.query(con, "SELECT DISTINCT updated_at FROM detector_state").iloc[:, 0].tolist() == [now]
    newer = {**states["c/p/gpu"].to_dict(), "phase_memory": [1, 2]}
    con.execute("UPDATE detector_state SET state = ? WHERE unique_id = 'c/q/gpu'", [json.dumps(newer)])
    with pytest.raises(ValueError, match="fields this version does not know: phase_memory"):
        CusumState.from_dict(newer)
    with caplog.at_level("WARNING"):
        loaded = detect_store.load_states(con, "cusum")
    assert set(loaded) == {"c/p/gpu"}
    assert "c/q/gpu: its cusum state is not one this headroom reads" in caplog.text


def test_a_detector_or_sink_down_fails_a_served_detect_run_and_headroom_run(prefect_harness, db_path: Path,
                                                                           tmp_path: Path, fleet, monkeypatch,
                                                                           capsys):
    """A served detect run whose sink was down, or a detector skipped, ended Completed, and
    `headroom run` exited 0 on a failed sink: a scheduler never saw it."""
    import pipelines.flows.detect as detect_module
    import pipelines.flows.run as run_module
    from anomaly import spike_features
    from pipelines.cli import main

    with warehouse.open_warehouse(db_path) as con:
        load(con, fleet)
    monkeypatch.setattr(spike_features, "MAX_GRID_ROWS", 10)
    monkeypatch.setattr(detect_module, "in_deployed_run", lambda: True)
    with pytest.raises(detect_module.DetectDown, match="spikes detection skipped"):
        detect_flow(str(db_path), detectors=["bursts", "spikes"])
    down = {"detect": {"bursts": {"events": 0}, "delivery_failed": {"webhook:127.0.0.1:9": "refused"}}}
    monkeypatch.setattr(run_module, "run_flow", lambda *a, **k: down)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "utilization.csv").write_text("ts,cluster,pool,node_id,resource,used,capacity\n")
    assert main(["run", "--db", str(db_path), "--input", str(tmp_path / "in")]) == 1
    assert "alert sink webhook:127.0.0.1:9 failed" in capsys.readouterr().err
