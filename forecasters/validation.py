"""History validation and time-axis helpers shared by every forecaster.

A history frame is long format ``unique_id, ds, y``. ``ds`` is either a
timezone-naive datetime on a regular grid of ``freq``, or an integer step
(``freq=None``) spaced by 1. Validation happens once, at the boundary.
"""
from __future__ import annotations

import logging
import warnings

import numpy as np
import pandas as pd

REQUIRED = ("unique_id", "ds", "y")

log = logging.getLogger(__name__)


class HistoryError(ValueError):
    """The history frame breaks the data contract; the message names the series, and
    ``series`` holds its id when one series is at fault (a caller may then leave it out)."""

    def __init__(self, message: str, series: str | None = None) -> None:
        super().__init__(message)
        self.series = series


MAX_ABS_Y = 1e100  # beyond, sums and squares of a series overflow float64


def freq_offset(freq: str | None) -> pd.Timedelta | None:
    """The fixed step of ``freq`` ('h', '5min', 'D', ...), or None for integer steps."""
    if freq is None:
        return None
    try:
        with warnings.catch_warnings():  # 'H', 'T': deprecated aliases still mean what they said
            warnings.simplefilter("ignore", FutureWarning)
            offset = pd.tseries.frequencies.to_offset(freq)
    except (ValueError, TypeError) as exc:
        raise HistoryError(f"freq {freq!r} is not a pandas frequency") from exc
    if isinstance(offset, pd.offsets.Week) and offset.n >= 1:
        return pd.Timedelta(days=7 * offset.n)  # 'W', 'W-SUN', ...: a fixed week whatever its weekday
    try:
        step = pd.Timedelta(offset)
    except (ValueError, TypeError) as exc:
        raise HistoryError(f"freq {freq!r} is not a fixed-length pandas frequency (months, quarters, years and "
                           "business days vary in length): give ds as integer steps 0, 1, 2, ... and no freq "
                           "(--freq omitted)") from exc
    if step <= pd.Timedelta(0):
        raise HistoryError(f"freq {freq!r} must be positive")
    return step


def default_seasons(freq: str | None, season_length: int) -> tuple[int, ...]:
    """Seasonal periods in steps: hourly data with a daily season also gets the weekly one."""
    step = freq_offset(freq)
    if step == pd.Timedelta(hours=1) and season_length == 24:
        return (24, 168)
    return (season_length,)


def step_index(ds: pd.Series | pd.Index | np.ndarray, freq: str | None) -> np.ndarray:
    """Integer position of each timestamp on the global ``freq`` grid (epoch-based, from a
    Monday); a series sampled at a constant offset from it (hourly at :30, weekly on
    Sundays) counts its steps the same way."""
    step = freq_offset(freq)
    if step is None:
        return np.asarray(ds, dtype=np.int64)
    values = pd.DatetimeIndex(ds).as_unit("ns").asi8 - pd.Timestamp("1970-01-05").value  # a Monday, in ns
    return values // step.value


def future_ds(last: object, h: int, freq: str | None) -> np.ndarray:
    """The ``h`` timestamps (or integer steps) after ``last``."""
    step = freq_offset(freq)
    if step is None:
        return int(last) + np.arange(1, h + 1, dtype=np.int64)
    return (pd.Timestamp(last) + pd.to_timedelta(np.arange(1, h + 1) * step.value, unit="ns")).to_numpy()


