"""Alert storage and delivery against a real local HTTP server (no mocks)."""
from __future__ import annotations

import json
from datetime import datetime

import pandas as pd
import pytest

from anomaly.alert import Alert
from pipelines.detect import alerts as al
from pipelines.detect.upgrade import adopt_kind_named
from pipelines.store.warehouse import query
from tests.pipelines.alert_servers import T0, T1, T2, Recorder, before_t0, fault, fault_at


def test_fire_dedup_then_resolve(con):
    assert al.sync_alerts(con, "hardware_fault", [fault()], T0, ["jsonl"]) == {"fired": 1, "updated": 0, "resolved": 0}
    # the same condition again: one row, same start, no new delivery
    assert al.sync_alerts(con, "hardware_fault", [fault(p=0.95)], T1, ["jsonl"])["updated"] == 1
    rows = query(con, "SELECT * FROM alerts")
    assert len(rows) == 1 and rows.loc[0, "status"] == "firing" and rows.loc[0, "probability"] == 0.95
    assert rows.loc[0, "starts_at"] == pd.Timestamp(T0)
    assert len(query(con, "SELECT * FROM alert_deliveries")) == 1
    # the condition clears: resolved, and a resolved delivery is queued
    assert al.sync_alerts(con, "hardware_fault", [], T2, ["jsonl"])["resolved"] == 1
    rows = query(con, "SELECT * FROM alerts")
    assert rows.loc[0, "status"] == "resolved" and rows.loc[0, "ends_at"] == pd.Timestamp(T2)
    d = query(con, "SELECT status, state FROM alert_deliveries ORDER BY status")
    assert list(d["status"]) == ["firing", "resolved"] and set(d["state"]) == {"pending"}


def test_a_replay_behind_a_later_run_leaves_that_runs_alerts_alone(con):
    """A replay as of T1 knows nothing of what a run as of T2 saw: alerts that run fired or
    renewed stay firing (resolved, the next run would fire one anew: a receiver hears it end
    and start again); one the T2 run no longer saw resolves as before."""
    al.sync_alerts(con, "hardware_fault", [fault("early"), fault("gone")], T0, [])
    al.sync_alerts(con, "hardware_fault", [fault("early"), fault("late")], T2, [])
    assert al.sync_alerts(con, "hardware_fault", [], T1, [])["resolved"] == 0
    rows = query(con, "SELECT entity, status FROM alerts ORDER BY entity")
    assert rows.values.tolist() == [["early", "firing"], ["gone", "resolved"], ["late", "firing"]]
    # nor does one that finds them too: as the later run recorded them, and no update counted
    assert al.sync_alerts(con, "hardware_fault", [fault("early", p=0.5), fault("late", p=0.5)], T1, [])["updated"] == 0
    renewed = query(con, "SELECT probability, updated_at FROM alerts WHERE entity IN ('early', 'late')")
    assert renewed.values.tolist() == [[0.9, pd.Timestamp(T2)]] * 2
    # a rerun that finds the same alert saying the same is no update either
    assert al.sync_alerts(con, "hardware_fault", [fault("late")], T2, [])["updated"] == 0


def test_a_replay_behind_the_run_that_resolved_an_alert_leaves_it_resolved(con):
    """Fired as of T0, resolved by a live run as of T2: a replay as of T1 that still sees the
    condition does not fire it again (nor queue a second firing), while a run after T2 does."""
    al.sync_alerts(con, "hardware_fault", [fault()], T0, ["jsonl"])
    al.sync_alerts(con, "hardware_fault", [], T2, ["jsonl"])
    assert al.sync_alerts(con, "hardware_fault", [fault()], T1, ["jsonl"]) == {"fired": 0, "updated": 0,
                                                                                "resolved": 0}
    assert query(con, "SELECT status FROM alerts")["status"].tolist() == ["resolved"]
    assert len(query(con, "SELECT * FROM alert_deliveries")) == 2
    later = T2 + (T2 - T1)
    assert al.sync_alerts(con, "hardware_fault", [fault()], later, ["jsonl"])["fired"] == 1


