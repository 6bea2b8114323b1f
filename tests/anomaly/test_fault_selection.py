"""Fault alert threshold rules (target precision, best-F1 fallback) and nested selection."""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from anomaly.evaluate import evaluate_faults, evaluate_faults_by_device
from anomaly.fault_eval import (
    NEVER,
    AlertJudge,
    beats_chance,
    chance_precision,
    dedup_alerts,
    score_alerts,
    threshold_choice,
)
from anomaly.fault_features import FaultPolicy, build_fault_features
from anomaly.faults import FaultPredictor

from .synthetic import fleet_telemetry

LEAD, HORIZON = pd.Timedelta("30min"), pd.Timedelta("6h")
POLICY = FaultPolicy(lead="30min", horizon="6h", n_estimators=40, min_child_samples=5, folds=3,
                     search=((8, 40, 10),))


def two_failures() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Hourly scores of one device failing at hours 45 and 145: a strong precursor (0.8) before
    the first, a weak one (0.4) before the second; false alarms at 0.85 (one) and at 0.5 and
    0.45, background 0.01."""
    ts = pd.date_range("2026-01-01", periods=300, freq="h")
    score = np.full(len(ts), 0.01)
    score[[40, 41, 42]] = 0.8
    score[[140, 141]] = 0.4
    score[200], score[230], score[260] = 0.85, 0.5, 0.45
    return (pd.DataFrame({"device_id": "d", "ts": ts, "score": score}),
            pd.DataFrame({"ts": [ts[45], ts[145]], "device_id": ["d", "d"]}))


def metrics_at(scored: pd.DataFrame, fails: pd.DataFrame, thr: float) -> dict:
    alerts = dedup_alerts(scored, thr, HORIZON)
    return score_alerts(alerts, fails, LEAD, HORIZON, (scored["ts"].min(), scored["ts"].max()), ["d"])


def test_unreachable_target_alerts_at_the_best_f1():
    """No threshold reaches 0.8: 0.8 catches one of two at precision 1/2 (F1 0.5), 0.4 both
    at 2/5 (F1 0.57). The best F1 wins (the most precise choice would take 0.8), flagged."""
    scored, fails = two_failures()
    c = threshold_choice(scored, fails, LEAD, HORIZON, target_precision=0.8, cost_ratio=None)
    assert c.rule == "max_f1_fallback"
    assert 0.01 < c.threshold <= 0.4
    m = metrics_at(scored, fails, c.threshold)
    assert (m["caught"], m["alerts"]) == (2, 5)
    assert c.f1 == pytest.approx(2 * 0.4 * 1.0 / 1.4) and c.precision == pytest.approx(0.4)


def test_reachable_target_keeps_its_rule():
    """With a target of 0.5 the 0.8 threshold reaches it (1 of 2 alerts right): the target
    rule holds, and it is the one with the most recall at that precision."""
    scored, fails = two_failures()
    c = threshold_choice(scored, fails, LEAD, HORIZON, target_precision=0.5, cost_ratio=None)
    assert c.rule == "target_precision" and 0.5 < c.threshold <= 0.8
    assert metrics_at(scored, fails, c.threshold)["precision"] >= 0.5
    assert threshold_choice(scored, fails, LEAD, HORIZON, None, 1.0).rule == "cost_ratio"


def test_nothing_to_catch_never_alerts():
    scored, fails = two_failures()
    later = pd.DataFrame({"ts": [pd.Timestamp("2027-01-01")], "device_id": ["d"]})  # outside the span
    c = threshold_choice(scored, later, LEAD, HORIZON, target_precision=0.8, cost_ratio=None)
    assert (c.rule, c.threshold) == ("none", NEVER)
    del fails


def test_alerts_no_better_than_chance_never_fire():
    """Four devices failing every two days under a flat score: the only threshold that catches
    anything alerts on every device every horizon, right exactly as often as an alert at a
    random row (F1 0.1, which the fallback used to pick, warning on the whole fleet)."""
    ts = pd.date_range("2026-01-01", periods=240, freq="h")
    devs = [f"d{i}" for i in range(4)]
    scored = pd.DataFrame({"device_id": np.repeat(devs, len(ts)), "ts": np.tile(ts, 4), "score": 0.3})
    fails = pd.DataFrame([(d, ts[h + 9 * i]) for i, d in enumerate(devs) for h in range(20, 230, 48)],
                         columns=["device_id", "ts"])
    chance = chance_precision(scored, fails, LEAD, HORIZON)
    all_rows = score_alerts(dedup_alerts(scored, 0.3, HORIZON), fails, LEAD, HORIZON,
                            (ts.min(), ts.max()), devs)
    assert all_rows["caught"] > 0 and all_rows["precision"] <= chance
    c = threshold_choice(scored, fails, LEAD, HORIZON, target_precision=0.8, cost_ratio=None)
    assert (c.rule, c.threshold, c.alerts) == ("no_skill", NEVER, 0)
    from pipelines.detect.notes import fault_threshold_note

    model = SimpleNamespace(threshold_rule_=c.rule, oof_metrics_={"chance_precision": chance})
    assert fault_threshold_note(model, POLICY).startswith("not alerting: ")


def test_beating_chance_is_a_binomial_test():
    """2 right of 30 at a chance of 0.042 is luck (p 0.36); 27 of 36 at 0.05 is not."""
    assert not beats_chance(2 / 30, 30, 0.042)
    assert beats_chance(27 / 36, 36, 0.05)
    assert not beats_chance(0.03, 100, 0.05) and not beats_chance(1.0, 0, 0.05)


def lookalike_fleet() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The test fleet plus a twin of each node (n0 -> t0, ...) that never fails, the twin of
    n1 ending two hours before n1-gpu0's second failure, mid-precursor: every precursor has a
    false twin (precision at most 1/2), and t1's latest row looks like one about to fail."""
    tel, fails = fleet_telemetry()
    second = fails.loc[fails["device_id"] == "n1-gpu0", "ts"].max()
    twin = tel[(tel["node_id"] != "n1") | (tel["ts"] <= second - pd.Timedelta(hours=2))]
    twin = twin.assign(node_id=twin["node_id"].str.replace("n", "t"), device_id=twin["device_id"].str.replace("n", "t"))
    return pd.concat([tel, twin], ignore_index=True), fails