def validate_history(
    history: pd.DataFrame, freq: str | None, min_length: int = 1
) -> pd.DataFrame:
    """Check the data contract and return a clean copy sorted by ``unique_id, ds``.

    Raises :class:`HistoryError` naming the first offending series when keys repeat,
    ``y`` is missing or not finite, the grid is irregular or gappy, or a series is
    shorter than ``min_length``.
    """
    missing = [c for c in REQUIRED if c not in history.columns]
    if missing:
        raise HistoryError(f"history is missing column(s) {missing}; need {list(REQUIRED)}")
    if history.empty:
        raise HistoryError("history is empty")
    frame = history.loc[:, list(REQUIRED)].copy()
    if frame["unique_id"].isna().any():
        raise HistoryError(f"unique_id has {int(frame['unique_id'].isna().sum())} missing value(s): "
                           "every row must name its series")
    frame["unique_id"] = frame["unique_id"].astype(str)
    step = freq_offset(freq)
    if step is None:
        if not pd.api.types.is_integer_dtype(frame["ds"]):
            raise HistoryError("ds must be integer steps when freq is None (or pass freq)")
    else:
        if not pd.api.types.is_datetime64_any_dtype(frame["ds"]):
            raise HistoryError(f"ds must be datetimes for freq={freq!r}")
        if getattr(frame["ds"].dt, "tz", None) is not None:
            raise HistoryError("ds must be timezone-naive UTC")
        frame["ds"] = frame["ds"].astype("datetime64[ns]")
    try:
        frame["y"] = frame["y"].astype(float)
    except (TypeError, ValueError) as exc:
        raise HistoryError("y must be numeric") from exc
    frame = frame.sort_values(["unique_id", "ds"], kind="stable").reset_index(drop=True)

    bad_y = ~np.isfinite(frame["y"].to_numpy())
    if bad_y.any():
        uid = frame.loc[bad_y, "unique_id"].iloc[0]
        own = int((bad_y & (frame["unique_id"] == uid).to_numpy()).sum())  # this series' own, not the file's
        first = frame.loc[bad_y, "ds"].iloc[0]
        raise HistoryError(f"series {uid!r}: y has {own} missing or non-finite value(s), the first at {first}", str(uid))
    huge = np.abs(frame["y"].to_numpy()) > MAX_ABS_Y
    if huge.any():  # sums and squares of such values overflow: scores of 0 and intervals of inf
        row = frame.loc[huge].iloc[0]
        raise HistoryError(f"series {row.unique_id!r}: y {row.y:.3g} at {row.ds} is beyond +-{MAX_ABS_Y:.0e}, too "
                           "large to forecast in floating point (rescale it)", str(row.unique_id))
    dup = frame.duplicated(["unique_id", "ds"])
    if dup.any():
        row = frame.loc[dup].iloc[0]
        raise HistoryError(f"series {row.unique_id!r}: duplicate ds {row.ds}", str(row.unique_id))

    idx = step_index(frame["ds"], freq)
    if step is not None:  # each series keeps one phase on the grid (e.g. every hour at :30)
        ns = pd.DatetimeIndex(frame["ds"]).as_unit("ns").asi8
        phase = pd.Series((ns - pd.Timestamp("1970-01-05").value) % step.value)
        off = phase.to_numpy() != phase.groupby(frame["unique_id"].to_numpy()).transform("first").to_numpy()
        if off.any():
            row = frame.loc[off].iloc[0]
            raise HistoryError(f"series {row.unique_id!r}: timestamp {row.ds} is off the series' {freq!r} grid "
                               "(its timestamps must be whole steps apart)", str(row.unique_id))
    same = frame["unique_id"].to_numpy()[1:] == frame["unique_id"].to_numpy()[:-1]
    gaps = np.diff(idx)[same] != 1
    if gaps.any():
        pos = np.flatnonzero(same)[gaps][0] + 1
        row = frame.iloc[pos]
        raise HistoryError(
            f"series {row.unique_id!r}: irregular or gappy time axis at {row.ds} "
            f"(expected one row every {freq or 1}); fill or resample before forecasting", str(row.unique_id)
        )
    lengths = frame.groupby("unique_id", sort=False).size()
    short = lengths[lengths < min_length]
    if not short.empty:
        raise HistoryError(
            f"series {short.index[0]!r}: {int(short.iloc[0])} points, need at least {min_length}",
            str(short.index[0]))
    return frame


FILL_METHODS = ("seasonal", "interpolate", "zero", "none")


