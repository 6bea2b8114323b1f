"""``headroom backtest``: rolling-origin evaluation of any models on any long-format file."""
from __future__ import annotations

import argparse
import contextlib
import logging
import time
from pathlib import Path

import numpy as np
import pandas as pd

from pipelines.runtime.outputs import check_writable, write_csv

log = logging.getLogger(__name__)

CSV_COLUMNS = ["model", "smape", "mase", "wape", "coverage_80", "coverage_95", "seconds"]
DEFAULT_MODELS = "seasonal_naive,ets,prophet,lgbm,prophet_lgbm,lstm,ensemble"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "backtest",
        help="backtest forecasters on a long-format unique_id,ds,y file",
        description="Rolling-origin backtest. With --windows 1 the test window is the last H points "
        "of every series (M4 style).",
    )
    p.add_argument("--input", required=True, type=Path, help="CSV or Parquet with unique_id,ds,y")
    p.add_argument("--horizon", required=True, type=int, help="forecast horizon H (steps)")
    p.add_argument("--season-length", required=True, type=int, help="main seasonal period in steps")
    p.add_argument("--freq", default=None, help="pandas frequency of ds (h, 5min, D); omit for integer steps")
    p.add_argument("--models", default=None,
                   help=f"comma-separated (default {DEFAULT_MODELS}; a default model the data are too short "
                        "for is left out with a warning, a named one is an error)")
    p.add_argument("--windows", type=int, default=1, help="number of backtest windows (default 1)")
    p.add_argument("--step", type=int, default=None, help="steps between window origins (default H)")
    p.add_argument("--out", type=Path, default=None, help="write the metrics CSV here")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fill-gaps", choices=["seasonal", "interpolate", "zero", "none"], default="seasonal",
                   help="missing steps: the value one season before, else interpolated (seasonal, the default); "
                        "interpolated; 0; or none (a gap is an error). A gap over one season is an error")
    p.set_defaults(func=run)