def test_predictor_falls_back_records_it_and_alerts_as_warnings():
    """Twin precursors cap the out-of-fold precision near 1/2: a target of 0.95 is out
    of reach, the predictor still alerts at the best F1, says so, and its alerts are warnings."""
    from pipelines.detect.notes import fault_threshold_note
    from pipelines.detect.steps import score_faults

    tel, fails = lookalike_fleet()
    policy = dataclasses.replace(POLICY, target_precision=0.95)
    feats = build_fault_features(tel, policy)
    model = FaultPredictor(policy).fit(feats, fails)
    assert model.threshold_rule_ == "max_f1_fallback"
    assert model.threshold_ < 1.0 and model.oof_metrics_["precision"] < 0.95
    alerts = score_faults(model, tel, policy, fails)
    assert alerts and {a.severity for a in alerts} == {"warning"}
    assert "best-F1" in fault_threshold_note(model, policy)
    # the same data with a reachable target: the target rule, and no note
    strict = FaultPredictor(dataclasses.replace(POLICY, target_precision=0.3)).fit(feats, fails)
    assert strict.threshold_rule_ == "target_precision"
    assert fault_threshold_note(strict, policy) is None


def relabel_late(fails: pd.DataFrame, cut: pd.Timestamp) -> pd.DataFrame:
    """Failures before ``cut`` kept; the later ones replaced by others, on other devices."""
    early = fails[fails["ts"] < cut]
    moved = pd.DataFrame({"ts": [cut + pd.Timedelta(hours=30), cut + pd.Timedelta(hours=50)],
                          "device_id": ["n0-gpu1", "n2-gpu1"], "node_id": ["n0", "n2"],
                          "failure_type": ["xid", "xid"]})
    return pd.concat([early, moved], ignore_index=True)


def test_changing_the_scored_spans_labels_changes_no_setting():
    """Nested selection: the tree settings, threshold and rule come from the training span
    only, so relabelling the test span's failures leaves every choice as it was (and changes
    the score, so the relabelling is not a no-op)."""
    tel, fails = fleet_telemetry()
    start, end = tel["ts"].min(), tel["ts"].max()
    cut = start + (end - start) * 0.7
    # device folds: the training span holds one failure per failing device, all in one time block
    policy = dataclasses.replace(POLICY, threshold_folds="device")
    a = evaluate_faults(tel, fails, policy, test_fraction=0.3)
    b = evaluate_faults(tel, relabel_late(fails, cut), policy, test_fraction=0.3)
    assert a.attrs["settings"] == b.attrs["settings"]
    assert a.attrs["settings"]["threshold_rule"] in ("target_precision", "max_f1_fallback")
    assert (a.loc[0, "events"], a.loc[0, "caught"]) != (b.loc[0, "events"], b.loc[0, "caught"])


