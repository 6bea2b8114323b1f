"""Input checks shared by the planner's modules."""
from __future__ import annotations

from collections.abc import Iterable

import pandas as pd


def require_columns(frame: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    """Raise a clear ValueError naming the missing columns of ``what``."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{what} is missing column(s) {missing}; has {list(frame.columns)}")
