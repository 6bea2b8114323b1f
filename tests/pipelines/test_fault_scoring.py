"""Fault scoring in the detect flow: the alerts a fitted model's scores become."""
from __future__ import annotations

import pandas as pd


class Scores:
    """A fitted fault model's predict contract (device_id, ts, score, threshold, rule,
    new_device, alert), alerting where ``alert(features)`` says; devices in ``new`` are new to
    it, scored at a best-F1 fallback threshold."""

    def __init__(self, alert, new: tuple[str, ...] = ()) -> None:
        self.alert, self.new = alert, new

    def predict(self, features: pd.DataFrame) -> pd.DataFrame:
        new = features["device_id"].isin(self.new)
        return features[["device_id", "ts"]].assign(
            score=0.9, threshold=0.5, rule=new.map({True: "max_f1_fallback", False: "target_precision"}),
            new_device=new, alert=self.alert(features))


def test_fault_alerts_name_the_node_and_cover_the_predicted_day():
    """A DCGM device id (its UUID) says nothing of the host: the alert carries it as a label."""
    from anomaly.faults import FaultPolicy
    from pipelines.detect import steps as detect_steps

    ts = pd.date_range("2026-01-14 22:00", periods=24, freq="5min")
    telemetry = pd.concat([pd.DataFrame({"ts": ts, "device_id": dev, "node_id": node, "metric": "gpu_temp",
                                         "value": 60.0}) for dev, node in (("GPU-aa", "gpu-node-2"), ("GPU-bb", "n3"))])
    alerts = detect_steps.score_faults(Scores(lambda f: f["device_id"] == "GPU-aa"), telemetry, FaultPolicy())
    assert [a.entity for a in alerts] == ["GPU-aa"]
    a = alerts[0]
    assert dict(a.labels) == {"node": "gpu-node-2"} and "on gpu-node-2" in a.summary
    last = ts[-1]
    assert a.window_start <= last and a.window_end >= last + pd.Timedelta("24h")


def test_a_device_that_failed_after_its_latest_reading_is_not_announced():
    """A GPU that failed stops reporting, and its last row (just before the failure) scores
    high: it is not announced as about to fail. One that failed before its latest reading
    (repaired, back in service) is scored as any other."""
    from anomaly.faults import FaultPolicy
    from pipelines.detect import steps as detect_steps

    ts = pd.date_range("2026-01-14 22:00", periods=24, freq="5min")
    telemetry = pd.concat([pd.DataFrame({"ts": ts[:12] if dev == "gone" else ts, "device_id": dev, "node_id": "n1",
                                         "metric": "gpu_temp", "value": 60.0}) for dev in ("gone", "back", "fine")])
    failures = pd.DataFrame({"ts": [ts[11] + pd.Timedelta("2min"), ts[3]], "device_id": ["gone", "back"],
                             "node_id": "n1", "failure_type": "dbe_ecc"})
    alerts = detect_steps.score_faults(Scores(lambda f: True), telemetry, FaultPolicy(), failures)
    assert sorted(a.entity for a in alerts) == ["back", "fine"]
    # a failure beyond the fleet's newest reading (a failures file loaded whole) is what the
    # latest rows should predict: it hides nothing
    later = failures.assign(ts=[ts[-1] + pd.Timedelta("20h"), ts[3]])
    alerts = detect_steps.score_faults(Scores(lambda f: True), telemetry, FaultPolicy(), later)
    assert sorted(a.entity for a in alerts) == ["back", "fine", "gone"]


def test_a_device_new_to_the_model_alerts_by_its_own_rule(caplog):
    """A device the model never saw is judged at the threshold set for unseen devices: where
    that one fell back to the best F1, its alert is a warning, while a known device's alert at
    the target precision pages; the run logs how many devices were new."""
    import logging

    from anomaly.faults import FaultPolicy
    from pipelines.detect import steps as detect_steps

    ts = pd.date_range("2026-01-14 22:00", periods=24, freq="5min")
    telemetry = pd.concat([pd.DataFrame({"ts": ts, "device_id": dev, "node_id": "n1", "metric": "gpu_temp",
                                         "value": 60.0}) for dev in ("known", "fresh")])
    with caplog.at_level(logging.INFO, logger="pipelines.detect.steps"):
        alerts = detect_steps.score_faults(Scores(lambda f: True, new=("fresh",)), telemetry, FaultPolicy())
    by = {a.entity: a for a in alerts}
    assert by["fresh"].severity == "warning" and "below the target precision" in by["fresh"].summary
    assert by["known"].severity != "warning" and "below the target" not in by["known"].summary
    assert "1 device(s) new to the model (such as fresh)" in caplog.text


def test_the_threshold_note_speaks_for_each_predictor():
    """The detect summary's line on a fallen-back threshold says which devices it is about:
    the model's own (as before where it has no new-device predictor), new devices', or both."""
    from types import SimpleNamespace

    from anomaly.faults import FaultPolicy
    from pipelines.detect.notes import fault_threshold_note

    def fit(rule, newer=None):
        return SimpleNamespace(threshold_rule_=rule, new_devices_=newer, oof_metrics_={
            "precision": 0.5, "recall": 0.6, "chance_precision": 0.1})

    policy = FaultPolicy()
    assert fault_threshold_note(fit("max_f1_fallback"), policy).startswith("target precision 0.8 not reached")
    assert fault_threshold_note(fit("target_precision", fit("target_precision")), policy) is None
    only_new = fault_threshold_note(fit("target_precision", fit("max_f1_fallback")), policy)
    assert only_new.startswith("for devices new to the model: target precision 0.8 not reached")
    both = fault_threshold_note(fit("max_f1_fallback", fit("no_skill")), policy)
    assert both.startswith("for the devices trained on: target precision") and "; for devices new to the " \
        "model: not alerting" in both
