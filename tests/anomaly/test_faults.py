"""Fault predictor: labels, no look-ahead, the split's embargo, end-to-end catch."""
from __future__ import annotations

import dataclasses
import warnings
from datetime import datetime

import numpy as np
import pandas as pd
import pytest

from anomaly.evaluate import evaluate_faults
from anomaly.fault_eval import dedup_alerts, score_alerts
from anomaly.fault_features import NEVER_HOURS, FaultPolicy, build_fault_features, feature_span, label_failures
from anomaly.faults import time_split

from .synthetic import fleet_telemetry

POLICY = FaultPolicy(lead="30min", horizon="6h", n_estimators=60, min_child_samples=5, folds=3)


def test_labels_respect_lead_and_horizon():
    ts = pd.date_range("2026-01-01", periods=24, freq="h")
    feats = pd.DataFrame({"device_id": "d", "ts": ts})
    fails = pd.DataFrame({"ts": [pd.Timestamp("2026-01-01 12:00")], "device_id": ["d"]})
    y = label_failures(feats, fails, POLICY)
    positive = set(ts[y == 1].hour)
    # fails at 12:00: rows with t + 30min <= 12:00 <= t + 6h, i.e. 06:00 .. 11:00
    assert positive == {6, 7, 8, 9, 10, 11}


def test_features_never_look_ahead(fleet):
    tel, _fails = fleet
    cut = pd.Timestamp("2026-01-06")
    full = build_fault_features(tel, POLICY)
    early = build_fault_features(tel[tel["ts"] < cut], POLICY)
    merged = full[full["ts"] < cut].reset_index(drop=True)
    cols = [c for c in early.columns if c in merged.columns]
    pd.testing.assert_frame_equal(early[cols].reset_index(drop=True), merged[cols], check_dtype=False)


@pytest.mark.parametrize("memory,freq", [(None, "h"), ("2D", "h"), (None, "10min")])
def test_latest_features_need_only_the_feature_span(memory, freq):
    """The detect flow scores from the last ``feature_span`` of telemetry: each device's
    latest row must get exactly the features training built from all of the history
    (a cumulative ECC counter's first reading in the window is no event, and "hours since"
    is not cut at the window); at 10 minutes too, where the span's extra hour no longer
    covers a feature that reaches back further than the memory."""
    tel, _ = fleet_telemetry(freq=freq)
    # DCGM's ECC totals are cumulative: they climb, then hold (a plateau is no new event)
    ecc = tel["metric"] == "ecc_sbe"
    tel = tel.sort_values(["device_id", "metric", "ts"]).copy()
    tel.loc[ecc, "value"] = (tel.loc[ecc, "value"] > 0).groupby(tel.loc[ecc, "device_id"]).cumsum()
    policy = FaultPolicy(lead="30min", horizon="6h", event_memory=memory)
    for cut in pd.date_range("2026-01-03 05:00", "2026-01-12 23:00", freq="17h"):
        known = tel[tel["ts"] <= cut]
        full = build_fault_features(known, policy).groupby("device_id").tail(1)
        recent = build_fault_features(known[known["ts"] >= cut - feature_span(policy)], policy)
        recent = recent.groupby("device_id").tail(1)
        # what scoring builds: the latest rows alone, from a grouped aggregation, not rolling
        latest = build_fault_features(known[known["ts"] >= cut - feature_span(policy)], policy, latest_only=True)
        # equal up to the float noise of rolling sums over a longer history (pandas 3: ~1e-7)
        for got in (recent.reset_index(drop=True), latest):
            pd.testing.assert_frame_equal(got, full.reset_index(drop=True),
                                          check_dtype=False, check_exact=False, rtol=1e-6, atol=1e-5)
    # and the events are seen: a device that logged ECC errors within the memory says so
    feats = build_fault_features(tel, policy)
    assert (feats["ev_ecc_sbe_hours_since"] < policy.memory / pd.Timedelta(hours=1)).any()


