"""One reading of a duration for every option, setting and config value (``30min``, ``2h``,
``7D``), so that each refusal is worded the same way wherever it is given."""
from __future__ import annotations

import re

import pandas as pd

EXAMPLE = "(e.g. 30min, 2h, 7D)"


def parse_duration(value: object, option: str | None = None, *, most: pd.Timedelta | None = None,
                   zero: bool = False) -> pd.Timedelta:
    """A duration with a unit -> Timedelta; a ValueError that says what it is not.

    A bare number is refused (pandas would read ``5`` as 5 nanoseconds), as are NaN and
    negative durations, zero unless ``zero``, and anything over ``most``. ``option`` (say
    ``--lead``) starts the message when given."""
    text = str(value).strip()
    try:
        span = _reading(value, text)
        if span == pd.Timedelta.max and most is None:  # past pandas' ~292 years
            raise ValueError(f"{value!r} is longer than pandas can hold (about 292 years)")
        if span < pd.Timedelta(0):
            raise ValueError(f"{value!r} is negative" if zero else f"{value!r} is not a positive duration {EXAMPLE}")
        if span == pd.Timedelta(0) and not zero:
            raise ValueError(f"{value!r} is not a positive duration {EXAMPLE}")
        if most is not None and span > most:
            raise ValueError(f"{value!r} is longer than {_days(most)}")
    except ValueError as exc:
        raise ValueError(f"{option}: {exc}" if option else str(exc)) from None
    return span


def _reading(value: object, text: str) -> pd.Timedelta:
    if re.fullmatch(r"[+-]?\d+(\.\d*)?", text):
        raise ValueError(f"{value!r} has no unit {EXAMPLE}")
    try:
        span = pd.Timedelta(text)
    except (pd.errors.OutOfBoundsTimedelta, pd.errors.OutOfBoundsDatetime):
        return pd.Timedelta.min if text.startswith("-") else pd.Timedelta.max
    except (ValueError, TypeError):
        raise ValueError(f"{value!r} is not a duration {EXAMPLE}") from None
    if pd.isna(span):
        raise ValueError(f"{value!r} is not a duration {EXAMPLE}")
    return span


def _days(span: pd.Timedelta) -> str:
    return f"{span.days} day{'s' * (span.days != 1)}"