def test_other_kinds_are_left_alone(con):
    al.sync_alerts(con, "hardware_fault", [fault()], T0, [])
    al.sync_alerts(con, "price_spike", [], T1, [])
    assert query(con, "SELECT status FROM alerts")["status"].tolist() == ["firing"]
    with pytest.raises(ValueError):
        al.sync_alerts(con, "price_spike", [fault()], T1, [])


def test_ended_burst_fires_and_resolves_once(con):
    burst = Alert(kind="burst", entity="c/p/gpu", window_start=pd.Timestamp("2026-01-10 03:00"),
                  window_end=pd.Timestamp("2026-01-10 04:00"))
    assert al.sync_alerts(con, "burst", [], T0, ["jsonl"], ended=[burst]) == {"fired": 1, "updated": 0, "resolved": 1}
    assert al.sync_alerts(con, "burst", [], T1, ["jsonl"], ended=[burst]) == {"fired": 0, "updated": 0, "resolved": 0}
    assert len(query(con, "SELECT * FROM alert_deliveries")) == 2


def test_jsonl_sink_delivers_each_transition_once(con, tmp_path):
    sink = al.JsonlSink(tmp_path / "alerts.jsonl")
    al.sync_alerts(con, "hardware_fault", [fault()], T0, [sink.name])
    assert al.deliver_pending(con, [sink], T0) == {"jsonl": 1}
    assert al.deliver_pending(con, [sink], T1) == {"jsonl": 0}  # nothing twice
    al.sync_alerts(con, "hardware_fault", [], T2, [sink.name])
    assert al.deliver_pending(con, [sink], T2) == {"jsonl": 1}
    lines = [json.loads(x) for x in sink.path.read_text().splitlines()]
    assert [x["status"] for x in lines] == ["firing", "resolved"]
    assert lines[0]["labels"] == {"node": "n1"} and lines[0]["fingerprint"] == fault().fingerprint
    assert lines[1]["ends_at"].startswith("2026-01-10T12:30")


def test_webhook_fails_then_recovers_without_duplicates(con):
    with Recorder(fail=3) as down:  # more failures than one run's retries (1 + 2)
        sink = al.WebhookSink(down.url, timeout_s=2, retries=2, backoff_s=0.01)
        al.sync_alerts(con, "hardware_fault", [fault("a"), fault("b")], T0, [sink.name])
        assert al.deliver_pending(con, [sink], T0) == {"webhook": 0}
        assert down.requests == 3 and down.bodies == []
        d = query(con, "SELECT state, attempts, last_error FROM alert_deliveries")
        assert set(d["state"]) == {"pending"} and set(d["attempts"]) == {1}
        assert "503" in d.loc[0, "last_error"]
        # next run: the server is back; both alerts arrive, once
        assert al.deliver_pending(con, [sink], T1) == {"webhook": 2}
        assert al.deliver_pending(con, [sink], T2) == {"webhook": 0}
        assert len(down.bodies) == 1
        path, body = down.bodies[0]
        assert body["source"] == "headroom"
        assert sorted(a["entity"] for a in body["alerts"]) == ["a", "b"]
        assert set(query(con, "SELECT state FROM alert_deliveries")["state"]) == {"delivered"}


def test_unreachable_webhook_keeps_alert_pending(con):
    sink = al.WebhookSink("http://127.0.0.1:9", timeout_s=0.5, retries=1, backoff_s=0.01)
    al.sync_alerts(con, "hardware_fault", [fault()], T0, [sink.name])
    assert al.deliver_pending(con, [sink], T0) == {"webhook": 0}
    assert query(con, "SELECT state FROM alert_deliveries")["state"].tolist() == ["pending"]