def test_time_split_embargo_and_device_holdout(fleet):
    tel, _ = fleet
    feats = build_fault_features(tel, POLICY)
    train, test, cutoff = time_split(feats, 0.3, pd.Timedelta(POLICY.horizon), test_devices=["n0-gpu0"])
    assert feats.loc[train, "ts"].max() < cutoff - pd.Timedelta(POLICY.horizon)
    assert feats.loc[test, "ts"].min() >= cutoff
    assert set(feats.loc[test, "device_id"]) == {"n0-gpu0"}
    assert "n0-gpu0" not in set(feats.loc[train, "device_id"])


def test_event_features_count_ecc_changes(fleet):
    tel, _ = fleet
    feats = build_fault_features(tel, POLICY)
    assert {"ev_ecc_sbe_count_3h", "ev_ecc_sbe_hours_since", "gpu_temp_slope_24h"} <= set(feats.columns)
    healthy = feats[feats["device_id"] == "n0-gpu1"]
    assert (healthy["ev_ecc_sbe_count_24h"] == 0).all()


def test_event_kinds_of_one_family_are_also_counted_together():
    """error1 and error5 are one family: "some error" is counted across them (PdM's error5
    alone is too rare to learn from), a kind without a sibling (maint) gets no family
    feature, and telemetry counters of one family (ecc_sbe, ecc_dbe) are pooled alike."""
    ts = pd.date_range("2026-01-01", periods=48, freq="h")
    tel = pd.DataFrame({"ts": ts, "device_id": "d", "metric": "temp", "value": 60.0})
    counters = pd.concat([
        pd.DataFrame({"ts": ts, "device_id": "d", "metric": "ecc_sbe", "value": (np.arange(48) >= 10).astype(float)}),
        pd.DataFrame({"ts": ts, "device_id": "d", "metric": "ecc_dbe", "value": (np.arange(48) >= 20).astype(float)}),
    ])
    events = pd.DataFrame({"ts": [ts[5], ts[30], ts[40]], "device_id": "d",
                           "event_type": ["error1", "error5", "maint_comp1"]})
    feats = build_fault_features(pd.concat([tel, counters], ignore_index=True), POLICY, events=events)
    assert "event_maint_all_count_24h" not in feats.columns
    at = feats.set_index("ts")
    assert at.loc[ts[31], "event_error_all_count_24h"] == 1  # error5 at 30; error1 at 5 is > 24 h before
    assert at.loc[ts[28], "event_error_all_count_24h"] == 1  # error1 at 5 only
    assert at.loc[ts[31], "event_error_all_hours_since"] == 1.0
    assert at.loc[ts[4], "event_error_all_hours_since"] == NEVER_HOURS
    assert at.loc[ts[21], "ev_ecc_all_count_24h"] == 2  # the sbe counter's step at 10, the dbe's at 20
    assert at.loc[ts[21], "ev_ecc_all_hours_since"] == 1.0


def test_dedup_and_scoring():
    scored = pd.DataFrame({
        "device_id": "d", "ts": pd.date_range("2026-01-01", periods=16, freq="h"),
        "score": [0, 0.9, 0.9, 0.9, 0, 0, 0, 0.9, 0.9] + [0] * 7,
    })
    alerts = dedup_alerts(scored, 0.5, pd.Timedelta("6h"))
    assert list(alerts["ts"].dt.hour) == [1, 7]
    fails = pd.DataFrame({"ts": [pd.Timestamp("2026-01-01 05:00")], "device_id": ["d"]})
    m = score_alerts(alerts, fails, pd.Timedelta("30min"), pd.Timedelta("6h"),
                     (scored["ts"].min(), scored["ts"].max()), ["d"])
    assert (m["events"], m["caught"], m["alerts"]) == (1, 1, 2)
    assert m["precision"] == pytest.approx(0.5)
    assert m["median_lead_hours"] == pytest.approx(4.0)
    assert m["censored_alerts"] == 0