def test_a_fit_ignores_failures_past_what_its_rows_can_know():
    """The fit sees only its devices' failures up to a horizon after its last row: adding later
    ones, or another device's, moves no choice (they would move the censoring of its alerts)."""
    tel, fails = fleet_telemetry()
    feats = build_fault_features(tel, POLICY)
    train = feats[feats["ts"] < feats["ts"].min() + pd.Timedelta(days=8)]
    extra = pd.DataFrame({"ts": [train["ts"].max() + pd.Timedelta(hours=7), pd.Timestamp("2026-01-03")],
                          "device_id": ["n1-gpu1", "elsewhere"]})
    from anomaly.faults import known_failures

    both = pd.concat([fails, extra], ignore_index=True)
    kept = known_failures(train, both, HORIZON)
    assert kept["ts"].max() <= train["ts"].max() + HORIZON and "elsewhere" not in set(kept["device_id"])
    a = FaultPredictor(POLICY).fit(train, fails)
    b = FaultPredictor(POLICY).fit(train, both)
    assert (a.params_, a.threshold_, a.threshold_rule_) == (b.params_, b.threshold_, b.threshold_rule_)


def test_held_out_devices_labels_change_no_fold_setting():
    """Device split: relabelling a fold's held-out devices changes none of that fold's choices."""
    tel, fails = fleet_telemetry()
    a = evaluate_faults_by_device(tel, fails, POLICY, folds=3)
    for fold in a.attrs["folds"]:
        held = fold["devices"]
        others = fails[~fails["device_id"].isin(held)]
        fake = pd.DataFrame({"ts": [pd.Timestamp("2026-01-06 05:00")], "device_id": [held[0]]})
        b = evaluate_faults_by_device(tel, pd.concat([others, fake], ignore_index=True), POLICY, folds=3)
        same = next(f for f in b.attrs["folds"] if f["devices"] == held)
        assert {k: same[k] for k in ("params", "threshold", "threshold_rule")} == \
            {k: fold[k] for k in ("params", "threshold", "threshold_rule")}


def test_the_search_keeps_the_best_inner_setting():
    """Each setting tried is recorded with its inner out-of-fold figures; the one kept ranks
    first on them, and an empty search keeps the policy's own setting."""
    tel, fails = fleet_telemetry()
    feats = build_fault_features(tel, POLICY)
    model = FaultPredictor(POLICY).fit(feats, fails)
    assert len(model.search_) == 2
    assert model.params_ in [{k: s[k] for k in ("num_leaves", "n_estimators", "min_child_samples")}
                             for s in model.search_]
    own = FaultPredictor(dataclasses.replace(POLICY, search=())).fit(feats, fails)
    assert own.params_ == {"num_leaves": 4, "n_estimators": 40, "min_child_samples": 5}
    with pytest.raises(ValueError):
        FaultPolicy(search=((4, 0, 10),))


