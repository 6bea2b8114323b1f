"""``headroom plan replay`` on legal but degenerate demand."""
from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.cli import main
from tests.pipelines.test_plan_replay import tide, utilization_csv


def test_a_pool_without_demand_replays_and_says_why_no_ratio(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Every cost_vs_oracle printed NaN (the oracle holds nothing) and --out wrote empty cells."""
    src = utilization_csv(tmp_path / "u.csv", tide(3) * 0)
    assert main(["plan", "replay", "--utilization", str(src), "--models", "seasonal_naive",
                 "--out", str(tmp_path / "t.csv")]) == 0
    out = capsys.readouterr().out
    assert "NaN" not in out and "nan" not in out
    assert "cost_vs_oracle is -: the oracle holds no capacity (no demand in the span)" in out
