"""The plan flow on a real warehouse file, and `headroom run` with every stage."""
from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from pipelines import cli
from pipelines.store import warehouse

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def fleet() -> dict[str, pd.DataFrame]:
    from pipelines.synth.fleet import generate_fleet

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
    assert set(alloc["plan"]) == {"default_3_5_2", "tuned", "running_fleet"}
    # one recommended plan per pool, never dearer than the fleet as it runs, said in one headline
    best = alloc[alloc["recommended"]]
    assert sorted(best["unique_id"]) == sorted(set(alloc["unique_id"]))
    fleet = alloc[alloc["plan"] == "running_fleet"].set_index("unique_id")["monthly_cost"]
    assert (best.set_index("unique_id")["monthly_cost"] <= fleet + 1e-6).all()
    # every row's parts add up to its cost, the running fleet's too (its idle penalty was private_cost)
    parts = alloc[["private_cost", "public_cost", "edge_cost", "idle_penalty"]].sum(axis=1)
    assert (parts - alloc["monthly_cost"]).abs().max() < 1e-6
    assert (alloc.loc[alloc["plan"] == "running_fleet", "idle_penalty"] > 0).all()
    assert [h["unique_id"] for h in out["headline"]] == sorted(best["unique_id"])
    assert all(h["text"] for h in out["headline"])
    tuned = alloc[alloc["plan"] == "tuned"]
    assert (tuned["expected_savings"] >= 0).all()  # what the choice rests on (scenario mean)
    assert ((tuned["private"] + tuned["public"] + tuned["edge"]).round(6) == 1).all()
    pre = rows[rows["kind"] == "prescale"]
    assert pre["model_id"].notna().all() and len(pre) == 3 * 24
    payload = json.loads(pre["payload"].iloc[0])
    assert payload["action"] in ("scale_up", "scale_down", "hold") and payload["target_capacity"] >= 0

    assert all(a["kept_default"] in (True, False) for a in out["allocation"])
    # the same warehouse plans to the same rows
    assert plan_flow(str(db_path))["run_id"] == out["run_id"]
    pd.testing.assert_frame_equal(_recommendations(db_path), rows)

    # a later plan run in the same month keeps the month's split (re-tuning is monthly): make the
    # earlier run's split one the tuner would not pick, and the later run must keep it
    # (one the default bounds allow: private 30-70%, edge 5-35% where an edge machine fits the pool)
    odd = {"private": 0.35, "public": 0.6, "edge": 0.05}
    no_edge = {"private": 0.35, "public": 0.65, "edge": 0.0}
    with warehouse.open_warehouse(db_path) as con:
        con.execute("UPDATE recommendations SET run_id = 'plan-earlier', data_cutoff = data_cutoff - INTERVAL 1 HOUR")
        for key, payload in con.execute("SELECT key, payload FROM recommendations WHERE key LIKE '%/tuned'").fetchall():
            p = json.loads(payload)
            con.execute("UPDATE recommendations SET payload = ? WHERE key = ?",
                        [json.dumps(p | (odd if "edge:" in p["offers"] else no_edge)), key])
    again = plan_flow(str(db_path))
    # kept, not tuned by this run; still a re-tuned split (it is not the default)
    assert all(not a["tuned_this_run"] and a["retuned"] and not a["kept_default"] for a in again["allocation"])
    kept = pd.json_normalize([json.loads(p) for p in _recommendations(db_path).query("kind == 'allocation'")["payload"]])
    assert kept["expected_savings"].notna().all()  # a kept split says what it is expected to save, too
    assert all(a["private"] == 0.35 and a["edge"] in (0.0, 0.05) for a in again["allocation"])
    retuned = plan_flow(str(db_path), retune=True)["allocation"]
    assert all(a["tuned_this_run"] for a in retuned) and any(a["private"] != 0.35 for a in retuned)
    # retuned says whether the split moved off the default, not that the tuner ran
    assert all(a["retuned"] == ((a["private"], a["public"], a["edge"]) != (0.3, 0.5, 0.2)) for a in retuned)
    # a plain plan on the same data does not undo the retune with the earlier run's split
    after = _recommendations(db_path)
    assert plan_flow(str(db_path))["allocation"] == retuned
    pd.testing.assert_frame_equal(_recommendations(db_path), after)