def test_dcgm_features_count_increments_xid_classes_and_peers():
    """ECC totals become increments (a reset counts from zero) and a recent share of the total,
    Xid codes are counted by class, temperature is compared with the node's other GPU; the
    latest rows alone build the same."""
    ts = pd.date_range("2026-01-01", periods=8, freq="h")
    sbe = [0, 2, 2, 5, 1, 1, 4, 4]  # +2, +3, reset to 1 (+1), +3
    xid = [0, 13, 0, 79, 48, 0, 0, 7]
    rows = []
    for dev, temp in (("n0-gpu0", [60, 60, 61, 70, 72, 60, 60, 60]), ("n0-gpu1", [60] * 8)):
        for metric, values in (("ecc_sbe", sbe if dev.endswith("0") else [0] * 8), ("gpu_temp", temp),
                               ("DCGM_FI_DEV_XID_ERRORS", xid if dev.endswith("0") else [0] * 8),
                               ("power_usage", [300, 310, 300, 310, 300, 300, 300, 300])):
            rows.append(pd.DataFrame({"ts": ts, "device_id": dev, "node_id": "n0", "metric": metric,
                                      "value": np.asarray(values, dtype=float)}))
    tel = pd.concat(rows, ignore_index=True)
    policy = FaultPolicy(windows=("3h", "24h"))
    f = build_fault_features(tel, policy).set_index(["device_id", "ts"]).loc["n0-gpu0"]
    assert f["dcgm_sbe_inc"].tolist() == [0, 2, 0, 3, 1, 0, 3, 0]
    assert f["dcgm_sbe_inc_24h"].iloc[-1] == 9
    # of the total of 4 since the reset, 3 came in the last 3 hours; over 24 hours, all of it
    assert f["dcgm_sbe_recent_share_3h"].iloc[-1] == 0.75
    assert f["dcgm_sbe_recent_share_24h"].iloc[-1] == 1.0
    assert f["dcgm_xid_count_24h"].iloc[-1] == 4
    last = f.iloc[-1]
    assert (last["dcgm_xid_app_count_24h"], last["dcgm_xid_board_count_24h"], last["dcgm_xid_memory_count_24h"],
            last["dcgm_xid_other_count_24h"]) == (1, 1, 1, 1)
    assert f.loc[ts[4], "dcgm_xid_count_3h"] == 2  # 79 at 03:00 and 48 at 04:00 (13 at 01:00 is older)
    assert f.loc[ts[4], "dcgm_temp_vs_peers"] == 12
    assert f["dcgm_power_jitter_3h"].iloc[3] == 10
    latest = build_fault_features(tel, policy, latest_only=True).set_index("device_id")
    full = build_fault_features(tel, policy).groupby("device_id").tail(1).set_index("device_id")
    pd.testing.assert_frame_equal(latest[full.columns], full, check_dtype=False)


def test_ecc_share_reads_the_last_total_within_the_longest_window():
    """The share's total is the device's latest counter reading while it is within the longest
    window (a missing reading carries it); an older one is not used, as scoring never reads it."""
    from anomaly.fault_dcgm import dcgm_features

    times = pd.date_range("2026-01-01", periods=6, freq="2h").to_numpy()
    sbe = np.array([10.0, 12.0, np.nan, np.nan, np.nan, np.nan])  # silent after 02:00
    f = dcgm_features(["ecc_sbe"], sbe[:, None], np.zeros(6, dtype=int), times, np.array([None] * 6),
                      [pd.Timedelta("3h"), pd.Timedelta("6h")])
    share = f["dcgm_sbe_recent_share_6h"]
    assert share[1] == pytest.approx(2 / 12)  # +2 of a total of 12
    assert share[3] == pytest.approx(2 / 12)  # 06:00: the 02:00 reading is 4 h old, still read
    assert np.isnan(share[5])  # 10:00: 8 h old, beyond the longest window


def test_the_fold_mean_scores_with_the_models_that_set_the_threshold():
    """``final_model="folds"``: the predictor scores with the mean of the chosen setting's
    out-of-fold models (one per fold that had a failure to learn from), the scores its
    threshold was set on; ``"refit"`` trains that setting on all rows instead; a bad value is
    refused."""
    from anomaly.faults import FoldMean

    tel, fails = fleet_telemetry()
    feats = build_fault_features(tel, POLICY)
    folded = FaultPredictor(POLICY).fit(feats, fails)
    assert isinstance(folded.model_, FoldMean) and 2 <= len(folded.model_.models) <= POLICY.folds
    X = folded.design(feats)
    each = np.array([m.predict_proba(X)[:, 1] for m in folded.model_.models])
    np.testing.assert_allclose(folded.predict_proba(feats), each.mean(axis=0))
    assert not np.allclose(each[0], each[1])  # models of different folds, not one model repeated
    assert folded.model_.feature_importances_.shape == (len(folded.feature_columns_),)
    refit = FaultPredictor(dataclasses.replace(POLICY, final_model="refit")).fit(feats, fails)
    assert not isinstance(refit.model_, FoldMean)
    assert (refit.params_, refit.threshold_) == (folded.params_, folded.threshold_)
    assert not np.allclose(refit.predict_proba(feats), folded.predict_proba(feats))
    with pytest.raises(ValueError, match="final_model"):
        FaultPolicy(final_model="last")


