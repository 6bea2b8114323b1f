"""Event sets: the kinds logged together, and their failure rate as known at each row."""
from __future__ import annotations

import numpy as np
import pandas as pd

from anomaly.event_sets import SET, SET_HOURS, SetHazard, newest_sets
from anomaly.fault_features import FaultPolicy, build_fault_features, feature_columns

H = np.timedelta64(1, "h")
T0 = np.datetime64("2026-01-01T00:00")


def test_the_newest_set_is_the_kinds_of_its_hour_logged_by_then() -> None:
    """error2 at 06:00 and error3 at 06:40: at 06:30 the set is error2 alone, from 06:40 both;
    a day later nothing is within the memory."""
    logged = [(np.array([T0 + 6 * H]), "error2"), (np.array([T0 + 6 * H + np.timedelta64(40, "m")]), "error3")]
    at = np.array([T0 + 5 * H, T0 + 6 * H + np.timedelta64(30, "m"), T0 + 7 * H, T0 + 31 * H])
    keys, ages = newest_sets(at, logged, pd.Timedelta("24h"))
    assert keys.tolist() == [None, "error2", "error2+error3", None]
    np.testing.assert_allclose(ages, [np.nan, 0.5, 20 / 60, np.nan])
    # from an event table's kinds (one array of them) the same
    table = [(np.array([T0 + 6 * H, T0 + 6 * H + np.timedelta64(40, "m")]), np.array(["error2", "error3"]))]
    assert newest_sets(at, table, pd.Timedelta("24h"))[0].tolist() == keys.tolist()


def test_a_rows_encoding_knows_only_the_outcomes_known_by_then() -> None:
    """Two devices log set "a" at hour 0 and hour 48; the first fails 10 h after its set. A row
    at hour 5 knows no outcome yet (the base rate, 0 known: 0); one at hour 30 knows the first
    set's (failure): (1 + prior) / 2; the second set's outcome never reaches its own rows."""
    ts = pd.Series(T0 + np.array([0, 5, 30, 48, 50]) * H)
    dev = np.array(["d1", "d1", "d1", "d2", "d2"])
    keys = np.array(["a", "a", None, "a", "a"], dtype=object)
    hours = np.array([0.0, 5.0, np.nan, 0.0, 2.0])
    y = np.array([1, 1, 0, 0, 0])
    hz = SetHazard().fit(dev, ts, keys, hours, y, pd.Timedelta("24h"))
    enc = hz.encode(keys, ts)
    assert np.isnan(enc[2]) and enc[0] == enc[1] == 0.0  # nothing known yet: no base rate either
    assert enc[3] == enc[4] == (1 + 1.0) / (1 + 1)  # the first set failed; base rate known then: 1
    # a score later, once both outcomes are known (the second is not: its horizon ran past the
    # last row, so it was left out), and a set never seen: the base rate
    late = pd.Series([T0 + 200 * H] * 2)
    np.testing.assert_allclose(hz.encode(np.array(["a", "b"], dtype=object), late), [1.0, 1.0])


def test_the_builder_gives_each_row_its_set_and_the_model_does_not_read_the_key() -> None:
    """Counters in the telemetry (an ``error`` metric that changes) give sets like an event
    table; the key is text, never a model input; the hours since it are."""
    ts = pd.date_range("2026-01-01", periods=6, freq="h")
    tel = pd.DataFrame({"ts": np.repeat(ts, 2), "device_id": "g1", "metric": ["temp", "error_count"] * 6,
                        "value": [50, 0, 50, 0, 51, 1, 52, 1, 50, 1, 50, 1]})
    feats = build_fault_features(tel, FaultPolicy(windows=("3h",)))
    assert feats[SET].tolist() == [None, None, "error_count", "error_count", "error_count", "error_count"]
    np.testing.assert_allclose(feats[SET_HOURS], [np.nan, np.nan, 0, 1, 2, 3])
    assert SET not in feature_columns(feats) and SET_HOURS in feature_columns(feats)
    # no events at all: no set columns
    quiet = build_fault_features(tel[tel["metric"] == "temp"], FaultPolicy(windows=("3h",)))
    assert SET not in quiet and SET_HOURS not in quiet