def test_a_month_that_kept_the_default_split_keeps_it(con) -> None:
    """The run that tuned a pool's split is found by tuned_this_run, also when the tuner kept
    the default (retuned false); a run that only kept an earlier split is not one; runs written
    before tuned_this_run existed said it with retuned."""
    from pipelines.plan.planning import PlanInputs, kept_splits

    cutoff = pd.Timestamp("2026-02-10 12:00")
    default = {"private": 0.3, "public": 0.5, "edge": 0.2}
    moved = {"private": 0.5, "public": 0.5, "edge": 0.0}
    rows = [
        ("plan-a", "a/p/gpu/tuned", default | {"tuned_this_run": True, "retuned": False}),
        ("plan-a", "b/p/gpu/tuned", moved | {"retuned": True}),  # written before tuned_this_run
        ("plan-a", "c/p/gpu/tuned", moved | {"tuned_this_run": False, "retuned": True}),
        ("plan-a", "d/p/gpu/tuned", moved | {"tuned_this_run": True}),
        # tuned later on the 2 days since a level shift: not the month's split (nor is the earlier one)
        ("plan-b", "d/p/gpu/tuned", default | {"tuned_this_run": True, "shift_days": 2}),
    ]
    for run_id, key, payload in rows:
        at = cutoff - pd.Timedelta(days=1 if run_id == "plan-a" else 0.5)
        con.execute("INSERT INTO recommendations VALUES (?, 'allocation', ?, ?, NULL, ?, ?)",
                    [run_id, key, json.dumps(payload), at, at])
    empty = pd.DataFrame()
    # rows without a fill rule were tuned under the proportional one
    kept = kept_splits(con, PlanInputs(empty, empty, empty, empty, cutoff), "proportional")
    assert {uid: (s.private, s.public, s.edge) for uid, s in kept.items()} == {
        "a/p/gpu": (0.3, 0.5, 0.2), "b/p/gpu": (0.5, 0.5, 0.0)}
    # a split means other machines under another rule: the month's split is tuned again
    assert kept_splits(con, PlanInputs(empty, empty, empty, empty, cutoff), "layered") == {}

    # a look at 2 days of history on the same month neither stands for the 28-day split nor hides it
    # (window_days: the run's window; lookback_days: the days a pool had, or older rows' window)
    for run_id, at, payload in (("plan-c", cutoff - pd.Timedelta(hours=6), moved | {"lookback_days": 5,
                                                                                     "window_days": 28}),
                                ("plan-d", cutoff, default | {"lookback_days": 2})):
        con.execute("INSERT INTO recommendations VALUES (?, 'allocation', 'e/p/gpu/tuned', ?, NULL, ?, ?)",
                    [run_id, json.dumps(payload | {"tuned_this_run": True}), at, at])
    for days, split in ((28, (0.5, 0.5, 0.0)), (2, (0.3, 0.5, 0.2))):
        kept = kept_splits(con, PlanInputs(empty, empty, empty, empty, cutoff + pd.Timedelta(days=1),
                                           lookback_days=days), "proportional")
        assert (kept["e/p/gpu"].private, kept["e/p/gpu"].public, kept["e/p/gpu"].edge) == split


def test_capacity_counts_every_node_at_its_last_reading(con) -> None:
    """Nodes that report a minute apart all count, at their own last reading."""
    from pipelines.plan.planning import CAPACITY_SQL

    rows = pd.DataFrame({
        "ts": pd.to_datetime(["2026-01-01 00:00", "2026-01-01 00:00", "2026-01-01 00:01", "2025-12-01 00:00"]),
        "cluster": ["c", "c", "d", "e"], "pool": ["h100", "h100", "cpu", "old"],
        "node_id": ["n1", "n2", "n3", "n4"], "resource": ["gpu", "gpu", "cpu", "gpu"],
        "used": [1.0, 2.0, 3.0, 1.0], "capacity": [4.0, 4.0, 64.0, 8.0],
    })
    con.register("_u", rows)
    con.execute("INSERT INTO utilization SELECT ts, cluster, pool, node_id, resource, used, capacity FROM _u")
    cap = warehouse.query(con, CAPACITY_SQL).set_index("unique_id")
    assert cap.loc["c/h100/gpu", "capacity"] == 8 and cap.loc["c/h100/gpu", "units_per_node"] == 4
    assert cap.loc["d/cpu/cpu", "capacity"] == 64
    assert "e/old/gpu" not in cap.index  # gone for a month: not running now