def test_thermal_residual_is_heat_the_power_draw_does_not_explain():
    """Two GPUs warm by 10 degC in the last two hours: one because it draws 100 W more (its
    own line, 0.1 degC/W, explains it), one at the same draw (a cooling fault). Only the second
    has a large residual; each one's slope is its own thermal resistance."""
    ts = pd.date_range("2026-01-01", periods=24, freq="h")
    power = 200.0 + 50.0 * np.sin(np.arange(24) / 3.0)
    busy = power.copy()
    busy[-2:] += 100.0
    rows = []
    for dev, watts, temp in (("n0-gpu0", busy, 30.0 + 0.1 * busy),
                             ("n0-gpu1", power, 30.0 + 0.1 * power + np.r_[np.zeros(22), 10.0, 10.0])):
        for metric, values in (("gpu_temp", temp), ("power_usage", watts)):
            rows.append(pd.DataFrame({"ts": ts, "device_id": dev, "node_id": "n0", "metric": metric,
                                      "value": values}))
    f = build_fault_features(pd.concat(rows, ignore_index=True), FaultPolicy(windows=("3h", "24h")))
    last = f.groupby("device_id").tail(1).set_index("device_id")
    assert abs(last.loc["n0-gpu0", "dcgm_thermal_residual"]) < 0.01
    assert last.loc["n0-gpu0", "dcgm_thermal_resistance"] == pytest.approx(0.1, rel=0.01)
    assert last.loc["n0-gpu1", "dcgm_thermal_residual"] > 5.0
    assert last.loc["n0-gpu1", "dcgm_thermal_residual_mean_3h"] > 3.0
    assert abs(last.loc["n0-gpu0", "dcgm_thermal_residual_mean_3h"]) < 0.01


def test_alert_judge_scores_as_dedup_then_score_alerts():
    """The threshold search's numpy judge gives what deduplicating and scoring the alerts
    give, on devices with repeated times, missing scores, failures of unscored devices and
    outside the span, zone-aware times and a device list that leaves some out."""
    for seed in range(60):
        rng = np.random.default_rng(seed)
        n_dev = int(rng.integers(1, 5))
        parts = []
        for k in range(n_dev):
            n = int(rng.integers(0, 60))
            score = rng.random(n)
            score[rng.random(n) < 0.1] = np.nan
            parts.append(pd.DataFrame({"device_id": f"d{k}", "score": score, "ts": pd.Timestamp("2026-01-01")
                                       + pd.to_timedelta(rng.integers(0, 24 * 15, n), unit="h")}))
        scored = pd.concat(parts, ignore_index=True)
        n_fail = int(rng.integers(0, 6))
        fails = pd.DataFrame({"device_id": [f"d{rng.integers(0, n_dev + 1)}" for _ in range(n_fail)],
                              "ts": pd.Timestamp("2026-01-01") + pd.to_timedelta(rng.integers(-30, 24 * 16, n_fail),
                                                                                unit="h")})
        if seed % 3 == 0:
            scored["ts"] = scored["ts"].dt.tz_localize("UTC").dt.tz_convert("Asia/Tokyo")
            fails["ts"] = fails["ts"].dt.tz_localize("UTC")
        if scored.empty:
            continue
        lead, horizon = pd.Timedelta(minutes=30 * int(rng.integers(0, 3))), pd.Timedelta(hours=int(rng.integers(1, 30)))
        period = (scored["ts"].min(), scored["ts"].max())
        devices = sorted(scored["device_id"].unique())[: (None if seed % 4 else 1)]
        judge = AlertJudge(scored, fails, lead, horizon, period, devices)
        for thr in (0.0, 0.3, 0.7, 1.01, *rng.random(3)):
            want = score_alerts(dedup_alerts(scored, thr, horizon), fails, lead, horizon, period, devices)
            got = judge(thr)
            assert set(got) == set(want)
            for key, value in want.items():
                assert got[key] == pytest.approx(value, nan_ok=True), (seed, thr, key)


def test_fold_models_fitted_at_once_equal_one_at_a_time(fleet):
    """``n_jobs`` fits the fold models on threads: the same models, threshold and scores."""
    tel, fails = fleet
    feats = build_fault_features(tel, POLICY)
    one = FaultPredictor(POLICY).fit(feats, fails)
    two = FaultPredictor(POLICY, n_jobs=3).fit(feats, fails)
    assert (two.threshold_, two.threshold_rule_, two.search_) == (one.threshold_, one.threshold_rule_, one.search_)
    np.testing.assert_array_equal(two.predict_proba(feats), one.predict_proba(feats))