def test_alertmanager_v2_payload(con, server):
    sink = al.AlertmanagerSink(server.url, generator_url="http://headroom/detect", retries=0, clock=before_t0)
    al.sync_alerts(con, "hardware_fault", [fault()], T0, [sink.name])
    assert al.deliver_pending(con, [sink], T0) == {"alertmanager": 1}
    al.sync_alerts(con, "hardware_fault", [], T1, [sink.name])
    assert al.deliver_pending(con, [sink], T1) == {"alertmanager": 1}
    (p1, firing), (p2, resolved) = server.bodies
    assert p1 == p2 == "/api/v2/alerts"
    assert isinstance(firing, list) and len(firing) == 1
    a = firing[0]
    assert a["labels"]["alertname"] == "headroom_hardware_fault"
    assert a["labels"]["entity"] == "n1-gpu0" and a["labels"]["severity"] == "critical"
    assert a["labels"]["node"] == "n1" and all(isinstance(v, str) for v in a["labels"].values())
    assert a["annotations"]["summary"] == "n1-gpu0 may fail" and a["annotations"]["probability"] == "0.900"
    assert a["startsAt"] == "2026-01-10T12:00:00.000000Z"
    assert a["endsAt"] == "2026-01-11T00:00:00.000000Z"  # the predicted window's end
    assert a["generatorURL"] == "http://headroom/detect"
    assert resolved[0]["endsAt"] == "2026-01-10T12:15:00.000000Z"
    assert resolved[0]["labels"] == a["labels"]


def test_a_failing_sink_does_not_block_the_others(con, server, tmp_path):
    good = al.JsonlSink(tmp_path / "a.jsonl")
    bad = al.WebhookSink("http://127.0.0.1:9", timeout_s=0.5, retries=0)
    al.sync_alerts(con, "hardware_fault", [fault()], T0, [good.name, bad.name])
    assert al.deliver_pending(con, [bad, good], T0) == {"webhook": 0, "jsonl": 1}
    states = dict(query(con, "SELECT sink, state FROM alert_deliveries").itertuples(index=False))
    assert states == {"jsonl": "delivered", "webhook": "pending"}


def test_a_sink_added_later_still_gets_firing_alerts(con, tmp_path):
    al.sync_alerts(con, "hardware_fault", [fault()], T0, [])  # no sink configured yet
    sink = al.JsonlSink(tmp_path / "late.jsonl")
    al.sync_alerts(con, "hardware_fault", [fault()], T1, [sink.name])
    assert al.deliver_pending(con, [sink], T1) == {"jsonl": 1}
    al.sync_alerts(con, "hardware_fault", [fault()], T2, [sink.name])
    assert al.deliver_pending(con, [sink], T2) == {"jsonl": 0}  # and only once


def _burst(end: str = "2026-01-10 11:50") -> Alert:
    return Alert(kind="burst", entity="c/p/gpu", window_start=pd.Timestamp("2026-01-10 09:00"),
                 window_end=pd.Timestamp(end), severity="warning")


def test_a_burst_found_already_over_goes_out_firing_then_resolved(con, tmp_path):
    sink = al.JsonlSink(tmp_path / "alerts.jsonl")
    al.sync_alerts(con, "burst", [], T0, [sink.name], ended=[_burst()])
    assert al.deliver_pending(con, [sink], T0) == {"jsonl": 2}
    lines = [json.loads(x) for x in sink.path.read_text().splitlines()]
    assert [x["status"] for x in lines] == ["firing", "resolved"]  # a consumer ends up resolved
    assert lines[0]["sent_at"] == "2026-01-10T12:00:00.000000Z"