def test_a_drained_node_is_not_running_capacity(con) -> None:
    """A node reporting capacity 0 (drained) counts for none of its resources: it does not
    halve the pool's node size, nor lend its memory to CPUs it does not offer."""
    from pipelines.plan.planning import CAPACITY_SQL

    nodes = ["n1", "n1", "n2", "n2", "n3", "n3"]
    rows = pd.DataFrame({
        "ts": pd.Timestamp("2026-01-01"), "cluster": "c", "pool": "p", "node_id": nodes,
        "resource": ["cpu", "mem"] * 3, "used": 1.0, "capacity": [32.0, 128.0, 32.0, 128.0, 0.0, 128.0],
    }).assign(used=lambda f: f["used"].where(f["capacity"] > 0, 0.0))
    con.register("_u", rows)
    con.execute("INSERT INTO utilization SELECT ts, cluster, pool, node_id, resource, used, capacity FROM _u")
    cap = warehouse.query(con, CAPACITY_SQL).set_index("unique_id")
    assert cap.loc["c/p/cpu", ["capacity", "units_per_node", "nodes"]].tolist() == [64, 32, 2]
    assert cap.loc["c/p/mem", "capacity"] == 256


def test_plan_cli_needs_a_warehouse(tmp_path, capsys) -> None:
    assert cli.main(["plan", "--db", str(tmp_path / "none.duckdb")]) == 2
    assert "no warehouse" in capsys.readouterr().err
    assert cli.main(["plan", "--db", str(tmp_path / "none.duckdb"), "--lookback-days", "100000000"]) == 2
    assert "--lookback-days must be between 1 and 36500" in capsys.readouterr().err


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
    assert "s): run plan-" in out and "split private/public/edge" in out and "\nreport (" in out
    assert "interruptible share" in out  # the generated fleet has spot prices: a spot line per pool
    assert "stays on on-demand: " in out or "interruptible share on spot" in out  # and why
    html = (tmp_path / "reports" / "report.html").read_text()
    assert "data:image/png;base64" in html
    assert 'id="spot"' in html and "Spot:" in html
    spot = pd.read_csv(tmp_path / "reports" / "recommendations_spot.csv")
    assert len(spot) == 3 and set(spot["action"]) <= {"use_spot", "on_demand"}
    # spot takes its share of what the recommended plan runs on public: where that is nothing
    # (a running fleet that carries its demand) it says so; else the market comes with its p(spike)
    idle = spot["reason"].str.startswith("no interruptible public load")
    assert spot.loc[~idle, "p_spike"].notna().all()
    # the detect stage registered a spike model, and the plan rates every market with it
    from pipelines.plan.planning import load_inputs
    with warehouse.open_warehouse(db_path, read_only=True) as con:
        probs = load_inputs(con).spike_probabilities
    assert probs is not None and len(probs) > 0 and probs["p_spike"].between(0, 1).all()
    assert (tmp_path / "reports" / "recommendations_allocation.csv").exists()
    assert (tmp_path / "reports" / "recommendations_prescale.parquet").exists()


def test_plan_prints_costs_in_the_reports_currency(tmp_path, monkeypatch, capsys) -> None:
    """`headroom plan` writes costs as the report does ($, one helper), a saving that rounds to
    0 as $0 (never -0), and how each split was chosen in words."""
    import pipelines.flows.plan as plan_flow_module

    row = {"unique_id": "c/p/gpu", "private": 0.3, "public": 0.5, "edge": 0.2, "monthly_cost": 28385.6,
           "savings_vs_default": -0.2, "current_fleet_cost": 15866.9}
    out = {"run_id": "plan-x", "data_cutoff": "2026-02-01 23:00:00", "rows": {"allocation": 4},
           "allocation": [row | {"tuned_this_run": True, "retuned": False, "kept_default": True},
                          row | {"unique_id": "d/p/cpu", "tuned_this_run": False, "retuned": True,
                                 "kept_default": False, "savings_vs_default": 900.4}],
           "spot": [{"unique_id": "c/p/gpu", "action": "use_spot", "zone": "z1", "instance_type": "g8",
                     "discount": 0.4, "p_spike": 0.1, "expected_monthly_saving": 1234.5}]}
    monkeypatch.setattr(plan_flow_module, "plan_flow", lambda **kwargs: out)
    (tmp_path / "w.duckdb").touch()
    assert cli.main(["plan", "--db", str(tmp_path / "w.duckdb")]) == 0
    text = capsys.readouterr().out
    assert "(tuned now: the default split kept, no other saves enough), $28,386/month, saves $0/month" in text
    assert "(this month's re-tuned split, kept), $28,386/month, saves $900/month" in text
    assert "the running fleet as private machines: $15,867/month" in text and "saves $1,234/month" in text
    assert not re.search(r"-\$?0(?![\d,.])", text) and "-$" not in text  # no "-0", "-$0" (dates aside)


