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


def test_a_replay_that_cannot_be_stored_leaves_no_table_and_options_say_what_is_wrong(tmp_path: Path, capsys,
                                                                                      monkeypatch) -> None:
    """The table file was written before the store, which then met the lock: exit 1 with the
    file left. --instance-units past 1e9 made costs inf; a --start after the data blamed an --end
    never given."""
    from pipelines.plan import replay as plan_replay
    from pipelines.store import warehouse

    db = tmp_path / "w.duckdb"
    assert main(["ingest", "--kind", "utilization", "--db", str(db),
                 str(utilization_csv(tmp_path / "u.csv", tide(3)))]) == 0

    def locked(*args, **kwargs):
        raise warehouse.WarehouseLockedError(f"warehouse {db} is locked by another process (waited 0s; ...)")

    monkeypatch.setattr(plan_replay, "store", locked)
    out = tmp_path / "t.csv"
    assert main(["plan", "replay", "--db", str(db), "--models", "seasonal_naive", "--out", str(out)]) == 1
    assert "is locked by another process" in capsys.readouterr().err and not out.exists()
    src = str(tmp_path / "u.csv")
    assert main(["plan", "replay", "--utilization", src, "--models", "seasonal_naive", "--instance-units", "1e307"]) == 2
    assert "--instance-units must be a number > 0 and at most 1e9" in capsys.readouterr().err
    assert main(["plan", "replay", "--utilization", src, "--models", "seasonal_naive", "--start", "2026-02-01"]) == 2
    err = capsys.readouterr().err
    assert "is not before the data's end" in err and "--end" not in err


def test_a_pool_without_a_machine_of_its_own_is_priced_on_the_plans_offer() -> None:
    """No private CPU machine: cost_usd took the cheapest CPU anywhere, a 0.6 GB f1-micro for
    4 GiB-per-vCPU VMs (3.7x under the t2d the plan itself chose); now the offer the plan picks,
    with the pool's memory per vCPU, regions and size."""
    import pandas as pd

    from pipelines.plan.replay import unit_price
    from planner.plan import PlanPolicy

    catalog = pd.DataFrame({
        "provider": "gcp", "region": "us-central1", "instance_type": ["tiny-1", "t2d-standard-1", "huge-224"],
        "location": "public", "resource": "cpu", "units": [1.0, 1.0, 224.0], "memory_gb": [0.6, 4.0, 896.0],
        "on_demand_price": [0.0076, 0.0422, 5.0]})
    capacity = pd.DataFrame({"unique_id": ["bb/rnd/cpu", "bb/rnd/mem"], "capacity": [8.0, 32.0]})
    policy = PlanPolicy()
    costs = policy.costs.at("public")
    assert unit_price(catalog, "bb/rnd/cpu", policy, capacity, peak=6.0) == pytest.approx(costs.effective(0.0422))
    # its own machine, where it has one, as before
    own = pd.concat([catalog, catalog.iloc[[1]].assign(location="private", instance_type="rnd-8c", units=8.0,
                                                       on_demand_price=0.2)], ignore_index=True)
    assert unit_price(own, "bb/rnd/cpu", policy, capacity, peak=6.0) == pytest.approx(
        policy.costs.at("private").effective(0.2 / 8))