def test_an_alert_whose_window_outruns_the_data_is_censored_not_false():
    """An unconfirmed alert whose [a + lead, a + horizon] reaches past the end of the data
    cannot be judged (the device may fail after it): it leaves precision alone. A failure
    log that goes on past the telemetry judges it, either way."""
    lead, horizon = pd.Timedelta("30min"), pd.Timedelta("6h")
    ts = pd.date_range("2026-01-01", periods=12, freq="h")
    alerts = pd.DataFrame({"device_id": ["d", "d"], "ts": [ts[1], ts[9]]})
    fails = pd.DataFrame({"ts": [ts[5]], "device_id": ["d"]})
    m = score_alerts(alerts, fails, lead, horizon, (ts[0], ts[-1]), ["d"])
    assert (m["alerts"], m["censored_alerts"], m["precision"]) == (1, 1, 1.0)
    assert m["false_alarms_per_device_week"] == 0
    # the log runs on past the telemetry: the late alert is judged, false here ...
    later = pd.concat([fails, pd.DataFrame({"ts": [ts[-1] + pd.Timedelta("2D")], "device_id": ["e"]})])
    m = score_alerts(alerts, later, lead, horizon, (ts[0], ts[-1]), ["d"])
    assert (m["alerts"], m["censored_alerts"], m["precision"]) == (2, 0, 0.5)
    # ... and right when the device fails after the data stop
    after = pd.concat([fails, pd.DataFrame({"ts": [ts[-1] + pd.Timedelta("2h")], "device_id": ["d"]})])
    m = score_alerts(alerts, after, lead, horizon, (ts[0], ts[-1]), ["d"])
    assert (m["alerts"], m["censored_alerts"], m["precision"]) == (2, 0, 1.0)
    # times with a zone judge alike, without numpy's timezone warning
    utc = {name: frame.assign(ts=frame["ts"].dt.tz_localize("UTC")) for name, frame in
           (("alerts", alerts), ("fails", fails))}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = score_alerts(utc["alerts"], utc["fails"], lead, horizon,
                         (ts[0].tz_localize("UTC"), ts[-1].tz_localize("UTC")), ["d"])
    assert (m["alerts"], m["censored_alerts"], m["precision"]) == (1, 1, 1.0)


def test_evaluate_catches_precursor_failures(fleet):
    tel, fails = fleet
    row = evaluate_faults(tel, fails, POLICY, test_fraction=0.3).iloc[0]
    assert row["events"] == 3
    assert row["recall"] >= 2 / 3
    assert row["auc"] > 0.8
    assert np.isfinite(row["false_alarms_per_device_week"])


def one_failure(n: int, base: float, precursor: float, false_alarms: dict[int, float]):
    """Hourly scores of one device that fails at hour 45: ``precursor`` at hours 40-42, the
    given false alarms, ``base`` elsewhere; returns (scored, failures)."""
    ts = pd.date_range("2026-01-01", periods=n, freq="h")
    score = np.full(n, base)
    score[[40, 41, 42]] = precursor
    for at, value in false_alarms.items():
        score[at] = value
    return (pd.DataFrame({"device_id": "d", "ts": ts, "score": score}),
            pd.DataFrame({"ts": [ts[45]], "device_id": ["d"]}))


def test_threshold_for_precision_or_cost():
    from anomaly.fault_eval import choose_threshold

    scored, fails = one_failure(200, 0.05, precursor=0.9, false_alarms={120: 0.6, 121: 0.6})
    lead, horizon = pd.Timedelta("30min"), pd.Timedelta("6h")
    strict = choose_threshold(scored, fails, lead, horizon, target_precision=0.9, cost_ratio=None)
    assert 0.6 < strict <= 0.9  # above the false alarm, still catching the failure
    # a weak precursor (0.3) below a false alarm (0.6): the cost ratio decides
    scored2, _ = one_failure(200, 0.05, precursor=0.3, false_alarms={120: 0.6, 121: 0.6})
    cheap_miss = choose_threshold(scored2, fails, lead, horizon, target_precision=None, cost_ratio=0.5)
    dear_miss = choose_threshold(scored2, fails, lead, horizon, target_precision=None, cost_ratio=5.0)
    assert cheap_miss > 0.6  # stay quiet: a miss costs less than a false alert
    assert dear_miss <= 0.3  # alert on everything that could be the failure
    with pytest.raises(ValueError):
        FaultPolicy(target_precision=None, cost_ratio=None)