def test_auto_scores_new_devices_as_device_folds_and_known_ones_as_time_folds(fleet):
    """``threshold_folds="auto"`` (the default): rows of devices the fit saw are scored and
    thresholded as by a time-fold predictor, those of devices it never saw as by a device-fold
    one (whose models had not seen them either), unless no device fold scored a failure; it
    survives a pickle."""
    import pickle

    tel, fails = fleet
    feats = build_fault_features(tel, POLICY)
    ids = feats["device_id"].astype(str)
    seen = ~ids.isin(sorted(ids.unique())[-2:]).to_numpy()
    auto = pickle.loads(pickle.dumps(FaultPredictor(POLICY).fit(feats[seen], fails)))
    by_time = FaultPredictor(dataclasses.replace(POLICY, threshold_folds="time")).fit(feats[seen], fails)
    by_device = FaultPredictor(dataclasses.replace(POLICY, threshold_folds="device")).fit(feats[seen], fails)
    assert by_device.threshold_ != by_time.threshold_  # two thresholds the test can tell apart
    got = auto.predict(feats)
    np.testing.assert_allclose(got.loc[seen, "score"], by_time.predict_proba(feats[seen]))
    np.testing.assert_allclose(got.loc[~seen, "score"], by_device.predict_proba(feats[~seen]))
    assert (got.loc[seen, "threshold"] == by_time.threshold_).all()
    assert (got.loc[~seen, "threshold"] == by_device.threshold_).all()
    assert (got["alert"] == (got["score"] >= got["threshold"])).all()
    assert (got.loc[~seen, "rule"] == by_device.threshold_rule_).all()
    # held out by device: each group is scored as the device folds' predictor scores it, but
    # where those folds scored no failure (threshold "default": no evidence), as the time folds'
    split = {f: evaluate_faults_by_device(tel, fails, dataclasses.replace(POLICY, threshold_folds=f), folds=2)
             for f in ("auto", "time", "device")}
    kept = [d["threshold_rule"] != "default" for d in split["device"].attrs["folds"]]
    assert kept == [True, False]  # this fleet has one of each
    for i, fold in enumerate(split["auto"].attrs["folds"]):
        want = split["device" if kept[i] else "time"].attrs["folds"][i]
        assert (fold["threshold"], fold["threshold_rule"], fold["threshold_folds"]) == (
            want["threshold"], want["threshold_rule"], want["threshold_folds"])


def test_an_evaluation_fits_only_the_half_that_scores_and_reports_both(fleet):
    """``fit_for`` fits the time-fold half for devices all seen, the device-fold half for
    devices none seen: the scores of the whole "auto" fit. A time split whose test span holds a
    device that joined after the training span reports the settings that scored it apart."""
    from anomaly.evaluate import fit_for

    tel, fails = fleet
    feats = build_fault_features(tel, POLICY)
    ids = feats["device_id"].astype(str)
    seen = ~ids.isin(sorted(ids.unique())[-2:]).to_numpy()
    whole = FaultPredictor(POLICY).fit(feats[seen], fails)
    for scored in (feats[seen], feats[~seen]):
        half = fit_for(POLICY, feats[seen], fails, scored)
        assert half.new_devices_ is None  # one half only
        np.testing.assert_allclose(half.predict_proba(scored), whole.predict_proba(scored))
        assert (half.predict(scored)["threshold"] == whole.predict(scored)["threshold"]).all()
    late = sorted(ids.unique())[-1]
    start = tel["ts"].min() + (tel["ts"].max() - tel["ts"].min()) * 0.8  # joins after the training span
    joined = tel[(tel["device_id"] != late) | (tel["ts"] >= start)]
    m = evaluate_faults(joined, fails, POLICY, test_fraction=0.3)
    newer = m.attrs["new_device_settings"]
    assert newer["new_devices"] == [late] and newer["threshold_folds"] == "device"
    assert m.loc[0, "threshold_rule"] == f"{m.attrs['settings']['threshold_rule']} new:{newer['threshold_rule']}"
    assert evaluate_faults(tel, fails, POLICY, test_fraction=0.3).attrs["new_device_settings"] is None
