"""Shared detector plumbing: the not-fitted check and frame checks.

Detectors are scikit-learn estimators (:class:`~sklearn.base.BaseEstimator`), as the
forecasters are; both raise scikit-learn's :class:`NotFittedError`, re-exported here.
"""
from __future__ import annotations

from collections.abc import Iterable

import pandas as pd
from sklearn.exceptions import NotFittedError as NotFittedError  # re-exported: one class, core-wide
from sklearn.utils.validation import check_is_fitted


def check_fitted(estimator: object, attribute: str) -> None:
    """Raise :class:`NotFittedError` unless ``estimator`` has the learned ``attribute``."""
    check_is_fitted(estimator, attribute, msg="%(name)s is not fitted yet: call fit() before using it")


def require_columns(frame: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    """Raise a clear ValueError naming the missing columns of ``what``."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{what} is missing column(s) {missing}; has {list(frame.columns)}")


def infer_freq(ds: pd.Series) -> pd.Timedelta:
    """The most common step between consecutive timestamps (per series callers pass one)."""
    diffs = pd.Series(ds).sort_values().diff().dropna()
    diffs = diffs[diffs > pd.Timedelta(0)]
    if diffs.empty:
        raise ValueError("cannot infer a frequency from fewer than two distinct timestamps")
    return pd.Timedelta(diffs.mode().iloc[0])


def short_duration(value: str | pd.Timedelta) -> str:
    """A duration as a person writes it (``90min``, ``24h``, ``2d``), for messages."""
    td = pd.Timedelta(value)
    for unit, size in (("d", pd.Timedelta(days=1)), ("h", pd.Timedelta(hours=1)),
                       ("min", pd.Timedelta(minutes=1)), ("s", pd.Timedelta(seconds=1))):
        if td % size == pd.Timedelta(0) and td != pd.Timedelta(0):
            return f"{td // size}{unit}"
    return str(td)


def rough_duration(value: str | pd.Timedelta) -> str:
    """An age or a lag to the hour (``49h``, ``321d 3h``), to the minute under an hour."""
    td = pd.Timedelta(value)
    if td >= pd.Timedelta(days=3):
        hours = int((td - pd.Timedelta(days=td.days)) // pd.Timedelta(hours=1))
        return f"{td.days}d" + (f" {hours}h" if hours else "")
    td = td.floor("h") if td >= pd.Timedelta(hours=1) else td.floor("min")
    return short_duration(td) if td > pd.Timedelta(0) else "0min"