def test_threshold_candidates_include_each_failures_best_score():
    """The threshold search tries each failure's best score in its alert window: a grid of
    score quantiles alone steps over the one threshold that catches it (here between 0.49
    and 0.5, where 13 confident catches above leave the grid coarse)."""
    from anomaly.fault_eval import choose_threshold, window_maxima

    ts = pd.date_range("2026-01-01", periods=24 * 400, freq="h")
    n = len(ts)
    score = np.linspace(0.0, 0.2, n)
    fail_at = [24 * 10 * (i + 1) for i in range(14)]
    for f in fail_at[:13]:
        score[f - 24:f] = 0.9  # 13 failures that any threshold below 0.9 catches
    score[fail_at[13] - 5] = 0.5  # a 14th, caught only at <= 0.5
    false = [24 * (200 + 10 * i) for i in range(10)]
    score[false] = 0.49  # ten false alarms just below it
    scored = pd.DataFrame({"device_id": "d", "ts": ts, "score": score})
    fails = pd.DataFrame({"ts": ts[fail_at], "device_id": "d"})
    lead, horizon = pd.Timedelta("30min"), pd.Timedelta("24h")
    maxima = window_maxima(scored, fails, lead, horizon, (ts[0], ts[-1]), ["d"])
    assert sorted(maxima.round(2)) == [0.5] + [0.9] * 13
    thr = choose_threshold(scored, fails, lead, horizon, target_precision=0.8, cost_ratio=None)
    assert 0.49 < thr <= 0.5  # all 14 caught, no false alarm


