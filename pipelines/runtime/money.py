"""Money as the report and the console write it."""
from __future__ import annotations

import math

# the instance catalog and the plan config name no currency; the converters of the public
# price lists (AWS, GCP) write US dollars, so costs are shown in dollars everywhere
CURRENCY = "$"


def money(value: object) -> str:
    """A cost as the report and the console write it: ``$1,235``, ``-$40``; never ``-$0``
    (what rounds to 0 is ``$0``); ``–`` when unknown."""
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "–"
    if not math.isfinite(v):
        return "–"
    text = f"{abs(v):,.0f}"
    return f"{'-' if v < 0 and text != '0' else ''}{CURRENCY}{text}"