def fill_gaps(history: pd.DataFrame, freq: str | None, season_length: int,
              method: str = "seasonal") -> tuple[pd.DataFrame, dict[str, int]]:
    """``history`` on a full grid per series, the missing steps (and missing ``y``) filled,
    and the count of filled points per series.

    ``seasonal``: a missing step takes the value one season before (when that is known or
    filled itself), else linear interpolation; ``interpolate``: linear between its neighbours
    (held at the ends); ``zero``: 0 (a silent exporter meant idle); ``none``: nothing is filled
    (gaps stay an error of :func:`validate_history`). A gap longer than one season is a
    HistoryError naming the series and the span: no value a season back exists to fill it from.
    """
    if method not in FILL_METHODS:
        raise HistoryError(f"unknown gap filling {method!r}; choose from {', '.join(FILL_METHODS)}")
    if history.empty:
        return history, {}
    if method == "none":  # no filling; an export's placeholder rows at the ends still go
        return _without_empty_ends(history), {}
    frame = history.copy()
    frame["unique_id"] = frame["unique_id"].astype(str)
    step = freq_offset(freq)
    out, counts = [], {}
    for uid, g in frame.groupby("unique_id", sort=True):
        g = g.sort_values("ds")
        dup = g["ds"].duplicated()
        if dup.any():
            raise HistoryError(f"series {uid!r}: duplicate ds {g.loc[dup, 'ds'].iloc[0]}")
        s = g.set_index("ds")["y"].astype(float)
        known = np.flatnonzero(np.isfinite(s.to_numpy()))
        if not known.size:  # rows, but not one value: no span to fill
            raise HistoryError(f"series {uid!r}: no values (y is empty in all its {len(s)} row(s))", str(uid))
        if (known[0] > 0 or known[-1] < len(s) - 1):
            # rows with no value before a series' first reading or after its last (an export's
            # placeholder rows) are no gap: the series starts and ends at its readings
            log.warning("series %r: %d row(s) with no value before its first reading or after its last left out",
                        uid, len(s) - (known[-1] - known[0] + 1))
            s = s.iloc[known[0]:known[-1] + 1]
        _check_steps(str(uid), s.index, np.isfinite(s.to_numpy()), step, freq, season_length)
        grid = (pd.RangeIndex(int(s.index.min()), int(s.index.max()) + 1) if step is None
                else pd.date_range(s.index.min(), s.index.max(), freq=step))
        full = s.reindex(grid)
        missing = ~np.isfinite(full.to_numpy())
        if missing.any():
            edges = np.flatnonzero(np.diff(np.r_[0, missing.astype(np.int8), 0]))
            runs = list(zip(edges[::2], edges[1::2]))
            a, b = max(runs, key=lambda r: r[1] - r[0])
            if b - a > season_length:
                raise HistoryError(f"series {uid!r}: {b - a} missing steps from {grid[a]} to {grid[b - 1]}, longer "
                                   f"than one season ({season_length}); fill or cut that span before forecasting")
            values = full.to_numpy(dtype=float).copy()
            values[missing] = np.nan
            if method == "zero":
                values[missing] = 0.0
            elif method == "seasonal":
                for i in np.flatnonzero(missing):  # in time order: a filled step can seed one a season on
                    if i >= season_length and np.isfinite(values[i - season_length]):
                        values[i] = values[i - season_length]
            if not np.isfinite(values).all():
                values = pd.Series(values).interpolate(limit_direction="both").to_numpy()
            full = pd.Series(values, index=grid)
            counts[uid] = int(missing.sum())
        out.append(pd.DataFrame({"unique_id": uid, "ds": full.index, "y": full.to_numpy()}))
    filled = pd.concat(out, ignore_index=True)
    if step is None:
        filled["ds"] = filled["ds"].astype("int64")
    return filled, counts


def _without_empty_ends(history: pd.DataFrame) -> pd.DataFrame:
    """``history`` less each series' rows with no value before its first reading or after its
    last (one warning per series that had any), the rest as it was."""
    y = pd.to_numeric(history["y"], errors="coerce").to_numpy(dtype=float)
    order = history.assign(_ok=np.isfinite(y)).sort_values(["unique_id", "ds"], kind="stable")
    seen = order.groupby("unique_id", sort=False)["_ok"]
    inside = seen.cummax() & seen.transform(lambda k: k[::-1].cummax()[::-1])
    by = inside.groupby(order["unique_id"], sort=True)
    valued = by.any()
    for uid, n in (by.size() - by.sum())[valued].items():
        if n:
            log.warning("series %r: %d row(s) with no value before its first reading or after its last left out",
                        str(uid), int(n))
    keep = inside | ~by.transform("any")  # a series with no value at all is kept: validation names it
    return history.loc[keep.reindex(history.index)]


