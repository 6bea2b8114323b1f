"""The Alert value type: what every detector hands to the alerting shell."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
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
    # window keeps its alert: see pipelines.detect.alerts); None: its own
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