def test_a_value_that_rounds_to_minus_zero_is_stored_as_zero() -> None:
    from pipelines.plan.planning import PlanInputs, recommendation_rows

    empty = pd.DataFrame()
    plan = {"spot": pd.DataFrame({"unique_id": ["c/p/gpu"], "expected_monthly_saving": [-1e-9],
                                  "discount": [-0.0], "p_spike": [0.25]})}
    rows = recommendation_rows(plan, PlanInputs(empty, empty, empty, empty, pd.Timestamp("2026-02-01")))
    payload = rows["payload"].iloc[0]
    assert "-0.0" not in payload and json.loads(payload)["expected_monthly_saving"] == 0.0


def test_a_split_dearer_than_the_default_says_how_it_fares_across_the_scenarios() -> None:
    """"(less across the scenarios)" was added to every negative saving, also where the split
    cost more there too (a kept split, a default that cannot be bought)."""
    from pipelines.plan.planning import saving_text

    assert saving_text(-500.0, 120.0).endswith("more than the default split on this demand (less across the scenarios)")
    assert saving_text(-500.0, -300.0).endswith("on this demand (more across the scenarios too)")
    assert saving_text(-500.0).endswith("on this demand") and saving_text(40.0, -1.0).startswith("saves $40")


def test_spot_prices_that_price_nothing_say_why_there_is_no_spot_plan(db_path, fleet, caplog) -> None:
    """All-zero prices (a placeholder: ingest takes them) or prices that start after the
    data's end made the spot plan vanish without a word; prices ending too early warned."""
    from pipelines.plan.planning import load_inputs, spot_markets

    _load(db_path, fleet)
    prices = fleet["spot_prices"]
    cases = {"every spot price is 0": prices.assign(price=0.0),
             "after the data's end": prices.assign(ts=prices["ts"] + pd.Timedelta(days=400))}
    for needle, frame in cases.items():
        with warehouse.open_warehouse(db_path) as con:
            con.execute("DELETE FROM spot_prices")
            con.register("_spot", frame)
            con.execute("INSERT INTO spot_prices BY NAME SELECT * FROM _spot")
            con.unregister("_spot")
            caplog.clear()
            with caplog.at_level("WARNING"):
                assert spot_markets(load_inputs(con), "14D") is None
        assert needle in caplog.text and "no spot plan" in caplog.text


def test_a_pool_left_out_of_the_plan_is_in_its_rows_the_summary_and_the_exports(tmp_path, capsys) -> None:
    """A pool drained before the data's end was named on the console alone: the report and the
    exports never mentioned it."""
    from tests.pipelines.test_plan_replay import drained_fleet

    db, out = drained_fleet(tmp_path), tmp_path / "rep"
    assert cli.main(["plan", "--db", str(db)]) == 0
    assert cli.main(["report", "--db", str(db), "--out", str(out)]) == 0
    left = pd.read_csv(out / "recommendations_unplanned.csv").set_index("key")
    assert left.loc["c1/drain/cpu/all", "reason"].startswith("no running capacity")
    assert left.loc["c1/live/cpu/prescale", "reason"] == "no forecast beyond the data cutoff (run headroom train)"
    summary = (out / "report.html").read_text()
    summary = summary[summary.index(">Summary<"):]
    assert "c1/drain/cpu: not planned: no running capacity" in summary
    assert "c1/live/cpu: no pre-scale schedule: no forecast beyond the data cutoff" in summary
    # an empty section says the plan left series out, not only a general reason that may not be its
    assert "or, for the 2 series it left out, what the summary says of each" in summary
    cli.main(["status", "--db", str(db)])  # (exit 1: the data are months old)
    assert "  c1/drain/cpu: not planned: no running capacity" in capsys.readouterr().out