def _check_steps(uid: str, ds: pd.Index, known: np.ndarray, step: pd.Timedelta | None, freq: str | None,
                 season_length: int) -> None:
    """Before a series is laid on its grid (which a wild timestamp would make huge): every
    row whole steps apart, no gap (with the rows whose y is ``known`` not) longer than a
    season, and the missing rows fewer than the rows there are, less one (a series on a
    coarser grid than ``freq`` would be half filled or more)."""
    if step is not None:
        if not isinstance(ds, pd.DatetimeIndex):
            raise HistoryError(f"series {uid!r}: ds must be timestamps for freq={freq!r}", uid)
        at, size = ds.as_unit("ns").asi8, step.value  # Parquet from Arrow, DuckDB or Spark holds us
    elif pd.api.types.is_integer_dtype(ds):  # as integers: a float holds no step past 2**53 exactly
        at, size = np.asarray(ds, dtype=np.int64), 1
    else:
        values = np.asarray(ds, dtype=float)
        off = values != np.round(values)
        if off.any():
            raise HistoryError(f"series {uid!r}: timestamp {values[off][0]:g} is off the series' integer grid "
                               "(its steps must be whole numbers)", uid)
        at, size = values.astype(np.int64), 1
    gaps = np.diff(at)
    off = gaps % size != 0
    if off.any():
        raise HistoryError(f"series {uid!r}: timestamp {ds[int(np.flatnonzero(off)[0]) + 1]} is off the series' "
                           f"{freq!r} grid (its timestamps must be whole steps apart)", uid)
    kept = ds[known]
    steps = np.diff(at[known]) // size
    if steps.size and steps.max() - 1 > season_length:
        i = int(np.argmax(steps))
        one = 1 if step is None else step
        raise HistoryError(f"series {uid!r}: {int(steps[i]) - 1} missing steps from {kept[i] + one} to "
                           f"{kept[i + 1] - one}, longer than one season ({season_length}); fill or cut that span "
                           "before forecasting", uid)
    missing = int((gaps // size - 1).sum())
    if len(at) > 2 and missing >= len(at) - 1:
        common = pd.Series(gaps // size).mode().iloc[0]
        every, one = (f"{common} steps", "integer-step") if step is None else (_span(step * int(common)), _span(step))
        if common == 1:  # rows a step apart around a few long gaps (a long season let them pass): the gaps' fault
            i = int(np.argmax(gaps))
            raise HistoryError(f"series {uid!r}: {missing} of the {missing + len(at)} points of its {one} grid would "
                               f"be filled, half or more, {int(gaps[i] // size) - 1} of them between the rows at "
                               f"{ds[i]} and {ds[i + 1]}: cut that span before forecasting", uid)
        # integer steps have no frequency to give: their numbering is the grid
        fix = (f"number its steps one apart (ds / {common})" if step is None
               else "give the series' own frequency")
        raise HistoryError(f"series {uid!r}: {missing} of the {missing + len(at)} points of its {one} grid would "
                           f"be filled, half or more: its rows are mostly {every} apart; {fix}", uid)
    # rows there without a value (an export's full grid of blank cells) fill as absent rows do;
    # on the series' own grid, until at most every third point has a value (scores on a handful)
    blank, n = int((steps - 1).sum()), int(np.count_nonzero(known))  # steps: between the readings, above
    if n > 2 and n < len(at) and blank >= 2 * (n - 1):  # two blanks or more per reading
        one = "integer-step" if step is None else _span(step)
        raise HistoryError(f"series {uid!r}: {blank} of the {blank + n} points of its {one} grid would be filled: "
                           f"at most every third point has a value ({len(at) - n} rows without one): too few "
                           "readings to forecast from", uid)


def _span(td: pd.Timedelta) -> str:
    text = pd.tseries.frequencies.to_offset(td).freqstr
    return text if text[0].isdigit() else f"1{text}"  # 'h' -> '1h'
