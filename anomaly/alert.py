"""The Alert value type: what every detector hands to the alerting shell."""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

import pandas as pd

KINDS = ("burst", "hardware_fault", "price_spike")
SEVERITIES = ("info", "warning", "critical")


@dataclass(frozen=True)
class Alert:
    """One alert. Its identity (the fingerprint) is ``(kind, entity, window)`` only, so
    re-detecting the same condition in the same window yields the same fingerprint."""

    kind: str
    entity: str
    window_start: datetime
    window_end: datetime
    severity: str = "warning"
    probability: float | None = None
    summary: str = ""
    runbook: str = ""
    labels: tuple[tuple[str, str], ...] = field(default=())
    # the fingerprint of the firing alert this one goes on (a prediction renewed into the next
    # window keeps its alert: see goes_on); None: its own
    key: str | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"alert kind must be one of {KINDS}, got {self.kind!r}")
        if self.severity not in SEVERITIES:
            raise ValueError(f"alert severity must be one of {SEVERITIES}, got {self.severity!r}")
        if self.probability is not None and not 0.0 <= self.probability <= 1.0:
            raise ValueError(f"alert probability must be in [0, 1], got {self.probability}")
        start, end = pd.Timestamp(self.window_start), pd.Timestamp(self.window_end)
        if start.tzinfo is not None or end.tzinfo is not None:
            raise ValueError("alert windows are naive UTC timestamps")
        if end < start:
            raise ValueError(f"alert window ends before it starts: {start} > {end}")
        # Normalise to pandas Timestamps so equal windows compare (and hash) equal.
        object.__setattr__(self, "window_start", start)
        object.__setattr__(self, "window_end", end)

    @property
    def fingerprint(self) -> str:
        """A stable 16-hex-digit id from kind, entity and window (or the alert it goes on)."""
        if self.key is not None:
            return self.key
        key = "|".join(
            [self.kind, self.entity, self.window_start.isoformat(), self.window_end.isoformat()]
        )
        return hashlib.sha256(key.encode()).hexdigest()[:16]

    def to_record(self) -> dict[str, object]:
        """A flat dict for the ``alerts`` table and the sinks."""
        return {
            "fingerprint": self.fingerprint,
            "kind": self.kind,
            "entity": self.entity,
            "severity": self.severity,
            "probability": self.probability,
            "window_start": self.window_start.to_pydatetime(),
            "window_end": self.window_end.to_pydatetime(),
            "summary": self.summary,
            "runbook": self.runbook,
            "labels": dict(self.labels),
        }


def severity_for(probability: float, warning: float = 0.5, critical: float = 0.8) -> str:
    """Map a probability to a severity band."""
    if probability >= critical:
        return "critical"
    if probability >= warning:
        return "warning"
    return "info"


# predictions: one renewed while its alert fires is the same condition, in a later window
GOES_ON = ("hardware_fault", "price_spike")


def goes_on(kind: str, current: Sequence[Alert], existing: pd.DataFrame, now: datetime) -> list[Alert]:
    """``current`` (alerts of ``kind`` found now) with each prediction whose entity has a
    firing alert in ``existing`` (the ``alerts`` rows of ``kind``), with a window that
    reaches its own, keyed to that alert and its window stretched to cover both. A spike
    predicted at 17:55 (window 12:00-00:00) and again at 18:05 (18:00-06:00) resolved and fired
    anew, as the windows differ; a receiver heard one ongoing condition end and start again."""
    if kind not in GOES_ON or existing.empty:
        return list(current)
    firing = existing[(existing["status"] == "firing") & (pd.to_datetime(existing["starts_at"]) <= pd.Timestamp(now))]
    newest = {r.entity: r for r in firing.sort_values("window_start").itertuples(index=False)}
    out, taken = [], set()
    for a in current:
        old = newest.get(a.entity)
        if old is None or old.fingerprint in taken or old.fingerprint == a.fingerprint \
                or pd.Timestamp(old.window_end) < a.window_start:
            out.append(a)
            continue
        taken.add(old.fingerprint)
        out.append(replace(a, window_start=pd.Timestamp(old.window_start),
                           window_end=max(pd.Timestamp(old.window_end), a.window_end), key=old.fingerprint))
    return out