def test_alertmanager_gets_firing_alerts_again_each_run_until_resolved(con, server, tmp_path):
    """Alertmanager ends an alert nobody re-sends: every run re-posts the firing ones,
    endsAt an hour past the run, and for an hour after its end a resolved one (a re-send of
    the firing one still in flight from an overlapping run must not outlive the resolution);
    the other sinks still hear each transition once."""
    am = al.AlertmanagerSink(server.url, retries=0, clock=before_t0)
    jl = al.JsonlSink(tmp_path / "alerts.jsonl")
    names = [am.name, jl.name]
    al.sync_alerts(con, "burst", [_burst()], T0, names)
    assert al.deliver_pending(con, [am, jl], T0) == {"alertmanager": 1, "jsonl": 1}
    al.sync_alerts(con, "burst", [_burst()], T1, names)  # still bursting
    assert al.deliver_pending(con, [am, jl], T1) == {"alertmanager": 0, "jsonl": 0}
    al.sync_alerts(con, "burst", [], T2, names)  # over
    assert al.deliver_pending(con, [am, jl], T2) == {"alertmanager": 1, "jsonl": 1}
    assert al.deliver_pending(con, [am, jl], T2) == {"alertmanager": 0, "jsonl": 0}
    assert al.deliver_pending(con, [am, jl], T2 + pd.Timedelta(hours=2)) == {"alertmanager": 0, "jsonl": 0}
    bodies = [b for _, b in server.bodies]
    assert len(bodies) == 4  # fired, re-sent, resolved, resolved re-sent; nothing an hour after its end
    assert [b[0]["endsAt"] for b in bodies] == [
        "2026-01-10T13:00:00.000000Z", "2026-01-10T13:15:00.000000Z", "2026-01-10T12:30:00.000000Z",
        "2026-01-10T12:30:00.000000Z"]
    assert bodies[0][0]["labels"] == bodies[1][0]["labels"] == bodies[2][0]["labels"] == bodies[3][0]["labels"]
    assert len(jl.path.read_text().splitlines()) == 2


def test_a_replayed_alert_is_held_an_hour_past_the_wall_clock(con, server):
    """A replay runs on the data's clock, months back; Alertmanager ends an alert at endsAt on
    its own clock, so a firing one is held an hour past the later of the two (else it
    arrives already ended) and a resolution keeps the data's time."""
    wall = pd.Timestamp("2026-06-01 08:00", tz="UTC")
    sink = al.AlertmanagerSink(server.url, retries=0, clock=lambda: wall)
    al.sync_alerts(con, "burst", [_burst()], T0, [sink.name])
    al.deliver_pending(con, [sink], T0)
    al.sync_alerts(con, "burst", [], T1, [sink.name])
    al.deliver_pending(con, [sink], T1)
    (_, firing), (_, resolved) = server.bodies
    assert firing[0]["startsAt"] == "2026-01-10T12:00:00.000000Z"
    assert firing[0]["endsAt"] == "2026-06-01T09:00:00.000000Z"
    assert resolved[0]["endsAt"] == "2026-01-10T12:15:00.000000Z"


def test_a_prediction_renewed_into_the_next_window_goes_on_as_one_alert(con, tmp_path):
    """A spike predicted at 17:55 (window 12:00-00:00) and again at 18:05 (18:00-06:00) was
    resolved and fired anew; it is one condition: one alert, its window stretched. A
    prediction after the alert's window ended, or once it resolved, is a new one."""
    jl = al.JsonlSink(tmp_path / "alerts.jsonl")

    def spike(start: str, hours: int = 12) -> Alert:
        return Alert(kind="price_spike", entity="aws/us-east-1a/p4d/Linux", window_start=pd.Timestamp(start),
                     window_end=pd.Timestamp(start) + pd.Timedelta(hours=hours), severity="warning",
                     probability=0.7)
    first = spike("2026-01-10 12:00")
    assert al.sync_alerts(con, "price_spike", [first], datetime(2026, 1, 10, 17, 55), [jl.name])["fired"] == 1
    out = al.sync_alerts(con, "price_spike", [spike("2026-01-10 18:00")], datetime(2026, 1, 10, 18, 5), [jl.name])
    assert out == {"fired": 0, "updated": 1, "resolved": 0}
    row = query(con, "SELECT fingerprint, window_start, window_end, status FROM alerts")
    assert row["fingerprint"].tolist() == [first.fingerprint] and row["status"].tolist() == ["firing"]
    assert (row.loc[0, "window_start"], row.loc[0, "window_end"]) == (pd.Timestamp("2026-01-10 12:00"),
                                                                      pd.Timestamp("2026-01-11 06:00"))
    al.deliver_pending(con, [jl], datetime(2026, 1, 10, 18, 5))
    assert [json.loads(x)["status"] for x in jl.path.read_text().splitlines()] == ["firing"]
    # gone quiet: it resolves; predicted again the next day, a new alert fires
    assert al.sync_alerts(con, "price_spike", [], datetime(2026, 1, 10, 19, 0), [jl.name])["resolved"] == 1
    again = al.sync_alerts(con, "price_spike", [spike("2026-01-11 12:00")], datetime(2026, 1, 11, 13, 0), [jl.name])
    assert again["fired"] == 1 and len(query(con, "SELECT * FROM alerts")) == 2


