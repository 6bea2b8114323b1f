"""The history validator: clean copies, and errors that name the series."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasters import HistoryError, validate_history
from forecasters.validation import default_seasons

from .conftest import make_panel


def test_sorts_without_touching_the_input() -> None:
    data = make_panel(length=30).sample(frac=1.0, random_state=0)
    before = data.copy()
    clean = validate_history(data, "h")
    pd.testing.assert_frame_equal(data, before)
    assert clean["unique_id"].is_monotonic_increasing
    assert clean.groupby("unique_id")["ds"].apply(lambda s: s.is_monotonic_increasing).all()


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.drop(columns="y"), "missing column"),
        (lambda d: d.assign(y=d["y"].where(d.index != 40, np.nan)), "'s1'.*non-finite"),
        (lambda d: d.assign(y=d["y"].where(d.index != 3, np.inf)), "'s0'.*non-finite"),
        (lambda d: pd.concat([d, d.iloc[[35]]]), "'s1'.*duplicate"),
        (lambda d: d.drop(index=45), "'s1'.*gappy"),
        (lambda d: d.assign(ds=d["ds"] + pd.Timedelta(minutes=7) * (d.index == 10).astype(int)), "'s0'"),
        (lambda d: d.assign(ds=d["ds"].dt.tz_localize("UTC")), "timezone-naive"),
        (lambda d: d.assign(ds=d["ds"].astype(str)), "datetimes"),
        (lambda d: d.iloc[0:0], "empty"),
    ],
)
def test_errors_name_the_problem(mutate, message: str) -> None:
    data = make_panel(length=30)
    with pytest.raises(HistoryError, match=message):
        validate_history(mutate(data), "h")


def test_short_series_named() -> None:
    data = make_panel(length=30)
    data = data[~((data["unique_id"] == "s1") & (data["ds"] > data["ds"].min() + pd.Timedelta(hours=3)))]
    with pytest.raises(HistoryError, match="'s1'.*4 points"):
        validate_history(data, "h", min_length=10)


def test_integer_steps_need_freq_none() -> None:
    ints = make_panel(length=30, freq=None)
    assert validate_history(ints, None)["ds"].dtype.kind == "i"
    with pytest.raises(HistoryError, match="integer"):
        validate_history(make_panel(length=30), None)


def test_seasons() -> None:
    assert default_seasons("h", 24) == (24, 168)
    assert default_seasons("5min", 288) == (288,)
    assert default_seasons(None, 24) == (24,)


def test_a_series_at_a_constant_offset_from_the_grid_is_accepted() -> None:
    """Hourly at :30, weekly on Sundays: whole steps apart is what counts."""
    half = make_panel(length=30).assign(ds=lambda d: d["ds"] + pd.Timedelta(minutes=30))
    assert len(validate_history(half, "h")) == 60
    sundays = pd.DataFrame({"unique_id": "w", "ds": pd.date_range("2024-01-07", periods=10, freq="W-SUN"), "y": 1.0})
    for freq in ("W", "W-SUN", "7D"):
        assert len(validate_history(sundays, freq)) == 10
    from forecasters.validation import future_ds, step_index

    assert np.diff(step_index(sundays["ds"], "W")).tolist() == [1] * 9
    assert pd.Timestamp(future_ds(sundays["ds"].iloc[-1], 1, "W")[0]).day_name() == "Sunday"
    mixed = half.copy()
    mixed.loc[5, "ds"] = mixed.loc[5, "ds"] + pd.Timedelta(minutes=30)  # one row on :00
    with pytest.raises(HistoryError, match="'s0'.*off the series' 'h' grid"):
        validate_history(mixed, "h")


def _gappy(freq: str | None = "h") -> pd.DataFrame:
    n = 24 * 4
    ds = pd.date_range("2026-01-01", periods=n, freq="h") if freq else np.arange(n, dtype=np.int64)
    y = np.arange(n, dtype=float) % 24 + 10 * (np.arange(n) // 24)  # each day 10 above the one before
    frame = pd.DataFrame({"unique_id": "a", "ds": ds, "y": y})
    return frame.drop(index=[30, 31, 60]).assign(y=lambda f: f["y"].where(f.index != 70))


@pytest.mark.parametrize("freq", ["h", None])
def test_fill_gaps_takes_the_value_one_season_before(freq: str | None) -> None:
    from forecasters.validation import fill_gaps

    filled, counts = fill_gaps(_gappy(freq), freq, 24, "seasonal")
    assert counts == {"a": 4} and len(filled) == 24 * 4
    y = filled["y"].to_numpy()
    assert [y[30], y[31], y[60], y[70]] == [6.0, 7.0, 22.0, 32.0]  # the same hour a day earlier
    validate_history(filled, freq)  # a regular grid the forecasters take
    interp, _ = fill_gaps(_gappy(freq), freq, 24, "interpolate")
    assert interp["y"].to_numpy()[30] == pytest.approx(16.0)  # a third of the way from 29 (15) to 32 (18)
    assert fill_gaps(_gappy(freq), freq, 24, "zero")[0]["y"].to_numpy()[60] == 0.0
    assert fill_gaps(_gappy(freq), freq, 24, "none")[1] == {}


def test_a_gap_longer_than_a_season_names_the_series_and_the_span() -> None:
    from forecasters.validation import fill_gaps

    frame = _gappy()
    frame = frame[(frame.index < 40) | (frame.index >= 70)]
    with pytest.raises(HistoryError, match=r"series 'a': 31 missing steps from 2026-01-02 16:00:00 to "
                                           r"2026-01-03 22:00:00, longer than one season \(24\)"):
        fill_gaps(frame, "h", 24)
    with pytest.raises(HistoryError, match="unknown gap filling"):
        fill_gaps(frame, "h", 24, "mean")
    # a series with rows but no value at all is said so, not "missing steps"
    dead = pd.concat([_gappy(), _gappy().assign(unique_id="dead", y=np.nan)], ignore_index=True)
    with pytest.raises(HistoryError, match=r"^series 'dead': no values \(y is empty in all its 93 row\(s\)\)$"):
        fill_gaps(dead, "h", 24)


def test_a_series_on_a_coarser_grid_is_refused_not_filled() -> None:
    from forecasters.validation import fill_gaps

    hourly = _gappy().dropna()
    # hourly rows read as half-hourly were half invented, and daily rows as hourly 96%
    with pytest.raises(HistoryError, match=r"series 'a': 99 of the 191 points of its 30min grid would be filled, "
                                           r"half or more: its rows are mostly 1h apart"):
        fill_gaps(hourly, "30min", 48)
    steps = pd.DataFrame({"unique_id": "b", "ds": np.arange(0, 200, 2), "y": 1.0})
    with pytest.raises(HistoryError, match=r"series 'b': 99 of the 199 points of its integer-step grid would be "
                                           r"filled, half or more: its rows are mostly 2 steps apart; number its steps one apart \(ds / 2\)"):
        fill_gaps(steps, None, 24)
    # a third of the rows missing, or every other y empty, is gappy data on its own grid: filled
    thirds = pd.DataFrame({"unique_id": "c", "ds": [i for i in range(60) if i % 3 != 2], "y": 1.0})
    assert fill_gaps(thirds, None, 24)[1] == {"c": 19}
    every = _gappy().dropna().reset_index(drop=True)
    # (its last row, empty, ends nothing: left out, not filled)
    assert fill_gaps(every.assign(y=every["y"].where(every.index % 2 == 0)), "h", 24)[1] == {"a": 49}
    # every third value, the rest blank cells on the grid (a Grafana export): 67% invented was
    # filled, where the same readings without the blank rows were refused
    with pytest.raises(HistoryError, match=r"series 'a': 64 of the 95 points of its 1h grid would be filled: at "
                                           r"most every third point has a value \(60 rows without one\): too few"):
        fill_gaps(every.assign(y=every["y"].where(every.index % 3 == 0)), "h", 24)


def test_grid_checks_hold_for_any_time_unit_and_kind_of_step() -> None:
    from forecasters.validation import fill_gaps

    hourly = _gappy().dropna()
    # Parquet written by Arrow, DuckDB or Spark holds microseconds: every row read as off the grid
    micro = hourly.assign(ds=hourly["ds"].astype("datetime64[us]"))
    assert fill_gaps(micro, "h", 24)[1] == fill_gaps(hourly, "h", 24)[1]
    with pytest.raises(HistoryError, match="timestamp 0.5 is off the series' integer grid"):
        fill_gaps(pd.DataFrame({"unique_id": "e", "ds": [0.0, 0.5, 1.0, 2.0], "y": 1.0}), None, 24)
    with pytest.raises(HistoryError, match="series 'e': ds must be timestamps for freq='h'"):
        fill_gaps(pd.DataFrame({"unique_id": "e", "ds": np.arange(50), "y": 1.0}), "h", 24)


def test_a_wild_step_is_refused_before_the_grid_is_laid() -> None:
    from forecasters.validation import fill_gaps

    # one mistyped step 10^12 on: the grid alone would need 8 TB
    frame = pd.DataFrame({"unique_id": "a", "ds": np.r_[np.arange(100), 10**12], "y": 1.0})
    with pytest.raises(HistoryError, match=r"series 'a': 999999999900 missing steps from 100 to 999999999999"):
        fill_gaps(frame, None, 24)


def test_values_too_large_for_floating_point_are_refused() -> None:
    # y x 1e306 scored WAPE 0 and MASE 0: the sums overflowed to inf
    frame = _gappy().dropna().assign(y=lambda f: f["y"] * 1e306)
    with pytest.raises(HistoryError, match=r"series 'a': y 1e\+306 at 2026-01-01 01:00:00 is beyond \+-1e\+100"):
        validate_history(frame, "h")


def test_one_long_gap_a_long_season_allows_is_named_not_taken_for_a_coarser_grid() -> None:
    """Hourly rows with 360 hours cut out (season 400): "its rows are mostly 1h apart; give the
    series' own frequency", which is the frequency given."""
    from forecasters.validation import fill_gaps

    ds = pd.date_range("2024-01-01", periods=720, freq="h")
    cut = pd.DataFrame({"unique_id": "a", "ds": ds, "y": 1.0}).drop(index=range(200, 560))
    with pytest.raises(HistoryError, match=r"series 'a': 360 of the 720 points of its 1h grid would be filled, half "
                                           r"or more, 360 of them between the rows at 2024-01-09 07:00:00 and "
                                           r"2024-01-24 08:00:00: cut that span"):
        fill_gaps(cut, "h", 400)


def test_integer_steps_past_what_a_float_holds_exactly_stay_whole() -> None:
    """Steps near 1e18 went through floats: "127 missing steps from 1000000000000000065 to ...064"."""
    from forecasters.validation import fill_gaps

    steps = pd.DataFrame({"unique_id": "a", "ds": np.arange(10**18, 10**18 + 720, dtype=np.int64), "y": 1.0})
    out, filled = fill_gaps(steps, None, 24)
    assert filled == {} and out["ds"].tolist() == steps["ds"].tolist()