def test_scoring_reads_what_each_devices_latest_row_needs(con):
    """The detect flow's read (``recent_telemetry``): a device that reports 5 hours behind
    the others, and an ECC counter polled every 4 hours, still get exactly the features of
    their latest row that all of the history gives."""
    from pipelines.store import detection as detect_store

    policy = FaultPolicy(lead="30min", horizon="6h")
    rows = []
    for h in range(24 * 4):
        t = pd.Timestamp("2026-01-01") + pd.Timedelta(hours=h)
        rows.append((t, "fresh", "n1", "gpu_temp", 60.0 + (h % 7)))
        if h % 4 == 0:
            rows.append((t, "fresh", "n1", "ecc_sbe", float(h // 30)))  # steps up at 01-02 06:00, ...
        if h < 24 * 4 - 5:
            rows.append((t, "late", "n2", "gpu_temp", 50.0 + (h % 5)))
    tel = pd.DataFrame(rows, columns=["ts", "device_id", "node_id", "metric", "value"])
    con.register("tel", tel)
    con.execute("INSERT INTO device_telemetry (ts, device_id, node_id, metric, value) "
                "SELECT ts, device_id, node_id, metric, value FROM tel")
    recent = detect_store.recent_telemetry(con, feature_span(policy))
    assert len(recent) < len(tel)
    got = build_fault_features(recent, policy, latest_only=True)
    want = build_fault_features(tel, policy).groupby("device_id").tail(1).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want, check_dtype=False, check_exact=False, rtol=1e-6, atol=1e-5)


def test_scoring_reads_are_bounded_and_leave_out_devices_long_silent(con):
    """A device silent for two days is not scored (its prediction would be about the past),
    and no reading older than two feature spans before a device's newest is read."""
    from pipelines.store import detection as detect_store

    rows = [(pd.Timestamp("2026-01-01") + pd.Timedelta(hours=h), dev, "n1", "gpu_temp", 60.0)
            for h in range(24 * 10) for dev in ("live", "gone") if dev == "live" or h < 24 * 8]
    tel = pd.DataFrame(rows, columns=["ts", "device_id", "node_id", "metric", "value"])
    con.register("tel", tel)
    con.execute("INSERT INTO device_telemetry (ts, device_id, node_id, metric, value) "
                "SELECT ts, device_id, node_id, metric, value FROM tel")
    span = pd.Timedelta("25h")
    recent = detect_store.recent_telemetry(con, span)
    assert set(recent["device_id"]) == {"live"}
    newest = tel["ts"].max()
    assert recent["ts"].min() >= newest - 2 * span and (recent["ts"] >= newest - span).sum() == len(recent) - 1


def test_training_reads_the_newest_whole_hours_within_its_budget(con, monkeypatch):
    """The daily retraining reads at most ``TRAIN_READINGS`` of the newest readings, whole
    hours (at least the newest), up to a replay's clock; all of them when they fit."""
    from pipelines.store import detection as detect_store

    rows = [(pd.Timestamp("2026-01-01") + pd.Timedelta(minutes=30 * i), dev, "n1", "gpu_temp", 60.0)
            for i in range(20) for dev in ("a", "b", "c")]  # 6 readings an hour, 00:00 .. 09:30
    con.register("tel", pd.DataFrame(rows, columns=["ts", "device_id", "node_id", "metric", "value"]))
    con.execute("INSERT INTO device_telemetry SELECT * FROM tel")
    assert len(detect_store.telemetry(con)) == len(detect_store.telemetry(con, newest=60)) == 60
    got = detect_store.telemetry(con, newest=13)
    assert (len(got), got["ts"].min()) == (12, pd.Timestamp("2026-01-01 08:00"))
    assert len(detect_store.telemetry(con, newest=2)) == 6  # the newest hour, whatever the budget
    got = detect_store.telemetry(con, until=pd.Timestamp("2026-01-01 05:00"), newest=12)
    assert (len(got), got["ts"].min(), got["ts"].max()) == (9, pd.Timestamp("2026-01-01 04:00"),
                                                             pd.Timestamp("2026-01-01 05:00"))
    from pipelines.detect import steps

    monkeypatch.setattr(detect_store, "TRAIN_READINGS", 13)  # what the detect flow's training job reads
    monkeypatch.setattr(steps, "train_faults", lambda inputs, failures, policy: (len(inputs["telemetry"]), None))
    assert steps.fault_model_job(con, datetime(2026, 1, 2), FaultPolicy(), "1D").train() == (12, None)


@pytest.mark.parametrize("horizon", ["6h", "48h"])
def test_time_folds_are_purged_blocks(horizon):
    """The out-of-fold threshold's time blocks: every row is scored once, and no block's model
    trains on a row whose label reaches into the block, whose features reach back into it, or
    whose label shares a failure with the block's last rows (a horizon longer than the
    feature windows)."""
    from anomaly.faults import _time_folds

    policy = FaultPolicy(lead="30min", horizon=horizon, windows=("3h", "12h"), folds=4)
    ts = pd.date_range("2026-01-01", periods=24 * 20, freq="h")
    feats = pd.DataFrame({"device_id": np.repeat(["a", "b"], len(ts)), "ts": np.tile(ts, 2)})
    folds = _time_folds(feats, policy)
    assert len(folds) == 4
    tested = np.sum([test for _train, test in folds], axis=0)
    assert (tested == 1).all()
    after = max(pd.Timedelta("13h"), pd.Timedelta(horizon))  # the feature span: 12h and the reading before
    for train, test in folds:
        lo, hi = feats.loc[test, "ts"].min(), feats.loc[test, "ts"].max()
        t = feats.loc[train, "ts"]
        assert not ((t >= lo - pd.Timedelta(horizon)) & (t <= hi + after - pd.Timedelta("1h"))).any()
        assert train.sum() > 0


def test_time_folds_span_decades_and_gaps():
    """A stray reading decades before the rest (int64 block arithmetic would wrap) and blocks
    that fall in a gap of the telemetry: every row still scored once, and fit still works."""
    from anomaly.faults import FaultPredictor, _time_folds

    stray = pd.DataFrame({"device_id": ["a"] * 4, "ts": pd.to_datetime(
        ["1970-01-01", "2030-01-01", "2030-01-02", "2030-01-03"])})
    assert (np.sum([test for _train, test in _time_folds(stray, POLICY)], axis=0) == 1).all()
    rows, fails = [], []
    for d in range(4):  # 10 days in January and 10 in March: the blocks between hold no row
        for start in ("2026-01-01", "2026-03-01"):
            ts = pd.date_range(start, periods=240, freq="h")
            temp = np.full(240, 60.0)
            temp[150:180] = 90.0  # overheats, then fails
            rows.append(pd.DataFrame({"ts": ts, "device_id": f"g{d}", "node_id": "n",
                                      "metric": "gpu_temp", "value": temp}))
            fails.append({"ts": ts[180], "device_id": f"g{d}"})
    feats = build_fault_features(pd.concat(rows, ignore_index=True), POLICY)
    model = FaultPredictor(POLICY).fit(feats, pd.DataFrame(fails))
    assert 0 < model.threshold_ < 1


def test_recall_counts_the_failures_some_score_could_catch():
    """A failure whose alert window holds no finite score (a block left unscored) is not one
    any threshold could catch."""
    from anomaly.fault_eval import scorable_failures

    ts = pd.date_range("2026-01-01", periods=48, freq="h")
    score = np.where((ts >= "2026-01-01 12:00") & (ts < "2026-01-02 00:00"), np.nan, 0.1)
    scored = pd.DataFrame({"device_id": "d", "ts": ts, "score": score})
    fails = pd.DataFrame({"ts": [ts[20], ts[40], ts[45]], "device_id": ["d", "d", "e"]})
    kept = scorable_failures(scored, fails, pd.Timedelta("30min"), pd.Timedelta("6h"))
    assert kept["ts"].tolist() == [ts[40]]  # ts[20]: its window 14:00-19:30 is unscored; e: no scores


def test_threshold_without_a_scored_failure_is_the_classifiers_own(fleet, caplog):
    """When every training failure sits in one time block, the model scoring that block has
    seen none (its rows stay unscored) and the others have no failure to catch: the threshold
    cannot be set on these folds, so it is 0.5, and the log says why."""
    from anomaly.faults import FaultPredictor

    tel, fails = fleet
    early = fails[fails["ts"] < pd.Timestamp("2026-01-08")]  # the three failures of 5 January
    feats = build_fault_features(tel, POLICY)
    with caplog.at_level("WARNING", logger="anomaly.faults"):
        model = FaultPredictor(POLICY).fit(feats, early)
    assert model.threshold_ == 0.5 and model.oof_metrics_ == {}
    assert "no out-of-fold model that had a failure to learn from scored one" in caplog.text


def test_threshold_keeps_the_widest_margin():
    """Every threshold between a false alarm (0.2) and the failure's precursor (0.8) catches
    it at full precision; the one chosen sits midway, not close to either (the final model,
    trained on more, moves the scores a little)."""
    from anomaly.fault_eval import choose_threshold

    scored, fails = one_failure(400, 0.01, precursor=0.8, false_alarms={200: 0.2, 300: 0.2})
    thr = choose_threshold(scored, fails, pd.Timedelta("30min"), pd.Timedelta("6h"), 0.9, None)
    assert 0.49 < thr < 0.51


@pytest.mark.parametrize("bad", [dict(threshold_folds="random"), dict(folds=1)])
def test_fold_settings_are_checked(bad):
    with pytest.raises(ValueError):
        FaultPolicy(**bad)


def test_one_device_gets_a_threshold_from_time_folds(fleet):
    """Time folds need no second device: a single GPU's threshold comes from its own earlier
    and later blocks, not the 0.5 fallback that device folds leave it."""
    from anomaly.faults import FaultPredictor

    tel, fails = fleet
    dev = fails["device_id"].iloc[0]
    one = tel[tel["device_id"] == dev]
    feats = build_fault_features(one, POLICY)
    fitted = FaultPredictor(POLICY).fit(feats, fails)
    by_device = FaultPredictor(dataclasses.replace(POLICY, threshold_folds="device")).fit(feats, fails)
    assert by_device.threshold_ == 0.5 and fitted.threshold_ != 0.5


def test_each_devices_features_are_its_own(fleet):
    """Features are built for all devices at once; a device's rows must be exactly what it
    gets alone, whatever the others report (their windows never reach into its rows)."""
    tel, _fails = fleet
    one = sorted(tel["device_id"].astype(str).unique())[1]
    noisy = tel.assign(value=np.where(tel["device_id"].astype(str) != one, tel["value"] * 1e6 + 7, tel["value"]))
    # the other devices also report at times this one does not
    extra = noisy[noisy["device_id"].astype(str) != one].assign(ts=lambda f: f["ts"] + pd.Timedelta("7min"))
    together = build_fault_features(pd.concat([noisy, extra], ignore_index=True), POLICY)
    alone = build_fault_features(tel[tel["device_id"].astype(str) == one], POLICY)
    mine = together[together["device_id"] == one].reset_index(drop=True)
    # but for the node-peer features, which are about the others by design (alone: none)
    own = [c for c in alone.columns if not c.startswith("dcgm_temp_vs_peers")]
    assert alone["dcgm_temp_vs_peers"].isna().all() and mine["dcgm_temp_vs_peers"].notna().all()
    pd.testing.assert_frame_equal(mine[own], alone[own], check_dtype=False)


def test_zone_aware_times_and_a_device_listed_twice(fleet):
    """Times in a zone come back in that zone (failures in the same zone still label them);
    a devices table that lists a device twice gives its first age."""
    from anomaly.faults import FaultPredictor

    tel, fails = fleet
    aware = tel.assign(ts=tel["ts"].dt.tz_localize("UTC").dt.tz_convert("Europe/Amsterdam"))
    feats = build_fault_features(aware, POLICY)
    assert str(feats["ts"].dt.tz) == "Europe/Amsterdam"
    assert feats["ts"].min() == aware["ts"].min()
    aware_fails = fails.assign(ts=fails["ts"].dt.tz_localize("UTC"))
    assert FaultPredictor(POLICY).fit(feats, aware_fails).threshold_ > 0
    dev = sorted(tel["device_id"].astype(str).unique())[0]
    ages = pd.DataFrame({"device_id": [dev, dev], "age_days": [100.0, 200.0]})
    aged = build_fault_features(tel, POLICY, devices=ages)
    assert (aged.loc[aged["device_id"] == dev, "age_days"] == 100.0).all()
    assert aged.loc[aged["device_id"] != dev, "age_days"].isna().all()


def test_latest_rows_alone_equal_the_full_build(fleet):
    """``latest_only`` (what scoring builds) gives each device's latest row of the full
    build, events and ages included, also for a device with a single reading."""
    tel, _fails = fleet
    lone = pd.DataFrame({"ts": [tel["ts"].max()], "device_id": ["solo"], "node_id": ["n9"],
                         "metric": ["gpu_temp"], "value": [70.0]})
    # an infinite reading in a device's last window: rolling skips it, so must the latest build
    spike = tel[tel["metric"] == "gpu_temp"].sort_values("ts").groupby("device_id").tail(1).head(1)
    spike = spike.assign(ts=spike["ts"] - pd.Timedelta("1min"), value=np.inf)
    tel = pd.concat([tel, lone, spike], ignore_index=True)
    devs = sorted(tel["device_id"].astype(str).unique())
    events = pd.DataFrame({"ts": [tel["ts"].min() + pd.Timedelta("30h")] * 2, "device_id": devs[:2],
                           "event_type": ["xid_79", "maint"]})
    ages = pd.DataFrame({"device_id": devs[:3], "age_days": [10.0, 20.0, 30.0]})
    full = build_fault_features(tel, POLICY, events=events, devices=ages).groupby("device_id").tail(1)
    latest = build_fault_features(tel, POLICY, events=events, devices=ages, latest_only=True)
    assert len(latest) == len(devs) and latest.loc[latest["device_id"] == "solo", "gpu_temp"].item() == 70.0
    pd.testing.assert_frame_equal(latest, full.reset_index(drop=True), check_dtype=False, check_exact=False,
                                  rtol=1e-6, atol=1e-5)


def test_device_ids_are_text_and_readings_need_a_time():
    """Integer device ids are named by their text and sorted as text (``1``, ``10``, ``2``),
    each with its node; ``2`` and ``"2"`` are one device, ``1.0`` another; a reading without
    a time or a device is left out."""
    ts = pd.date_range("2026-01-01", periods=3, freq="h")
    tel = pd.DataFrame({
        "ts": list(ts) * 3 + [ts[0], pd.NaT, ts[1], ts[2]],
        "device_id": [2] * 3 + [10] * 3 + [1] * 3 + ["2", 1, None, 1.0],
        "node_id": ["n2"] * 3 + [None, "n10", "n10"] + ["n1"] * 3 + ["other", "n1", "n0", "nf"],
        "metric": "gpu_temp", "value": [60.0, 61, 62, 70, 71, 72, 80, 81, 82, 64, 99, 99, 50],
    }, dtype=object).astype({"value": float})
    feats = build_fault_features(tel, POLICY)
    assert feats["device_id"].tolist() == ["1"] * 3 + ["1.0"] + ["10"] * 3 + ["2"] * 3
    feats = feats[feats["device_id"] != "1.0"]
    assert feats["node_id"].tolist() == ["n1"] * 3 + ["n10"] * 3 + ["n2"] * 3
    assert feats["gpu_temp"].tolist() == [80.0, 81, 82, 70, 71, 72, 62, 61, 62]  # 2 at ts[0]: (60 + 64) / 2


def test_features_in_device_blocks_capped_rows_and_any_order_equal_one_pass(fleet, monkeypatch):
    """Rolling and DCGM statistics, and the pivot, a few devices at a time equal one pass over
    all, from names as text or as categories; a cap on the rows
    builds every k-th row of each device with the features the full build gives it; the
    readings' order (the warehouse reads them unsorted) changes nothing, the node included."""
    from anomaly import fault_features

    tel, _fails = fleet
    full = build_fault_features(tel, POLICY)
    monkeypatch.setattr(fault_features, "ROLLING_BLOCK", 50)  # far fewer rows than one device has
    shuffled = tel.sample(frac=1.0, random_state=3).reset_index(drop=True)
    pd.testing.assert_frame_equal(build_fault_features(shuffled, POLICY), full)
    # the warehouse reads names as categories (one unused), pivoted a few devices at a time
    names = shuffled.astype({"device_id": "category", "node_id": "category", "metric": "category"})
    names["metric"] = names["metric"].cat.add_categories(["never_read"])
    for block in (100, 2000):  # under one device's readings; a few devices
        monkeypatch.setattr(fault_features, "PIVOT_BLOCK", block)
        pd.testing.assert_frame_equal(build_fault_features(names, POLICY), full)
    cap = len(full) // 3 + 1
    capped = build_fault_features(tel, POLICY, max_rows=cap)
    assert len(capped) <= cap and len(capped) >= cap * 0.9
    pos = full.groupby("device_id", sort=False).cumcount()
    pd.testing.assert_frame_equal(capped, full[(pos % 3 == 0).to_numpy()].reset_index(drop=True))
    assert build_fault_features(tel, POLICY, max_rows=len(full)).equals(full)
    with pytest.raises(ValueError, match="max_train_rows"):
        FaultPolicy(max_train_rows=0)
