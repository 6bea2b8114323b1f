"""The plan flow on a real warehouse file, and `headroom run` with every stage."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from pipelines import cli, warehouse

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def fleet() -> dict[str, pd.DataFrame]:
    from pipelines.synth import generate_fleet

    return generate_fleet(nodes=6, days=10, seed=2)


def _load(db_path, fleet: dict[str, pd.DataFrame]) -> None:
    with warehouse.open_warehouse(db_path) as con:
        con.register("_util", fleet["utilization"])
        con.execute("INSERT INTO utilization SELECT ts, cluster, pool, node_id, resource, used, capacity FROM _util")
        con.unregister("_util")
        warehouse.upsert(con, "instance_catalog", fleet["catalog"])


def _recommendations(db_path) -> pd.DataFrame:
    with warehouse.open_warehouse(db_path, read_only=True) as con:
        return warehouse.query(con, "SELECT * FROM recommendations ORDER BY run_id, kind, key")


@pytest.mark.slow
def test_plan_flow_end_to_end(prefect_harness, db_path, fleet) -> None:
    from pipelines.flows.plan import plan_flow
    from pipelines.flows.train import train_flow

    _load(db_path, fleet)
    train_flow(str(db_path), horizon=24, models=["seasonal_naive"], windows=1, lookback_days=None)
    out = plan_flow(str(db_path))
    rows = _recommendations(db_path)
    assert set(rows["kind"]) >= {"allocation", "prescale"}
    assert (rows["run_id"] == out["run_id"]).all()
    alloc = pd.json_normalize([json.loads(p) for p in rows.loc[rows["kind"] == "allocation", "payload"]])
    # one pool per planned cluster/pool: GPUs where there are any, else vCPUs
    assert set(alloc["unique_id"]) == {"train-a/h100/gpu", "infer-b/a100/gpu", "batch-c/cpu/cpu"}
    assert set(alloc["plan"]) == {"default_3_5_2", "tuned"}
    tuned = alloc[alloc["plan"] == "tuned"]
    assert (tuned["savings_vs_default"] >= -1e-6).all()
    assert ((tuned["private"] + tuned["public"] + tuned["edge"]).round(6) == 1).all()
    pre = rows[rows["kind"] == "prescale"]
    assert pre["model_id"].notna().all() and len(pre) == 3 * 24
    payload = json.loads(pre["payload"].iloc[0])
    assert payload["action"] in ("scale_up", "scale_down", "hold") and payload["target_capacity"] >= 0

    # the same warehouse plans to the same rows
    assert plan_flow(str(db_path))["run_id"] == out["run_id"]
    pd.testing.assert_frame_equal(_recommendations(db_path), rows)

    # a later plan run in the same month keeps the month's split (re-tuning is monthly)
    with warehouse.open_warehouse(db_path) as con:
        con.execute("UPDATE recommendations SET run_id = 'plan-earlier', data_cutoff = data_cutoff - INTERVAL 1 HOUR")
    again = plan_flow(str(db_path))
    assert all(not a["retuned"] for a in again["allocation"])
    assert {a["unique_id"]: a["private"] for a in again["allocation"]} == dict(zip(tuned["unique_id"], tuned["private"]))
    assert all(a["retuned"] for a in plan_flow(str(db_path), retune=True)["allocation"])


def test_plan_cli_needs_a_warehouse(tmp_path, capsys) -> None:
    assert cli.main(["plan", "--db", str(tmp_path / "none.duckdb")]) == 2
    assert "no warehouse" in capsys.readouterr().err


@pytest.mark.slow
def test_plan_cli_on_an_empty_warehouse_is_clear(prefect_harness, db_path, capsys) -> None:
    with warehouse.open_warehouse(db_path):
        pass
    assert cli.main(["plan", "--db", str(db_path)]) == 2
    assert "ingest some before planning" in capsys.readouterr().err


@pytest.mark.slow
def test_run_every_stage_writes_plan_and_report(prefect_harness, tmp_path, db_path, monkeypatch, capsys) -> None:
    """`headroom run` (the demo) on a small generated fleet: train, detect, plan and report."""
    monkeypatch.setenv("HEADROOM_DATA_DIR", str(tmp_path / "fleet"))
    monkeypatch.setenv("HEADROOM_REPORT_DIR", str(tmp_path / "reports"))
    monkeypatch.setenv("HEADROOM_ALERT_JSONL", str(tmp_path / "reports" / "alerts.jsonl"))
    assert cli.main(["run", "--db", str(db_path), "--nodes", "6", "--days", "10"]) == 0
    out = capsys.readouterr().out
    assert "plan plan-" in out and "split private/public/edge" in out and "report:" in out
    html = (tmp_path / "reports" / "report.html").read_text()
    assert "data:image/png;base64" in html
    assert (tmp_path / "reports" / "recommendations_allocation.csv").exists()
    assert (tmp_path / "reports" / "recommendations_prescale.parquet").exists()
