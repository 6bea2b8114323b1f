"""Spike alerts are critical only where the plan puts load; elsewhere info, or off."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from anomaly.alert import Alert
from pipelines.detect.steps import rank_spike_alerts
from pipelines.store import detection

USED = "aws/us-east-1a/p4d.24xlarge/Linux/UNIX"
OTHER = "aws/us-west-2b/g5.xlarge/Linux/UNIX"


def _spike(entity: str) -> Alert:
    return Alert(kind="price_spike", entity=entity, window_start=pd.Timestamp("2026-01-10"),
                 window_end=pd.Timestamp("2026-01-10 06:00"), severity="critical", probability=0.95,
                 summary="spot price spike predicted")


def _plan(con, run_id: str, created: str, rows: list[dict]) -> None:
    for i, r in enumerate(rows):
        con.execute("INSERT INTO recommendations VALUES (?, 'spot', ?, ?, NULL, '2026-01-09', ?)",
                    [run_id, f"pool{i}/spot", json.dumps(r), created])


def test_the_markets_in_use_are_the_latest_plans_use_spot_rows(con) -> None:
    assert detection.spot_markets_in_use(con) == set()  # no plan yet: no market is in use
    row = {"provider": "aws", "zone": "us-east-1a", "instance_type": "p4d.24xlarge", "product": "Linux/UNIX"}
    _plan(con, "old", "2026-01-01", [{**row, "zone": "us-west-2b", "instance_type": "g5.xlarge", "action": "use_spot"}])
    _plan(con, "new", "2026-01-09", [{**row, "action": "use_spot"},
                                     {**row, "zone": "eu-west-1a", "action": "on_demand"}])
    assert detection.spot_markets_in_use(con) == {USED}


def test_a_spike_where_nothing_runs_is_info_or_off() -> None:
    found = [_spike(USED), _spike(OTHER)]
    ranked = rank_spike_alerts(found, {USED})
    assert [(a.entity, a.severity) for a in ranked] == [(USED, "critical"), (OTHER, "info")]
    assert "no pool's load is planned on this market" in ranked[1].summary
    assert ranked[1].probability == 0.95  # the prediction itself is kept
    assert [a.entity for a in rank_spike_alerts(found, {USED}, "off")] == [USED]
    with pytest.raises(ValueError, match="info, off"):
        rank_spike_alerts(found, {USED}, "drop")