def test_an_escalation_is_delivered_once_and_resolutions_match_the_labels(con, server, tmp_path):
    """warning -> critical is said once; in Alertmanager the warning label set ends and the
    critical one fires, and the resolution carries the critical labels. A fall back keeps
    the higher severity (and says nothing)."""
    am = al.AlertmanagerSink(server.url, retries=0, clock=before_t0)
    jl = al.JsonlSink(tmp_path / "alerts.jsonl")
    names = [am.name, jl.name]
    for now, alert in ((T0, fault_at("warning", 0.6)), (T1, fault_at("critical", 0.9)),
                       (T1, fault_at("critical", 0.9)), (T2, fault_at("warning", 0.6))):
        al.sync_alerts(con, "hardware_fault", [alert], now, names)
        al.deliver_pending(con, [am, jl], now)
    al.sync_alerts(con, "hardware_fault", [], T2, names)
    al.deliver_pending(con, [am, jl], T2)
    lines = [json.loads(x) for x in jl.path.read_text().splitlines()]
    assert [(x["status"], x["severity"]) for x in lines] == [
        ("firing", "warning"), ("escalated", "critical"), ("resolved", "critical")]
    assert lines[1]["previous_severity"] == "warning"
    posted = [(p["labels"]["severity"], p.get("endsAt")) for _, body in server.bodies for p in body]
    assert posted[0] == ("warning", "2026-01-11T00:00:00.000000Z")  # fired: until the window's end
    assert posted[1:3] == [("warning", "2026-01-10T12:15:00.000000Z"), ("critical", "2026-01-11T00:00:00.000000Z")]
    assert posted[-1] == ("critical", "2026-01-10T12:30:00.000000Z")  # resolved with the labels last fired
    assert {sev for sev, _ in posted[3:-1]} == {"critical"}  # re-sends in between


@pytest.mark.parametrize(("jsonl", "webhook", "alertmanager", "message"), [
    (None, "127.0.0.1:8080/hook", None, "must start with http"),
    (None, None, "am:9093", "must start with http"),
    ("DIR", None, None, "is a folder"),
    (None, "http://", None, "names no host"),
    (None, None, "http://am:pw@host:abc/", "alertmanager URL http://host:abc/... is not a valid URL"),
    (None, "ftp://u:pw@host/SECRET", None, r"webhook URL ftp://host/\.\.\. must start with http"),
    # each was stored as a target, failed every run with exit 1 and kept its alerts pending
    (None, "http://exa mple.com/SECRET", None, r"webhook URL http://exa mple.com/\.\.\. holds a space"),
    (None, None, "http://am:9093/SECRET\nX-Injected: 1", r"alertmanager URL http://am:9093/\.\.\. holds a space"),
    # hosts no resolver takes: each failed every run at the send, with exit 1
    (None, "http://xn--zz/SECRET", None, r"webhook URL http://xn--zz/\.\.\.: its host is not a valid name"),
    (None, None, "http://" + "a" * 70 + ".example/SECRET", "alertmanager URL .*: its host is not a valid name"),
])
def test_sink_settings_that_can_never_work_are_refused(tmp_path, jsonl, webhook, alertmanager, message):
    with pytest.raises(ValueError, match=message) as err:
        al.sinks_from_settings(tmp_path if jsonl == "DIR" else None, webhook, alertmanager)
    assert "pw" not in str(err.value) and "SECRET" not in str(err.value)


