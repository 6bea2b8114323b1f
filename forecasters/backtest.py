"""Rolling-origin cross-validation for any forecaster."""
from __future__ import annotations

import logging
import time

import pandas as pd

from forecasters.base import BaseForecaster
from forecasters.validation import HistoryError, validate_history

log = logging.getLogger(__name__)


def with_horizon(model: BaseForecaster, h: int) -> BaseForecaster:
    """An unfitted copy of ``model`` whose horizon is ``h``."""
    return model.clone().set_params(horizon=h)


def cross_validation(
    model: BaseForecaster,
    history: pd.DataFrame,
    h: int,
    n_windows: int = 1,
    step: int | None = None,
    level: tuple[int, ...] = (80, 95),
    skip_unfit: bool = False,
) -> pd.DataFrame:
    """Refit ``model`` at ``n_windows`` origins and forecast ``h`` steps from each.

    Origins are counted from the end of every series: the last window tests each
    series' last ``h`` points (M4 style), earlier windows move back by ``step``
    (default ``h``). The model sees only data up to the cutoff. Returns the forecast
    frame plus ``cutoff`` and ``y``; the attribute ``attrs['seconds']`` holds the
    total fit-and-predict wall time. With ``skip_unfit``, a series the model cannot fit (a
    HistoryError that names it, ``exc.series``) is left out and the others go on;
    ``attrs['skipped']`` maps each one left out to why. The error stands when it names no
    series or none would be left.
    """
    if skip_unfit:
        skipped: dict[str, str] = {}
        while True:
            try:
                out = cross_validation(model, history, h, n_windows, step, level)
                out.attrs["skipped"] = skipped
                return out
            except HistoryError as exc:
                ids = set(history["unique_id"].astype(str))
                if exc.series is None or exc.series not in ids or len(ids) < 2:
                    if skipped:  # none is left: say the others went too, not only the last one's error
                        others = ", ".join(repr(u) for u in list(skipped)[:5]) + (
                            f" and {len(skipped) - 5} more" if len(skipped) > 5 else "")
                        raise HistoryError(f"{exc} (the other series, {others}, were left out before it as unfit "
                                           "too)", exc.series) from exc
                    raise
                log.info("%s: series %s left out (%s)", model.name, exc.series, exc)
                skipped[exc.series] = str(exc)
                history = history[history["unique_id"].astype(str) != exc.series]
    if n_windows < 1 or h < 1:
        raise ValueError("cross_validation needs h >= 1 and n_windows >= 1")
    if step is not None and int(step) != step:
        raise ValueError(f"cross_validation needs a whole number of steps between origins, got {step}")
    step = h if step is None else int(step)
    if step < 1:
        raise ValueError(f"cross_validation needs step >= 1 (origins {step} apart), got {step}")
    frame = validate_history(history, model.freq)
    lengths = frame.groupby("unique_id", sort=False).size()
    held_out = h + (n_windows - 1) * step
    need = with_horizon(model, h).min_points()
    if int(lengths.min()) < need + held_out:
        uid = lengths.idxmin()
        raise HistoryError(
            f"series {uid!r}: {int(lengths.min())} points, need at least {need + held_out}: {n_windows} "
            f"window(s) of {h} steps {step} apart hold out the last {held_out}, and {model.name} needs "
            f"{need} before them to fit and calibrate; use fewer windows, "
            f"{'origins closer together (--step) or ' if n_windows > 1 and step > h else ''}a shorter horizon", str(uid)
        )
    from_end = frame.groupby("unique_id", sort=False).cumcount(ascending=False).to_numpy()
    parts, seconds = [], 0.0
    for k in range(n_windows):
        offset = h + (n_windows - 1 - k) * step
        train = frame.loc[from_end >= offset]
        test = frame.loc[(from_end < offset) & (from_end >= offset - h)]
        cutoffs = train.groupby("unique_id", sort=False)["ds"].last().rename("cutoff")
        started = time.perf_counter()
        try:
            forecast = with_horizon(model, h).fit(train).predict(h, level=level)
        except HistoryError as exc:
            raise HistoryError(
                f"backtest window {k + 1}/{n_windows} (fit on each series minus its last {offset} points): {exc}",
                exc.series) from exc
        seconds += time.perf_counter() - started
        merged = forecast.merge(test[["unique_id", "ds", "y"]], on=["unique_id", "ds"], how="inner")
        merged = merged.merge(cutoffs, left_on="unique_id", right_index=True)
        if len(merged) != len(test):
            raise RuntimeError(f"{model.name}: forecast rows do not match the test window at offset {offset}")
        parts.append(merged)
        log.info("%s: window %d/%d done", model.name, k + 1, n_windows)
    out = pd.concat(parts, ignore_index=True)
    cols = ["unique_id", "ds", "cutoff", "model", "y", "mean"] + [
        c for lv in level for c in (f"lo_{lv}", f"hi_{lv}")
    ]
    out = out[cols]
    out.attrs["seconds"] = seconds
    out.attrs["skipped"] = {}
    return out

