"""Alert deliveries claimed by one run at a time: overlapping runs, lapsed claims, migrations."""
from __future__ import annotations

import json
from datetime import datetime

import pandas as pd

from anomaly.alert import Alert
from pipelines.detect import alerts as al
from pipelines.store.warehouse import query
from tests.pipelines.alert_servers import T0, T1, T2, before_t0, fault, fault_at


def _claim(run: str, at: datetime, minutes: int = 10) -> al.Claim:
    return al.Claim(run, at, at + pd.Timedelta(minutes=minutes))


def test_two_runs_reading_pending_deliveries_at_once_send_each_once(con, tmp_path):
    """Run A reads its pending deliveries and sends them with the warehouse closed; run B
    reads meanwhile. B must not get what A is sending. Each claims on the wall clock: A is a
    replay (its clock half an hour behind B's), which must not make its claim look lapsed."""
    jl = al.JsonlSink(tmp_path / "alerts.jsonl")
    al.sync_alerts(con, "hardware_fault", [fault("a"), fault("b")], T0, [jl.name])
    a = al.pending_batches(con, [jl], T0)
    b = al.pending_batches(con, [jl], T2)
    assert len(a[0].payload) == 2 and b[0].payload == []
    al.send_batches(a)
    al.send_batches(b)
    assert al.record_batches(con, b, T2) == {"jsonl": 0}
    assert al.record_batches(con, a, T0) == {"jsonl": 2}
    ids = [json.loads(x)["delivery_id"] for x in jl.path.read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 2
    left = query(con, "SELECT DISTINCT state, claimed_by, claimed_until FROM alert_deliveries")
    assert left.to_dict("records") == [{"state": "delivered", "claimed_by": None, "claimed_until": pd.NaT}]
    assert al.deliver_pending(con, [jl], T2) == {"jsonl": 0}  # and nothing later


def test_an_alert_that_fires_again_while_its_resolution_is_in_flight_waits_for_it(con, tmp_path):
    """Run A sends an alert's firing and resolution (the sink was down for both); meanwhile run
    B sees it fire again. B's new firing replaces the row A claimed: held for A, it goes out
    only after A has recorded, so the receiver ends on 'firing', as the alert is."""
    jl = al.JsonlSink(tmp_path / "alerts.jsonl")
    al.sync_alerts(con, "hardware_fault", [fault()], T0, [jl.name])
    al.sync_alerts(con, "hardware_fault", [], T1, [jl.name])
    a = al.pending_batches(con, [jl], T1)
    assert [r["status"] for r in a[0].payload] == ["firing", "resolved"]
    al.sync_alerts(con, "hardware_fault", [fault()], T2, [jl.name])  # run B, while A sends
    b = al.pending_batches(con, [jl], T2)
    assert b[0].payload == []  # held for A
    al.send_batches(a)
    assert al.record_batches(con, a, T1) == {"jsonl": 0}  # what A claimed was re-queued meanwhile
    assert al.deliver_pending(con, [jl], T2) == {"jsonl": 1}
    said = [(x["status"], x["starts_at"]) for x in map(json.loads, jl.path.read_text().splitlines())]
    assert said[-1] == ("firing", "2026-01-10T12:30:00.000000Z") and [s for s, _ in said] == ["firing", "resolved",
                                                                                              "firing"]


def test_a_claim_left_by_a_run_that_died_lapses_and_the_alert_goes_out(con, tmp_path):
    jl = al.JsonlSink(tmp_path / "alerts.jsonl")
    al.sync_alerts(con, "hardware_fault", [fault()], T0, [jl.name])
    wall = datetime(2026, 1, 10, 12, 1)
    assert len(al.pending_batches(con, [jl], T0, _claim("died", wall))[0].payload) == 1  # then it died
    assert al.pending_batches(con, [jl], T0, _claim("early", wall + pd.Timedelta(minutes=9)))[0].payload == []
    late = al.pending_batches(con, [jl], T1, _claim("late", wall + pd.Timedelta(minutes=10)))
    al.send_batches(late)
    assert al.record_batches(con, late, T1) == {"jsonl": 1}
    assert len(jl.path.read_text().splitlines()) == 1
    assert query(con, "SELECT state FROM alert_deliveries")["state"].tolist() == ["delivered"]


def test_a_run_whose_claim_lapsed_does_not_settle_what_another_run_took_over(con, tmp_path):
    """A was so slow its claim lapsed and B claimed the delivery; A's send then failed: the
    delivery is B's to record (B sent it), not reset to pending by A."""
    jl = al.JsonlSink(tmp_path / "alerts.jsonl")
    al.sync_alerts(con, "hardware_fault", [fault()], T0, [jl.name])
    wall = datetime(2026, 1, 10, 12, 1)
    a = al.pending_batches(con, [jl], T0, _claim("a", wall))
    b = al.pending_batches(con, [jl], T1, _claim("b", wall + pd.Timedelta(minutes=11)))
    al.send_batches(b)
    al.record_batches(con, b, T1)
    a[0].error = "timed out"
    assert al.record_batches(con, a, T0) == {"jsonl": 0}
    assert query(con, "SELECT state, attempts, last_error FROM alert_deliveries").to_dict("records") == [
        {"state": "delivered", "attempts": 1, "last_error": None}]


def test_a_failed_send_releases_its_claim_for_the_next_run(con):
    sink = al.WebhookSink("http://127.0.0.1:9", timeout_s=0.5, retries=0, name="hook")
    al.sync_alerts(con, "hardware_fault", [fault()], T0, [sink.name])
    wall = datetime(2026, 1, 10, 12, 1)
    failed = al.pending_batches(con, [sink], T0, _claim("a", wall))
    al.send_batches(failed)
    al.record_batches(con, failed, T0)
    assert query(con, "SELECT state, claimed_by FROM alert_deliveries").to_dict("records") == [
        {"state": "pending", "claimed_by": None}]
    # the next run, a minute later (inside the lease), tries it again
    assert len(al.pending_batches(con, [sink], T1, _claim("b", wall + pd.Timedelta(minutes=1)))[0].payload) == 1


def test_a_resolution_queued_while_the_firing_is_being_sent_waits_for_it(con, tmp_path):
    """Run A is sending an alert's firing; run B resolves the alert meanwhile. B leaves the
    alert to A rather than send the resolution ahead of the firing still on its way."""
    jl = al.JsonlSink(tmp_path / "alerts.jsonl")
    al.sync_alerts(con, "hardware_fault", [fault()], T0, [jl.name])
    wall = datetime(2026, 1, 10, 12, 1)
    a = al.pending_batches(con, [jl], T0, _claim("a", wall))
    al.sync_alerts(con, "hardware_fault", [], T1, [jl.name])
    assert al.pending_batches(con, [jl], T1, _claim("b", wall + pd.Timedelta(minutes=1)))[0].payload == []
    al.send_batches(a)
    al.record_batches(con, a, T0)
    assert al.deliver_pending(con, [jl], T2) == {"jsonl": 1}
    assert [json.loads(x)["status"] for x in jl.path.read_text().splitlines()] == ["firing", "resolved"]


def test_a_firing_delivered_late_says_what_it_fired_with(con, server, tmp_path):
    """Warning at 0.6 while the sinks were down, critical at 0.9 the next run: delivered
    together, the firing says warning at 0.6 (and has the id it would have had on time), the
    escalation critical at 0.9 from warning."""
    jl = al.JsonlSink(tmp_path / "alerts.jsonl")
    ontime = al.JsonlSink(tmp_path / "ontime.jsonl", name="ontime")
    am = al.AlertmanagerSink(server.url, retries=0, clock=before_t0)
    warning = Alert(kind="hardware_fault", entity="g1", window_start=pd.Timestamp("2026-01-10"),
                    window_end=pd.Timestamp("2026-01-11"), severity="warning", probability=0.6, summary="maybe")
    critical = Alert(kind="hardware_fault", entity="g1", window_start=pd.Timestamp("2026-01-10"),
                     window_end=pd.Timestamp("2026-01-11"), severity="critical", probability=0.9, summary="soon")
    al.sync_alerts(con, "hardware_fault", [warning], T0, [jl.name, ontime.name, am.name])
    al.deliver_pending(con, [ontime], T0)  # the other sinks were down
    al.sync_alerts(con, "hardware_fault", [critical], T1, [jl.name, ontime.name, am.name])
    al.deliver_pending(con, [jl, am], T2)
    lines = [json.loads(x) for x in jl.path.read_text().splitlines()]
    assert [(x["status"], x["severity"], x["probability"], x["summary"]) for x in lines] == [
        ("firing", "warning", 0.6, "maybe"), ("escalated", "critical", 0.9, "soon")]
    assert lines[1]["previous_severity"] == "warning"
    on_time = json.loads(ontime.path.read_text().splitlines()[0])
    assert lines[0]["delivery_id"] == on_time["delivery_id"]  # a receiver can drop a copy sent late
    posted = [p for _, body in server.bodies for p in body]
    assert [p["labels"]["severity"] for p in posted] == ["warning", "warning", "critical"]  # fired, ended, fired
    assert posted[0]["annotations"]["probability"] == "0.600"


def test_a_sink_added_in_the_run_that_escalates_hears_the_firing_then_the_step_up(con, tmp_path):
    first = al.JsonlSink(tmp_path / "first.jsonl", name="first")
    late = al.JsonlSink(tmp_path / "late.jsonl", name="late")
    al.sync_alerts(con, "hardware_fault", [fault_at("warning", 0.6)], T0, [first.name])
    al.deliver_pending(con, [first], T0)
    al.sync_alerts(con, "hardware_fault", [fault_at("critical", 0.9)], T1, [first.name, late.name])
    al.deliver_pending(con, [first, late], T1)
    heard = [json.loads(x) for x in late.path.read_text().splitlines()]
    assert [(x["status"], x["severity"], x.get("previous_severity")) for x in heard] == [
        ("firing", "warning", None), ("escalated", "critical", "warning")]


def test_a_warehouse_from_before_claims_is_migrated_and_its_pending_deliveries_go_out(tmp_path):
    """alert_deliveries without the claim and transition columns: migrating adds them, and a
    delivery pending from then goes out once, built from the alert's row as it was."""
    import shutil

    from pipelines.store import warehouse
    old_schema = tmp_path / "schema"
    old_schema.mkdir()
    for version, _name, path in warehouse.migrations():
        if version < 40:
            shutil.copy(path, old_schema / path.name)
    db = tmp_path / "old.duckdb"
    con = warehouse.connect(db, migrate_schema=False)
    try:
        warehouse.migrate(con, old_schema)
        assert "claimed_by" not in warehouse.table_columns(con, "alert_deliveries")
        con.execute("INSERT INTO alerts (fingerprint, kind, entity, severity, probability, summary, status, "
                    "starts_at, updated_at) VALUES ('fp', 'hardware_fault', 'g1', 'critical', 0.9, 's', 'firing', "
                    "?, ?)", [T0, T0])
        con.execute("INSERT INTO alert_deliveries (fingerprint, sink, status, state, updated_at) "
                    "VALUES ('fp', 'jsonl', 'firing', 'pending', ?)", [T0])
    finally:
        con.close()
    jl = al.JsonlSink(tmp_path / "alerts.jsonl")
    with warehouse.open_warehouse(db) as con:
        assert {"claimed_by", "claimed_until", "severity"} <= set(warehouse.table_columns(con, "alert_deliveries"))
        assert al.deliver_pending(con, [jl], T1) == {"jsonl": 1}
        assert al.deliver_pending(con, [jl], T2) == {"jsonl": 0}
    sent = [json.loads(x) for x in jl.path.read_text().splitlines()]
    assert [(x["status"], x["severity"], x["probability"]) for x in sent] == [("firing", "critical", 0.9)]


def test_a_claim_that_conflicts_with_another_threads_write_leaves_the_deliveries_for_later(con, tmp_path):
    """Two runs in one process claim at once: DuckDB refuses the second write to the rows the
    first has not committed yet. That run then claims nothing (and says so), not fail."""
    jl = al.JsonlSink(tmp_path / "alerts.jsonl")
    al.sync_alerts(con, "hardware_fault", [fault()], T0, [jl.name])
    other = con.cursor()
    other.execute("BEGIN")
    other.execute("UPDATE alert_deliveries SET claimed_by = 'other', claimed_until = ?", [T2])
    assert al.pending_batches(con, [jl], T0)[0].payload == []
    other.execute("ROLLBACK")
    assert al.deliver_pending(con, [jl], T1) == {"jsonl": 1}


def test_a_claim_outlasts_the_sinks_slowest_send():
    slow = al.WebhookSink("http://127.0.0.1:9", timeout_s=60, retries=4)
    assert al.claim_lease([], 0) == al.CLAIM_LEASE_MIN
    assert al.claim_lease([slow], 30) > pd.Timedelta(seconds=5 * 60 + 30)


def test_an_interrupted_send_releases_its_claim_for_the_next_run(tmp_path):
    """Ctrl-C while a receiver is being sent to: the next run sends the alerts at once, not
    after the claim's lease (at least once: the receiver may see them twice)."""
    import pytest

    from pipelines.detect import jobs
    from pipelines.store.warehouse import open_warehouse

    class Interrupted(al.JsonlSink):
        def send(self, alerts: list) -> None:
            raise KeyboardInterrupt

    db = str(tmp_path / "w.duckdb")
    jl = al.JsonlSink(tmp_path / "alerts.jsonl")
    with open_warehouse(db) as con:
        al.sync_alerts(con, "hardware_fault", [fault("a"), fault("b")], T0, [jl.name])
    with pytest.raises(KeyboardInterrupt):
        jobs.deliver(db, T0, [Interrupted(jl.path)])
    with open_warehouse(db) as con:
        left = query(con, "SELECT state, claimed_by, last_error FROM alert_deliveries")
    assert set(left["state"]) == {"pending"} and left["claimed_by"].isna().all()
    assert set(left["last_error"]) == {"interrupted before the receiver answered"}
    assert jobs.deliver(db, T1, [jl])["delivered"] == {"jsonl": 2}


def test_a_warehouse_that_recorded_040_under_another_name_gets_its_columns(tmp_path):
    """Main carried a 040_sink_targets for six minutes before 040_delivery_claims took the
    number: a warehouse migrated then skipped 040's columns and every detect failed."""
    from pipelines.store import warehouse
    db = tmp_path / "old.duckdb"
    con = warehouse.connect(db, migrate_schema=False)
    try:
        old_schema = tmp_path / "schema"
        old_schema.mkdir()
        for version, _name, path in warehouse.migrations():
            if version < 40:
                (old_schema / path.name).write_text(path.read_text())
        (old_schema / "040_sink_targets.sql").write_text(
            "DELETE FROM alert_deliveries WHERE sink IN ('jsonl', 'webhook', 'alertmanager') AND state = 'pending';")
        warehouse.migrate(con, old_schema)
    finally:
        con.close()
    with warehouse.open_warehouse(db) as con:
        assert {"claimed_by", "claimed_until", "severity", "probability", "summary"} <= set(
            warehouse.table_columns(con, "alert_deliveries"))


def test_a_claim_of_a_killed_run_of_this_machine_is_released_at_once(con, tmp_path):
    """A detect killed mid-delivery held its alerts for the whole lease (10 minutes) while
    reruns said another run was sending them; a live run's claim, or another machine's, holds."""
    import os
    import subprocess

    dead = subprocess.Popen(["true"])
    dead.wait()
    jl = al.JsonlSink(tmp_path / "alerts.jsonl")
    al.sync_alerts(con, "hardware_fault", [fault("a"), fault("b"), fault("c")], T0, [jl.name])
    until = (pd.Timestamp.now("UTC").tz_localize(None) + pd.Timedelta(hours=1)).to_pydatetime()
    owners = {"a": f"{al.HOST}:{dead.pid}-0123456789ab", "b": f"{al.HOST}:{os.getppid()}-0123456789ab",
              "c": f"elsewhere:{dead.pid}-0123456789ab"}
    fps = query(con, "SELECT fingerprint, entity FROM alerts").set_index("entity")["fingerprint"]
    for entity, owner in owners.items():
        con.execute("UPDATE alert_deliveries SET claimed_by = ?, claimed_until = ? WHERE fingerprint = ?",
                    [owner, until, fps[[e for e in fps.index if e.endswith(entity)][0]]])
    assert al.deliver_pending(con, [jl], T1) == {"jsonl": 1}
    sent = [json.loads(x) for x in jl.path.read_text().splitlines()]
    assert [x["entity"][-1] for x in sent] == ["a"]


def test_a_jsonl_batch_written_but_not_recorded_is_not_written_again(con, tmp_path):
    """SIGTERM after the lines went into the file, before the run marked them delivered: the
    run recorded them pending ("interrupted before the receiver answered") and the next run
    appended the same deliveries again. The file is asked what it already holds."""
    jl = al.JsonlSink(tmp_path / "alerts.jsonl")
    al.sync_alerts(con, "hardware_fault", [fault("a"), fault("b")], T0, [jl.name])
    batches = al.pending_batches(con, [jl], T0)
    jl.send(batches[0].payload)  # in the file ...
    batches[0].error = "interrupted before the receiver answered"  # ... as the interrupted run recorded it
    al.record_batches(con, batches, T0)
    assert al.deliver_pending(con, [jl], T1) == {"jsonl": 2}
    ids = [json.loads(x)["delivery_id"] for x in jl.path.read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 2
    al.sync_alerts(con, "hardware_fault", [], T2, [jl.name])  # their resolutions are new: written
    assert al.deliver_pending(con, [jl], T2) == {"jsonl": 2} and len(jl.path.read_text().splitlines()) == 4