@pytest.mark.parametrize("status, echo", [(503, False), (404, True)])
def test_a_failing_webhook_never_shows_its_secret_url(con, caplog, status, echo):
    """Not in the error, nor in what the receiver answers: a 404 page echoes the path asked
    for, over several lines of HTML; the error is one line."""
    with Recorder(fail=3, status=status, echo=echo) as down:
        url = down.url.replace("http://", "http://user:s3cretpw@") + "/hooks/T0SECRET?token=abc123"
        sink = al.WebhookSink(url, timeout_s=2, retries=0, backoff_s=0.01, name=al.url_sink_name("webhook", url))
        al.sync_alerts(con, "hardware_fault", [fault()], T0, [sink.name])
        with caplog.at_level("WARNING", logger="pipelines.detect.alerts"):
            al.deliver_pending(con, [sink], T0)
    stored = query(con, "SELECT last_error FROM alert_deliveries")["last_error"].iloc[0]
    assert len(stored.splitlines()) == 1 and ("was not found on this server" in stored) == echo, stored
    for text in (stored, caplog.text):
        assert f"HTTP {status}" in text and "127.0.0.1" in text
        assert not any(s in text for s in ("s3cretpw", "T0SECRET", "abc123", "<")), text


def test_an_alert_that_fires_again_before_its_resolution_went_out_ends_firing(con, tmp_path):
    """Resolved while the sink was down, then the same condition again: the sink must not
    be left with 'resolved' as its last word."""
    jl = al.JsonlSink(tmp_path / "a.jsonl")
    burst = _burst()
    al.sync_alerts(con, "burst", [burst], T0, [jl.name])
    al.deliver_pending(con, [jl], T0)
    al.sync_alerts(con, "burst", [], T1, [jl.name])  # resolved; its delivery stays pending (no delivery run)
    al.sync_alerts(con, "burst", [burst], T2, [jl.name])
    al.deliver_pending(con, [jl], T2)
    lines = [json.loads(x)["status"] for x in jl.path.read_text().splitlines()]
    assert lines == ["firing", "firing"]
    assert query(con, "SELECT status FROM alerts")["status"].tolist() == ["firing"]



def test_deliveries_recorded_under_a_sink_kind_are_adopted_by_its_target(con, tmp_path):
    """A warehouse from before sinks were named for their target: the configured sink of
    that kind takes over its rows, so it neither sends a delivered alert again nor forgets a
    pending resolution; the webhook's name hides the URL's secret path."""
    now = datetime(2026, 1, 1)
    rows = [("fp1", "jsonl", "firing", "delivered"), ("fp2", "jsonl", "resolved", "pending"),
            ("fp1", "webhook", "firing", "delivered")]
    for fp, sink, status, state in rows:
        con.execute("INSERT INTO alert_deliveries (fingerprint, sink, status, state, updated_at) VALUES (?, ?, ?, ?, ?)",
                    [fp, sink, status, state, now])
    sinks = al.sinks_from_settings(tmp_path / "a.jsonl", "https://hooks.example.com/services/T0/B0/s3cret", None)
    names = [s.name for s in sinks]
    assert not any("s3cret" in n for n in names) and names[1].startswith("webhook:hooks.example.com#")
    assert adopt_kind_named(con, names) == 3
    left = set(con.execute("SELECT fingerprint, sink, status, state FROM alert_deliveries").fetchall())
    assert left == {("fp1", names[0], "firing", "delivered"), ("fp2", names[0], "resolved", "pending"),
                    ("fp1", names[1], "firing", "delivered")}
    assert adopt_kind_named(con, names) == 0  # once


def test_an_escalation_sent_after_a_fall_still_carries_the_probability_it_escalated_with(con, tmp_path):
    """warning 0.6, critical 0.9, then 0.3, all before one delivery: the escalation says
    critical at 0.9, not critical at 0.3."""
    jl = al.JsonlSink(tmp_path / "alerts.jsonl")
    for now, alert in ((T0, fault_at("warning", 0.6)), (T1, fault_at("critical", 0.9)),
                       (T2, fault_at("warning", 0.3))):
        al.sync_alerts(con, "hardware_fault", [alert], now, [jl.name])
    al.deliver_pending(con, [jl], T2)
    lines = [json.loads(x) for x in jl.path.read_text().splitlines()]
    escalated = next(x for x in lines if x["status"] == "escalated")
    assert (escalated["severity"], escalated["probability"]) == ("critical", 0.9)
    ids = [x["delivery_id"] for x in lines]  # one per transition, for receivers that get a batch twice
    assert len(set(ids)) == len(ids) == 2 and all(len(i) == 16 for i in ids)


