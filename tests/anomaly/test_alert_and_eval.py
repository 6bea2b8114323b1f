"""The Alert value type and burst-window scoring."""
from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from anomaly.alert import Alert, severity_for
from anomaly.burst_eval import score_bursts


def make(**overrides: object) -> Alert:
    base = dict(kind="burst", entity="c/p/gpu", window_start=pd.Timestamp("2026-01-01 10:00"),
                window_end=pd.Timestamp("2026-01-01 11:00"))
    base.update(overrides)
    return Alert(**base)  # type: ignore[arg-type]


def test_fingerprint_is_identity_of_kind_entity_window():
    a = make(severity="warning", summary="x")
    b = make(severity="critical", summary="y", probability=0.9)
    assert a.fingerprint == b.fingerprint
    assert make(entity="other").fingerprint != a.fingerprint
    assert make(window_end=pd.Timestamp("2026-01-01 12:00")).fingerprint != a.fingerprint
    assert len(a.fingerprint) == 16


def test_alert_is_frozen_and_validated():
    a = make()
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.entity = "x"  # type: ignore[misc]
    with pytest.raises(ValueError):
        make(kind="nope")
    with pytest.raises(ValueError):
        make(probability=1.5)
    with pytest.raises(ValueError):
        make(window_start=pd.Timestamp("2026-01-02"))
    with pytest.raises(ValueError):
        make(window_start=pd.Timestamp("2026-01-01 10:00", tz="UTC"))
    assert severity_for(0.9) == "critical" and severity_for(0.6) == "warning" and severity_for(0.1) == "info"


def test_score_bursts_counts_windows_false_alarms_and_delay():
    step = pd.Timedelta("5min")
    t0 = pd.Timestamp("2026-01-01")
    events = pd.DataFrame({
        "unique_id": ["s", "s", "s"],
        "detected_at": [t0 + 10 * step, t0 + 12 * step, t0 + 500 * step],
    })
    windows = {"s": [(t0 + 5 * step, t0 + 20 * step), (t0 + 100 * step, t0 + 120 * step)]}
    spans = {"s": (t0, t0 + pd.Timedelta(days=7) - step, step)}
    row = score_bursts("cusum", events, windows, spans)
    assert row["windows"] == 2 and row["detected"] == 1
    assert row["false_alarms"] == 1
    assert row["false_alarms_per_week"] == pytest.approx(1.0)
    assert row["median_delay_points"] == pytest.approx(5.0)


def test_burst_delay_runs_from_the_labelled_anomaly_when_given():
    step = pd.Timedelta("5min")
    t0 = pd.Timestamp("2026-01-01")
    events = pd.DataFrame({"unique_id": ["s", "s"], "detected_at": [t0 + 108 * step, t0 + 303 * step]})
    # two NAB-style windows centred on their labels: one alarm 8 points after its label, one early
    windows = {"s": [(t0, t0 + 200 * step), (t0 + 300 * step, t0 + 500 * step)]}
    labels = {"s": [t0 + 100 * step, t0 + 400 * step]}
    spans = {"s": (t0, t0 + pd.Timedelta(days=7) - step, step)}
    from_start = score_bursts("cusum", events, windows, spans)
    assert from_start["median_delay_points"] == pytest.approx(55.5) and from_start["delay_from"] == "window_start"
    row = score_bursts("cusum", events, windows, spans, labels)
    assert row["delays"] == [8.0, 0.0] and row["delay_from"] == "label"  # an alarm before its label: no delay
    assert row["median_delay_points"] == pytest.approx(4.0) and row["p90_delay_points"] == pytest.approx(7.2)
