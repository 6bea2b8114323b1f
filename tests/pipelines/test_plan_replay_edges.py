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


def test_a_step_part_of_the_pool_reported_is_not_taken_for_the_pools_demand(tmp_path: Path, capsys) -> None:
    """Two 5-minute nodes, one silent for two hours: those steps counted one node's load as the
    pool's (a drop of half the demand scored for every strategy). Its silence is filled from
    its own readings, as training fills it; the oracle's cost is then within a few percent of
    the whole data's, not ~8% (2 of 24 hours at half) below it."""
    import pandas as pd

    base = tide(9)
    both = pd.concat([pd.read_csv(utilization_csv(tmp_path / "a.csv", base)),
                      pd.read_csv(utilization_csv(tmp_path / "b.csv", base)).assign(node_id="n2")])
    silent = (both["node_id"] == "n2") & both["ts"].between("2026-01-08T06:00:00Z", "2026-01-08T07:55:00Z")
    costs = {}
    for name, frame in (("whole", both), ("silent", both[~silent])):
        frame.to_csv(tmp_path / f"{name}.csv", index=False)
        assert main(["plan", "replay", "--utilization", str(tmp_path / f"{name}.csv"), "--models", "seasonal_naive",
                     "--start", "2026-01-08", "--end", "2026-01-09", "--out", str(tmp_path / f"{name}-t.csv")]) == 0
        table = pd.read_csv(tmp_path / f"{name}-t.csv").set_index("strategy")
        costs[name] = table.loc["oracle", "cost"]
    capsys.readouterr()
    assert abs(costs["silent"] / costs["whole"] - 1) < 0.02, costs