def test_a_burst_that_ended_after_escalating_resolves_with_the_labels_it_fired_with(con, tmp_path):
    jl = al.JsonlSink(tmp_path / "alerts.jsonl")
    al.sync_alerts(con, "hardware_fault", [fault_at("warning", 0.6)], T0, [jl.name])
    al.sync_alerts(con, "hardware_fault", [], T1, [jl.name], ended=[fault_at("critical", 0.9)])
    al.deliver_pending(con, [jl], T1)
    lines = [json.loads(x) for x in jl.path.read_text().splitlines()]
    assert [(x["status"], x["severity"]) for x in lines] == [("firing", "warning"), ("resolved", "warning")]


def test_redacted_urls_keep_no_query_or_fragment_and_httpx_does_not_log_them():
    import logging

    from pipelines import cli
    for url in ("https://hooks.example.com:99999?key=SECRET", "http://h:abc#SECRET", "https://[::1?token=SECRET"):
        assert "SECRET" not in al.redact(url)
    cli._configure_logging(logging.DEBUG)
    assert not logging.getLogger("httpx").isEnabledFor(logging.INFO)  # it logs every request's whole URL


def test_a_delivery_queued_again_while_a_batch_was_sent_stays_pending(con, tmp_path):
    """The warehouse is closed while sending: if another run re-queues the alert meanwhile,
    recording this batch must not mark the new delivery as sent."""
    jl = al.JsonlSink(tmp_path / "alerts.jsonl")
    al.sync_alerts(con, "hardware_fault", [fault()], T0, [jl.name])
    batches = al.pending_batches(con, [jl], T0)
    al.send_batches(batches)
    # meanwhile: the alert resolves and fires again in another run (new pending deliveries)
    al.sync_alerts(con, "hardware_fault", [], T1, [jl.name])
    al.sync_alerts(con, "hardware_fault", [fault()], T2, [jl.name])
    al.record_batches(con, batches, T0)
    states = query(con, "SELECT status, state FROM alert_deliveries ORDER BY status")
    assert states.loc[states["status"] == "firing", "state"].tolist() == ["pending"]
    assert "delivery_updated_at" not in jl.path.read_text()


def test_a_receiver_added_later_hears_what_is_firing_before_any_resolution(con, tmp_path):
    """Catching up does not wait for a run of the alert's own detector, and a resolution never
    reaches a receiver before the firing it ends."""
    first = al.JsonlSink(tmp_path / "first.jsonl", name="first")
    al.sync_alerts(con, "hardware_fault", [fault()], T0, [first.name])
    al.deliver_pending(con, [first], T0)
    late = al.JsonlSink(tmp_path / "late.jsonl", name="late")
    assert al.catch_up_sinks(con, [first.name, late.name], T1) == 1  # only the new sink lacks it
    al.sync_alerts(con, "hardware_fault", [], T1, [first.name, late.name])  # it resolves in this run
    al.deliver_pending(con, [first, late], T1)
    heard = [json.loads(x)["status"] for x in late.path.read_text().splitlines()]
    assert heard == ["firing", "resolved"]


def test_deliveries_waiting_for_a_sink_no_longer_configured_are_kept_and_counted_apart(con, tmp_path):
    """The report folder moved (another JSONL path): what the old file was not sent stays
    pending for it, but the run's pending count is that of the sinks it has, and the old
    sink's backlog is named apart; configured again, it gets its backlog once."""
    from pipelines.store.detection import alert_counts

    old, new = al.JsonlSink(tmp_path / "old.jsonl", name="jsonl:old"), al.JsonlSink(tmp_path / "new.jsonl",
                                                                                      name="jsonl:new")
    al.sync_alerts(con, "hardware_fault", [fault()], T0, [old.name])  # queued for old, never sent
    al.sync_alerts(con, "hardware_fault", [fault()], T1, [new.name])
    assert al.deliver_pending(con, [new], T1) == {"jsonl:new": 1}
    assert alert_counts(con, [new.name]) == {"firing": 1, "pending_deliveries": 0,
                                             "pending_unconfigured": {"jsonl:old": 1}}
    assert al.deliver_pending(con, [old], T2) == {"jsonl:old": 1}
    assert alert_counts(con, [new.name]) == {"firing": 1, "pending_deliveries": 0}
    assert len((tmp_path / "old.jsonl").read_text().splitlines()) == 1


