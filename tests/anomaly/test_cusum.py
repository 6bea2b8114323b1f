"""CUSUM burst detector: the tide is not a burst, a shift is; ARL; resumable state."""
from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from anomaly.calibration import alarm_counts, calibrate_cusum
from anomaly.cusum import CusumDetector, CusumPolicy, CusumState, step

from .synthetic import tidal_series

FAST = CusumPolicy(season_length=24, n_seasons=4, target_arl="7D", cooldown="6h", k_grid=(0.5, 1.0))


def split(frame: pd.DataFrame, days: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    cut = frame["ds"].min() + pd.Timedelta(days=days)
    return frame[frame["ds"] < cut], frame[frame["ds"] >= cut]


def test_detects_level_shift_not_the_tide(tide):
    hist, rest = split(tide, 21)
    quiet = CusumPolicy(season_length=24, n_seasons=4, target_arl="60D", k_grid=(0.5, 1.0))
    events = CusumDetector(quiet).fit(hist).predict(rest)
    assert set(events["unique_id"]) == {"c/b/gpu"}  # the tidal-only series stays quiet
    burst = events[events["unique_id"] == "c/b/gpu"].iloc[0]
    start = pd.Timestamp("2026-01-05") + pd.Timedelta(hours=24 * 24 + 5)
    assert burst["direction"] == "up"
    assert start <= burst["detected_at"] <= start + pd.Timedelta(hours=4)
    assert abs(burst["onset"] - start) <= pd.Timedelta(hours=2)
    assert burst["peak_residual"] > 20


def test_calibrated_threshold_is_far_above_the_textbook_on_heavy_tails():
    rng = np.random.default_rng(3)
    z = rng.standard_t(df=3, size=5000)
    k, h = calibrate_cusum(z, arl_points=168, policy=FAST)
    assert k in FAST.k_grid
    assert h > 2.0
    # on fresh in-control data the reported alarm rate is near the target (one per 168 points)
    fresh = rng.standard_t(df=3, size=168 * 120)
    count = alarm_counts(fresh, np.array([k]), np.array([h]), "both", FAST.clear_sigma)[0, 0]
    assert 40 <= count <= 250


def test_arl_calibration_on_gaussian_matches_target_order():
    z = np.random.default_rng(0).normal(size=4000)
    policy = CusumPolicy(k=0.5, target_arl="7D", season_length=24)
    _, h = calibrate_cusum(z, arl_points=168, policy=policy)
    # Siegmund: two-sided ARL0 ~ 168 needs h ~ 3.4 for k = 0.5 (each side ~336)
    assert 2.5 < h < 4.5


def test_state_round_trip_resumes_identically(tide):
    hist, rest = split(tide, 14)
    det = CusumDetector(FAST).fit(hist)
    whole, whole_states = det.detect(rest)
    first, second = split(rest, 10)
    ev1, states1 = det.detect(first)
    restored = {uid: CusumState.from_dict(json.loads(json.dumps(st.to_dict()))) for uid, st in states1.items()}
    ev2, states2 = det.detect(second, states=restored)
    resumed = pd.concat([ev1, ev2], ignore_index=True)
    order = ["unique_id", "detected_at"]
    assert len(whole) > 0
    pd.testing.assert_frame_equal(whole.sort_values(order).reset_index(drop=True),
                                  resumed.sort_values(order).reset_index(drop=True))
    for uid in whole_states:
        assert whole_states[uid].to_dict() == states2[uid].to_dict()


def test_replayed_points_are_skipped(tide):
    hist, rest = split(tide, 21)
    det = CusumDetector(FAST).fit(hist)
    events, states = det.detect(rest)
    again, states_again = det.detect(rest, states=states)  # the same batch twice
    assert again.empty
    assert states_again == states


def test_gaps_do_not_break_the_grid():
    frame = tidal_series(days=21, seed=4)
    hist, rest = split(frame, 14)
    rest = rest.drop(rest.index[10:20])  # ten missing hours
    st = CusumDetector(FAST).fit(hist).states_["c/p/gpu"]
    _events, new = step(st, rest["ds"], rest["y"])
    assert new.last_ts == rest["ds"].max()


def test_policy_validation():
    with pytest.raises(ValueError):
        CusumPolicy(direction="sideways")
    with pytest.raises(ValueError):
        CusumPolicy(season_length=0)


def test_too_short_history_is_a_clear_error():
    short = tidal_series(days=1)
    with pytest.raises(ValueError, match="c/p/gpu"):
        CusumDetector(FAST).fit(short)


@pytest.mark.parametrize("cooldown,clear_points,confirm", [(0, 1, 0), (12, 1, 0), (0, 12, 0), (12, 6, 0), (0, 1, 3),
                                                            (12, 6, 2)])
def test_calibration_counts_exactly_what_the_detector_reports(cooldown: int, clear_points: int, confirm: int):
    from anomaly.cusum import _run_cusum

    rng = np.random.default_rng(7)
    z = rng.standard_t(df=3, size=3000)
    z[1000:1040] += 3.0  # a burst, so suppression and cooldown both matter
    k, h = 0.5, 4.0
    state = CusumState(unique_id="s", freq_s=3600.0, k=k, h=h, scale=1.0, season_length=1, n_seasons=1,
                       clip_sigma=np.inf, clear_sigma=1.0, direction="both", memory=(np.nan,),
                       cooldown_s=3600.0 * cooldown, clear_points=clear_points, confirm_points=confirm)
    index = pd.date_range("2026-01-01", periods=len(z), freq="h")
    events, _ = _run_cusum(state, index, z, z)
    counted = alarm_counts(z, np.array([k]), np.array([h]), "both", 1.0, cooldown, clear_points, confirm)[0, 0]
    assert len(events) == counted > 0


def test_a_burst_that_grows_after_its_alarm_gets_the_same_severity_however_it_is_batched(tide):
    """The detect flow runs hourly: a burst alarmed while still small must still end up
    critical when it grows, as one run over all of it would say (the peak follows the
    burst after its alarm, in the state and in the event)."""
    from pipelines.detect.steps import run_bursts

    frame = tide.copy()
    start = 18 * 24 + 3
    frame.loc[start:start + 11, "y"] += np.linspace(15, 200, 12)  # small at first, then huge
    hist, rest = split(frame, 14)
    states = CusumDetector(FAST).fit(hist).states_
    whole = run_bursts(rest, states, FAST)
    sev_whole = {a.fingerprint: a.severity for a in whole.current + whole.ended}
    stepped: dict[str, str] = {}
    st = states
    for end in pd.date_range(rest["ds"].min() + pd.Timedelta(hours=1), rest["ds"].max(), freq="h"):
        out = run_bursts(rest[rest["ds"] <= end], st, FAST)
        st = out.states
        stepped.update({a.fingerprint: a.severity for a in out.current + out.ended})
    assert sev_whole and "critical" in sev_whole.values()
    assert stepped == sev_whole


def test_states_of_another_season_are_recalibrated(tide, caplog):
    """``detect --season-length`` after earlier runs: the stored states belong to the old
    season, so they are recalibrated under the new one (and the log says so)."""

    from pipelines.detect.steps import run_bursts

    hist, rest = split(tide, 21)
    states = CusumDetector(FAST).fit(hist).states_
    other = replace(FAST, season_length=12, n_seasons=8)
    with caplog.at_level("WARNING"):
        out = run_bursts(pd.concat([hist, rest]), states, other)
    assert {st.season_length for st in out.states.values()} == {12}
    assert "recalibrating" in caplog.text


def test_one_noisy_burst_on_five_minute_data_is_one_event_and_its_state_resumes():
    """A burst that dips under 1 sigma for a point or two is still going: it ends when its
    residual level (an EWMA over ``clear_after``) falls, not at its first quiet point,
    so it is one alert, not one per dip; split at a dip, the state carries the level over."""
    from anomaly.cusum import _run_cusum

    rng = np.random.default_rng(11)
    z = rng.normal(size=2000)
    z[1000:1288] += 3.0  # a day-long burst at 5-minute steps: ~2% of its points dip under 1
    index = pd.date_range("2026-01-01", periods=len(z), freq="5min")

    def state(clear_points: int) -> CusumState:
        return CusumState(unique_id="s", freq_s=300.0, k=0.5, h=6.0, scale=1.0, season_length=1, n_seasons=1,
                          clip_sigma=np.inf, clear_sigma=1.0, direction="both", memory=(np.nan,),
                          clear_points=clear_points)

    def in_burst(events: list[dict[str, object]]) -> int:
        return sum(index[1000] <= e["detected_at"] <= index[1300] for e in events)

    one_point, _ = _run_cusum(state(1), index, z, z)
    assert in_burst(one_point) > 1  # the old rule: a new alert after each dip
    hour = CusumPolicy(clear_after="1h").clear_points(pd.Timedelta("5min"))
    assert hour == 12 and CusumPolicy(clear_after="1h").clear_points(pd.Timedelta("1h")) == 1
    whole, scalars = _run_cusum(state(hour), index, z, z)
    assert in_burst(whole) == 1
    assert scalars["active"] == 0  # ... and it did end after the burst
    first, mid = _run_cusum(state(hour), index[:1100], z[:1100], z[:1100])
    rest, end = _run_cusum(replace(state(hour), **mid), index[1100:], z[1100:], z[1100:])
    assert [e["detected_at"] for e in first + rest] == [e["detected_at"] for e in whole]
    assert end == scalars


def _turbulent_after(days_calm: int = 3, days_rough: int = 12, seed: int = 5) -> pd.DataFrame:
    """Hourly noise, calm for ``days_calm`` then heavy-tailed and three times as wide."""
    rng = np.random.default_rng(seed)
    calm = rng.normal(0, 1, days_calm * 24)
    rough = 3 * rng.standard_t(df=3, size=days_rough * 24)
    y = 50 + np.concatenate([calm, rough])
    return pd.DataFrame({"unique_id": "c/p/cpu", "ds": pd.date_range("2026-01-01", periods=len(y), freq="h"), "y": y})


RECAL = CusumPolicy(season_length=1, n_seasons=24, target_arl="7D", k_grid=(0.5, 1.0))


def test_recalibration_follows_a_series_that_turns_turbulent():
    """Calibrated on calm days only, the CUSUM alarms all through the turbulent weeks after
    them; refitted daily on what it has seen, it raises its scale and stays near its target."""
    frame = _turbulent_after()
    hist, rest = split(frame, 3)
    once = replace(RECAL, recalibrate_every=None)
    ev_once, st_once = CusumDetector(once).fit(hist).detect(frame)
    ev_daily, st_daily = CusumDetector(RECAL).fit(hist).detect(frame)
    assert len(ev_once) >= 3 * max(len(ev_daily), 1)
    assert len(ev_daily) <= 8  # the first turbulent day alarms before any refit
    assert st_daily["c/p/cpu"].scale > 2 * st_once["c/p/cpu"].scale
    # refitted once a day after the end of the history, the last time within the last day
    assert frame["ds"].max() - pd.Timedelta(days=1) <= st_daily["c/p/cpu"].calibrated_at < frame["ds"].max()
    assert st_once["c/p/cpu"].calibrated_at == hist["ds"].max()


def test_recalibrated_detection_is_the_same_however_it_is_batched_and_never_looks_ahead():
    frame = _turbulent_after()
    hist, _rest = split(frame, 3)
    det = CusumDetector(RECAL).fit(hist)
    whole, whole_states = det.detect(frame)
    st = det.states_
    parts = []
    for end in pd.date_range(frame["ds"].min() + pd.Timedelta(days=4, hours=7), frame["ds"].max(), freq="17h"):
        ev, st = det.detect(frame[frame["ds"] <= end], states=st)  # history and new points, as detect passes
        parts.append(ev)
    ev, st = det.detect(frame, states=st)
    parts.append(ev)
    resumed = pd.concat([p for p in parts if len(p)], ignore_index=True)  # (concat warns of empty frames)
    assert len(whole) >= 2
    pd.testing.assert_frame_equal(whole.reset_index(drop=True), resumed.reset_index(drop=True), check_dtype=False)
    assert whole_states["c/p/cpu"].to_dict() == st["c/p/cpu"].to_dict()
    # the future does not move the past: change the last week, the first ones' events stay
    cut = frame["ds"].min() + pd.Timedelta(days=8)
    later = frame.copy()
    later.loc[later["ds"] > cut, "y"] *= 5
    changed = det.detect(later)[0]
    pd.testing.assert_frame_equal(whole[whole["detected_at"] <= cut].reset_index(drop=True),
                                  changed[changed["detected_at"] <= cut].reset_index(drop=True))


def test_recalibration_on_new_points_alone_keeps_the_calibration():
    """A caller that passes only new points (no history) cannot refit on less than the
    first calibration read: the scale stays, and the running statistics go on."""
    frame = _turbulent_after()
    hist, rest = split(frame, 3)
    det = CusumDetector(RECAL).fit(hist)
    _ev, st = det.detect(rest.iloc[:60])  # 2.5 days: fewer points than the 3 days of history
    assert st["c/p/cpu"].scale == det.states_["c/p/cpu"].scale
    assert st["c/p/cpu"].calibrated_at > det.states_["c/p/cpu"].calibrated_at
    assert st["c/p/cpu"].last_ts == rest["ds"].iloc[59]


def test_evaluation_refits_the_baselines_on_the_cusums_schedule():
    """bursts evaluate compares the three detectors under one calibration schedule: the
    3-sigma rule and Pelt refit their scale daily too, so on a series that turns turbulent
    they lose false alarms as the CUSUM does."""
    from anomaly.evaluate import evaluate_bursts

    frame = _turbulent_after(days_calm=4)
    once = evaluate_bursts(frame, {}, replace(RECAL, recalibrate_every=None),
                           train_fraction=0.25).set_index("detector")
    daily = evaluate_bursts(frame, {}, RECAL, train_fraction=0.25).set_index("detector")
    for det in ("cusum", "threshold_3sigma", "pelt"):
        assert daily.loc[det, "false_alarms"] < once.loc[det, "false_alarms"], det


def test_a_burst_on_a_series_that_fell_silent_is_no_longer_current(tide):
    """The series stops reporting while its burst is in progress: at the data's end the burst
    is current; hours later (past the silence limit) it is not, and the result names the series
    (the detect job warns of it once, when its alert resolves)."""
    from pipelines.detect.steps import BURST_SILENCE, run_bursts

    frame = tide.copy()
    frame.loc[len(frame) - 6:, "y"] += 200.0  # a burst still going when the data stops
    hist, rest = split(frame, 14)
    states = CusumDetector(FAST).fit(hist).states_
    end = rest["ds"].max()
    now = run_bursts(rest, states, FAST, now=end)
    assert now.current and not now.silent
    late = run_bursts(rest, states, FAST, now=end + BURST_SILENCE + pd.Timedelta(hours=1))
    assert not late.current and set(late.silent) == {a.entity for a in now.current}


def test_the_fast_path_alarms_on_one_point_beyond_anything_calibrated():
    quiet = tidal_series("c/q/gpu", days=28, seed=5)
    at = quiet.index[quiet["ds"] == pd.Timestamp("2026-01-05") + pd.Timedelta(hours=24 * 24 + 7)][0]
    quiet.loc[at, "y"] += 40 * quiet["y"].diff(24).abs().median()  # one wild point, then back to normal
    hist, rest = split(quiet, 21)
    policy = replace(FAST, k=1.0, h=30.0)  # a threshold as heavy tails give: 4 clipped points to cross
    slow = replace(policy, fast_floor=None)
    fit = CusumDetector(policy).fit(hist)
    assert fit.states_["c/q/gpu"].fast_h >= policy.fast_floor  # beyond every calibration residual
    events = fit.predict(rest).set_index("detected_at")
    without = set(CusumDetector(slow).fit(hist).predict(rest)["detected_at"])
    spike = quiet.loc[at, "ds"]
    assert spike not in without  # the clipped CUSUM alone misses a single point ...
    assert set(events.index) == without | {spike} and events.loc[spike, "direction"] == "up"  # ... the fast path not
    state = fit.states_["c/q/gpu"]
    assert CusumState.from_dict(json.loads(json.dumps(state.to_dict()))) == state


def test_a_confirmed_cusum_alarm_waits_for_a_run_not_for_spikes_that_add_up():
    """Two one-hour spikes add up past h and alarm; with ``confirm_for`` the CUSUM needs a run of
    points over 1 sigma, so their crossing is dropped, while a burst of hours still alarms (its
    second point crosses before the run is long enough: dropped, and the fourth alarms)."""
    frame = tidal_series("c/q/gpu", days=28, seed=5)
    unit = 30 * frame["y"].diff(24).abs().median()  # far beyond the clip: each point adds about 10
    start = pd.Timestamp("2026-01-05") + pd.Timedelta(days=22, hours=3)
    spikes = [start, start + pd.Timedelta(hours=2)]
    burst = [start + pd.Timedelta(days=2, hours=9 + h) for h in range(5)]  # other hours: the baseline's
    # same-hour median never holds two raised points
    frame.loc[frame["ds"].isin(spikes + burst), "y"] += unit
    between = frame["ds"] == start + pd.Timedelta(hours=1)  # exactly its baseline: a quiet point
    frame.loc[between, "y"] = frame.loc[frame["ds"].isin([start + pd.Timedelta(hours=1 - 24 * d) for d in range(1, 5)]),
                                        "y"].median()
    hist, rest = split(frame, 21)
    policy = replace(FAST, k=0.5, h=15.0, fast_floor=None, direction="up")
    plain = CusumDetector(policy).fit(hist).predict(rest)
    assert set(plain["detected_at"]) == {spikes[1], burst[1]}  # the spikes' sum alarms, the burst at once
    waiting = CusumDetector(replace(policy, confirm_for="3h")).fit(hist)
    assert waiting.states_["c/q/gpu"].confirm_points == 3
    events = waiting.predict(rest)
    assert list(events["detected_at"]) == [burst[3]] and list(events["onset"]) == [burst[2]]
    with pytest.raises(ValueError, match="confirm_for"):
        CusumPolicy(confirm_for="-1h")