def read_series(path: Path, freq: str | None) -> pd.DataFrame:
    """Read a long-format CSV/Parquet file into unique_id (str), ds, y (float)."""
    from forecasters.validation import freq_offset
    from pipelines.commands.errors import CliError
    from pipelines.ingest.tables import read_csv_text, separator_hint, unreadable

    if path.is_dir():
        raise CliError(f"{path}: is a folder, not a file", 2)
    if not path.is_file():
        raise CliError(f"{path}: no such file", 2)
    try:
        frame = read_csv_text(path, ("unique_id",))
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise CliError(unreadable(path, exc), 2) from exc
    twice = [c for c in ("unique_id", "ds", "y") if f"{c}.1" in frame.columns]  # pandas' name for a repeat
    if twice:
        raise CliError(f"{path}: column {twice[0]} appears twice in the header; keep one", 2)
    missing = {"unique_id", "ds", "y"} - set(frame.columns)
    if missing:
        raise CliError(f"{path}: missing column(s) {sorted(missing)}; need unique_id,ds,y"
                       f"{separator_hint(list(frame.columns))}", 2)
    out = frame[["unique_id", "ds", "y"]].reset_index(drop=True)

    from pipelines.ingest.tables import row_label

    def where(pos: int) -> str:
        return row_label(path, pos)

    for col in ("unique_id", "ds"):
        empty = out[col].isna() | (out[col].astype(str).str.strip() == "")
        if empty.any():
            raise CliError(f"{path}: {where(out.index[empty.to_numpy()][0])}, column {col}: empty", 2)
    out["unique_id"] = out["unique_id"].astype(str)
    is_time = pd.api.types.is_datetime64_any_dtype(out["ds"])
    is_number = pd.api.types.is_numeric_dtype(out["ds"])
    if freq is None and is_time:
        raise CliError(f"{path}: ds holds timestamps; pass --freq (h, 5min, D) to use them", 2)
    if freq is not None and is_number:
        # ISO 8601's basic date (20240101) reads as a number: dates, when every one is one
        text = out["ds"].astype("string").str.removesuffix(".0")
        dated = pd.to_datetime(text.where(text.str.fullmatch(r"\d{8}")), format="%Y%m%d", errors="coerce")
        if not dated.notna().all():
            raise CliError(f"{path}: ds holds integer steps, not timestamps; omit --freq for integer steps", 2)
        out["ds"], is_time, is_number = dated, True, False
    if freq is None:
        ds = pd.to_numeric(out["ds"], errors="coerce")
        bad = ds.isna() | (ds != ds.round())
        if bad.any():
            row = out.index[bad.to_numpy()][0]
            raise CliError(f"{path}: {where(row)}, column ds: {_shown(out.at[row, 'ds'])} is not an integer step "
                           "(pass --freq for timestamps)", 2)
        out["ds"] = ds.astype("int64")
    else:
        ds, fmt = _timestamps(out["ds"], is_time)
        if ds.isna().any():
            row = out.index[ds.isna().to_numpy()][0]
            raise CliError(f"{path}: {where(row)}, column ds: {_shown(out.at[row, 'ds'])} is not a timestamp"
                           + (f" in the format of the first row ({fmt}); write one format, ISO 8601 best "
                              "(2024-01-13T00:00:00Z)" if fmt else ""), 2)
        # daily (or longer) rows are days: read at their local date, so that a DST change,
        # which moves the offset of local midnight, does not move a row off the grid
        daily = freq_offset(freq) >= pd.Timedelta(days=1)  # (a fixed length: run() checked it)
        local = _wall_clock(out["ds"], is_time) if daily else None
        out["ds"] = ds.dt.tz_localize(None) if local is None else local
    kind = out["y"].dtype
    if pd.api.types.is_datetime64_any_dtype(kind) or pd.api.types.is_timedelta64_dtype(kind) \
            or pd.api.types.is_bool_dtype(kind):  # a typed Parquet column, not numbers: read as epochs or 0/1
        row = out.index[out["y"].notna().to_numpy()][0] if out["y"].notna().any() else 0
        raise CliError(f"{path}: {where(row)}, column y: {_shown(str(out.at[row, 'y']))} is not a number (the column "
                       f"holds {kind})", 2)
    y = pd.to_numeric(out["y"], errors="coerce")
    bad = y.isna() & out["y"].notna()
    if bad.any():
        row = out.index[bad.to_numpy()][0]
        value = out.at[row, "y"]
        with contextlib.suppress(TypeError, ValueError):  # '1e400' is a number, past what a float holds
            if np.isinf(float(str(value).strip())):
                raise CliError(f"{path}: {where(row)}, column y: {_shown(value)} is not a finite number", 2)
        raise CliError(f"{path}: {where(row)}, column y: {_shown(value)} is not a number", 2)
    infinite = np.isinf(y.to_numpy(dtype=float))  # not a gap to fill: a value that cannot be scored
    if infinite.any():
        row = out.index[infinite][0]
        raise CliError(f"{path}: {where(row)}, column y: {y.iloc[row]} is not a finite number", 2)
    out["y"] = y.astype(float)
    # a row repeated as it was (an export that overlaps itself) is read once, as ingest does; a
    # time twice with two values is an error naming the second
    again = out.duplicated(["unique_id", "ds"])
    if again.any():
        same = out.duplicated(["unique_id", "ds", "y"])
        if (again & ~same).any():
            row = out.index[(again & ~same).to_numpy()][0]
            raise CliError(f"{path}: {where(row)}: series {out.at[row, 'unique_id']!r} at {out.at[row, 'ds']} a "
                           f"second time, with another y ({_shown(out.at[row, 'y'])}); keep one", 2)
        log.warning("%s: %d repeated row(s) (the same series, time and y) read once", path, int(same.sum()))
        out = out[~same].reset_index(drop=True)
    return out


def _timestamps(ds: pd.Series, typed: bool) -> tuple[pd.Series, str | None]:
    """``ds`` as UTC timestamps (NaT where unreadable), and the format the text was read in when
    not ISO 8601. ISO 8601 first (offsets included); else the first row's format, for every row:
    each row read on its own took 01/02 as January and 13/02 as February in one file."""
    from pandas.tseries.api import guess_datetime_format

    if typed:
        return pd.to_datetime(ds, utc=True), None
    try:
        return pd.to_datetime(ds, utc=True, format="ISO8601"), None
    except (ValueError, TypeError):
        pass
    fmt = guess_datetime_format(str(ds.iloc[0]).strip()) if len(ds) else None
    if fmt is None:  # a form with no one format: each row as it reads
        return pd.to_datetime(ds, utc=True, format="mixed", errors="coerce"), None
    return pd.to_datetime(ds.astype(str).str.strip(), utc=True, format=fmt, errors="coerce"), fmt


_OFFSET = r"^(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)\s*(?:Z|[+-]\d{2}(?::?\d{2})?)$"


def _wall_clock(ds: pd.Series, typed: bool) -> pd.Series | None:
    """``ds`` at the local times written (their offsets dropped) when every row carries a
    zone or an ISO 8601 offset, else None."""
    if typed:
        return ds.dt.tz_localize(None) if getattr(ds.dt, "tz", None) is not None else None
    parts = ds.astype(str).str.strip().str.extract(_OFFSET)[0]
    if parts.isna().any():
        return None
    return pd.to_datetime(parts, format="ISO8601")