def test_a_sink_away_when_an_alert_resolves_hears_it_when_it_comes_back(con, tmp_path):
    """A heard the alert fire; the run that resolves it has only B; A configured again gets
    the resolution (it waited for A, counted apart), so A does not believe it firing forever."""
    from pipelines.store.detection import alert_counts

    a, b = al.JsonlSink(tmp_path / "a.jsonl", name="jsonl:a"), al.JsonlSink(tmp_path / "b.jsonl", name="jsonl:b")
    al.sync_alerts(con, "hardware_fault", [fault()], T0, [a.name])
    al.deliver_pending(con, [a], T0)
    al.sync_alerts(con, "hardware_fault", [], T1, [b.name])
    al.deliver_pending(con, [b], T1)
    assert alert_counts(con, [b.name])["pending_unconfigured"] == {"jsonl:a": 1}
    assert al.deliver_pending(con, [a], T2) == {"jsonl:a": 1}
    sent = [json.loads(line)["status"] for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert sent == ["firing", "resolved"]


def test_a_clock_behind_the_firing_run_never_ends_an_alert_before_it_started(con, server):
    """A replay whose clock is behind the run that fired an alert leaves it firing, seen over or
    not at all (it knows nothing of it); a run that ends it ends it after its start."""
    sink = al.AlertmanagerSink(server.url)
    al.sync_alerts(con, "hardware_fault", [fault()], T2, [sink.name])
    al.sync_alerts(con, "hardware_fault", [], T0, [sink.name])  # the clock went back
    assert con.execute("SELECT status FROM alerts").fetchone()[0] == "firing"
    al.sync_alerts(con, "hardware_fault", [], T0, [sink.name], ended=[fault()])
    assert con.execute("SELECT status, ends_at FROM alerts").fetchone() == ("firing", None)
    al.sync_alerts(con, "hardware_fault", [], T2, [sink.name], ended=[fault()])
    starts, ends = con.execute("SELECT starts_at, ends_at FROM alerts").fetchone()
    assert ends >= starts
    al.deliver_pending(con, [sink], T0)
    posted = [a for _, body in server.bodies for a in body]
    assert all(a["endsAt"] >= a["startsAt"] for a in posted if "endsAt" in a)


@pytest.mark.parametrize("status, trickled", [(200, "body"), (503, "body"), (200, "headers")])
def test_a_receiver_that_trickles_its_answer_does_not_hold_the_send(status: int, trickled: str) -> None:
    """The status is the answer: a 2xx returns at once, an error's body is read for at most the
    timeout; a body (or headers) sent a byte at a time must not keep the run (and its claim)
    waiting: an attempt is cut off after ATTEMPT_TIMEOUTS timeouts."""
    import socket
    import threading
    import time

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                head = f"HTTP/1.1 {status} X\r\nContent-Length: 1000\r\n"
                conn.sendall(head.encode() + (b"\r\n" if trickled == "body" else b"X-Slow: "))
                for _ in range(60):
                    if stop.wait(0.5):
                        break
                    try:
                        conn.sendall(b"x")
                    except OSError:
                        break

    threading.Thread(target=serve, daemon=True).start()
    sink = al.WebhookSink(f"http://127.0.0.1:{listener.getsockname()[1]}/x", timeout_s=1.0, retries=1,
                          backoff_s=0.0)
    began = time.monotonic()
    try:
        if trickled == "headers":
            # the second attempt waits on a server still trickling to the abandoned first
            with pytest.raises(RuntimeError, match="no whole answer within 3 s|ReadTimeout"):
                sink.send([{"a": 1}])
        elif status == 200:
            sink.send([{"a": 1}])
        else:
            with pytest.raises(RuntimeError, match="HTTP 503"):
                sink.send([{"a": 1}])
    finally:
        stop.set()
        listener.close()
    assert time.monotonic() - began < 7.5