def _shown(value: object) -> str:
    """A cell as the file has it: ``0.5``, not numpy's ``np.float64(0.5)``."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def backtest_models(
    history: pd.DataFrame, names: list[str], horizon: int, season_length: int, freq: str | None,
    windows: int, step: int | None, seed: int, skip_short: bool = False,
    unscored: pd.MultiIndex | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(metrics table with CSV_COLUMNS plus extras, the cross-validation frame of every model).
    With ``skip_short``, a model the series are too short for is left out (logged); the
    error stands when it is every model. Forecasts of the ``unscored`` (unique_id, ds) points
    (filled gaps: no actual to score against) are left out of the metrics."""
    import forecasters

    rows, frames, too_short = [], [], []
    for name in names:
        model = forecasters.create(name, horizon=horizon, freq=freq, season_length=season_length, seed=seed)
        started = time.perf_counter()
        try:  # a series the model cannot fit is skipped for that model; the others go on
            cv = forecasters.cross_validation(model, history, h=horizon, n_windows=windows, step=step,
                                              skip_unfit=True)
            skipped = cv.attrs["skipped"]
        except forecasters.HistoryError as exc:
            if not skip_short:
                raise
            log.warning("%s left out: %s", name, exc)
            too_short.append(exc)
            cv, skipped = None, {}
        for uid, why in skipped.items():
            print(f"{name}: series {uid} skipped ({why})")
        if cv is None:
            continue
        log.info("%s: %d forecasts in %.1fs", name, len(cv), time.perf_counter() - started)
        scored = cv
        if unscored is not None and len(unscored):
            scored = cv[~pd.MultiIndex.from_arrays([cv["unique_id"].astype(str), cv["ds"]]).isin(unscored)]
        if scored.empty:
            raise forecasters.HistoryError(f"{name}: every point its backtest windows forecast is a filled gap, "
                                           "with no reading to score against: use fewer --windows or a shorter --step")
        row = forecasters.evaluate(scored, history, season_length).iloc[0].to_dict()
        row["seconds"] = cv.attrs["seconds"]
        rows.append(row)
        frames.append(cv)
    if not rows:  # every model: the first one's requirement (the default list starts with the least needy)
        raise too_short[0]
    table = pd.DataFrame(rows)
    return table[CSV_COLUMNS + [c for c in table.columns if c not in CSV_COLUMNS]], pd.concat(frames, ignore_index=True)


def run(args: argparse.Namespace) -> int:
    import forecasters
    from pipelines.commands.errors import CliError, check_seed, model_names

    check_seed(args.seed)
    if args.out is not None:  # before the work, not after it
        check_writable(args.out)  # (over --input: refused by the cli for every command)

    names = model_names(args.models, DEFAULT_MODELS.split(","))
    if args.horizon < 1 or args.season_length < 1 or args.windows < 1:
        raise CliError("--horizon, --season-length and --windows must be >= 1", 2)
    if args.step is not None and args.step < 1:
        raise CliError(f"--step must be >= 1 (steps between window origins), got {args.step}", 2)
    if args.freq is not None:
        try:
            forecasters.validation.freq_offset(args.freq)
        except forecasters.HistoryError as exc:
            raise CliError(str(exc), 2) from exc
    history = read_series(args.input, args.freq)
    given = history.loc[history["y"].notna(), ["unique_id", "ds"]]
    try:
        history, filled = forecasters.validation.fill_gaps(history, args.freq, args.season_length, args.fill_gaps)
        forecasters.validate_history(history, args.freq)  # the data's own faults stop here, not per model
    except forecasters.HistoryError as exc:
        raise CliError(f"{args.input}: {exc}", 2) from exc
    unscored = None
    if filled:
        print(f"{args.input}: filled {sum(filled.values())} missing point(s) in {len(filled)} series "
              f"({args.fill_gaps}); a forecast of a filled point is not scored")
        keys = pd.MultiIndex.from_arrays([history["unique_id"].astype(str), history["ds"]])
        unscored = keys[~keys.isin(pd.MultiIndex.from_frame(given))]
    try:
        table, _ = backtest_models(history, names, args.horizon, args.season_length, args.freq,
                                   args.windows, args.step, args.seed, skip_short=args.models is None,
                                   unscored=unscored)
    except forecasters.HistoryError as exc:
        raise CliError(f"{args.input}: {exc}", 2) from exc
    print(table[CSV_COLUMNS].to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    if args.out is not None:
        write_csv(table[CSV_COLUMNS], args.out)
        print(f"wrote {args.out}")
    return 0
