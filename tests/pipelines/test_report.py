"""The report stage: HTML with plots, recommendation exports, a partial warehouse, re-runs."""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from pipelines.report import data as report_io
from pipelines.report import html as report_html
from pipelines.report import plots as report_plots
from pipelines.runtime.money import money
from pipelines.store import warehouse

pytestmark = pytest.mark.timeout(300)

START = pd.Timestamp("2026-01-05")
HOURS = 72
NODES = [("c1", "p1", "c1-p1-n01"), ("c1", "p1", "c1-p1-n02"), ("c1", "p2", "c1-p2-n01")]
HOSTILE = "<script>alert(1)</script>"


def _utilization() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for h in range(HOURS):
        ts = START + pd.Timedelta(hours=h)
        for cluster, pool, node in NODES:
            for resource, cap in (("gpu", 8.0), ("cpu", 64.0)):
                used = cap * (0.5 + 0.4 * np.sin(2 * np.pi * h / 24) * rng.uniform(0.8, 1.0))
                rows.append((ts, cluster, pool, node, resource, round(float(used), 3), cap))
    return pd.DataFrame(rows, columns=["ts", "cluster", "pool", "node_id", "resource", "used", "capacity"])


def _load_utilization(con) -> None:
    frame = _utilization()
    con.register("_util", frame)
    con.execute("INSERT INTO utilization SELECT ts, cluster, pool, node_id, resource, used, capacity FROM _util")
    con.unregister("_util")


def _load_results(con) -> None:
    """A champion with forecasts, alerts and one plan run with all three recommendation kinds."""
    cutoff = START + pd.Timedelta(hours=HOURS - 1)
    metrics = json.dumps({"wape": 0.12, "mase": 0.8, "coverage_80": 0.79, "coverage_95": 0.94})
    con.execute("INSERT INTO models (model_id, kind, target, data_cutoff, metrics, is_champion, created_at) "
                "VALUES ('lgbm-abc', 'lgbm', 'gpu', ?, ?, TRUE, ?)", [cutoff, metrics, cutoff])
    for uid in ("c1/p1/gpu", "c1/p2/gpu"):
        for h in range(1, 13):
            m = 8.0 + h * 0.1
            con.execute("INSERT INTO forecasts VALUES ('train-1', ?, ?, 'lgbm', 'lgbm-abc', ?, ?, ?, ?, ?)",
                        [uid, cutoff + pd.Timedelta(hours=h), m, m - 1, m + 1, m - 2, m + 2])
    # backtests of the champion's run (lgbm off by 1 in 10, seasonal naive by 3), and of an older run
    for run, uid, model, mean in [("train-1", u, m, y) for u in ("c1/p1/gpu", "c1/p2/gpu")
                                  for m, y in (("lgbm", 11.0), ("seasonal_naive", 13.0))] + [
                                 ("train-0", "c1/p1/gpu", "ets", 10.0)]:
        for h in range(3):
            con.execute("INSERT INTO backtests VALUES (?, ?, ?, ?, ?, 10.0, ?, NULL, NULL, NULL, NULL)",
                        [run, uid, cutoff - pd.Timedelta(hours=h), cutoff - pd.Timedelta(hours=5), model, mean])
    alerts = [
        ("fp1", "burst", "c1/p1/gpu", "critical", None, START + pd.Timedelta(hours=50),
         START + pd.Timedelta(hours=55), "demand up-burst", "firing"),
        ("fp2", "hardware_fault", "c1-p2-n01-gpu3", "warning", 0.7, cutoff.floor("D"),
         cutoff.floor("D") + pd.Timedelta(days=1), "gpu likely to fail", "firing"),
        ("fp3", "price_spike", HOSTILE, "warning", 0.9, None, None, f"spike on {HOSTILE}", "firing"),
    ]
    for fp, kind, entity, sev, p, ws, we, summary, status in alerts:
        con.execute("INSERT INTO alerts (fingerprint, kind, entity, severity, probability, window_start, "
                    "window_end, summary, status, starts_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    [fp, kind, entity, sev, p, ws, we, summary, status, cutoff, cutoff])
    recs = [
        ("reservation", "gpu/private", {"resource": "gpu", "location": "private", "provider": "onprem",
         "region": "r1", "instance_type": "h100x8", "term": "1y", "units_per_instance": 8, "instances": 2,
         "reserved_units": 16, "coverage_quantile": 0.5, "expected_utilization": 0.9,
         "monthly_cost_reserved": 1000.0, "monthly_cost_on_demand": 1500.0, "monthly_savings": 500.0}),
        ("allocation", "gpu/default_3_5_2", {"resource": "gpu", "plan": "default_3_5_2", "private": 0.3,
         "public": 0.5, "edge": 0.2, "monthly_cost": 9000.0, "private_cost": 3000.0, "public_cost": 4500.0,
         "edge_cost": 1000.0, "idle_penalty": 500.0, "savings_vs_default": 0.0}),
        ("allocation", "gpu/tuned", {"resource": "gpu", "plan": "tuned", "private": 0.6, "public": 0.3,
         "edge": 0.1, "monthly_cost": 7000.0, "private_cost": 4000.0, "public_cost": 2200.0,
         "edge_cost": 500.0, "idle_penalty": 300.0, "savings_vs_default": 2000.0}),
    ]
    for h in range(1, 30):
        action = "scale_up" if h in (3, 4) else "scale_down" if h == 28 else "hold"
        ts = cutoff + pd.Timedelta(hours=h)
        recs.append(("prescale", f"c1/p1/gpu/{ts.isoformat()}", {
            "unique_id": "c1/p1/gpu", "resource": "gpu", "ts": ts.isoformat(), "forecast_mean": 10.0,
            "forecast_upper": 12.0, "capacity": 16.0, "target_capacity": 24.0 if action == "scale_up" else 16.0,
            "instances_delta": 1 if action == "scale_up" else 0, "action": action, "reason": "forecast"}))
    older = cutoff - pd.Timedelta(days=1)
    con.execute("INSERT INTO recommendations VALUES ('plan-0', 'allocation', 'gpu/old', '{}', NULL, ?, ?)",
                [older, older])
    for kind, key, payload in recs:
        con.execute("INSERT INTO recommendations VALUES ('plan-1', ?, ?, ?, 'lgbm-abc', ?, ?)",
                    [kind, key, json.dumps(payload), cutoff, cutoff])


@pytest.fixture()
def full_db(db_path: Path) -> Path:
    with warehouse.open_warehouse(db_path) as con:
        _load_utilization(con)
        _load_results(con)
    return db_path


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_report_on_full_warehouse(prefect_harness, full_db: Path, tmp_path: Path) -> None:
    from pipelines.flows.report import report_flow

    out_dir = tmp_path / "reports"
    out = report_flow(db_path=str(full_db), out_dir=str(out_dir))
    page = Path(out["html"]).read_text()
    for title in ("Forecasts", "Utilization by node and hour", "Allocation plans: monthly cost",
                  "Reservation recommendations", "Pre-scale actions, next 24 hours", "Firing alerts",
                  "Champion models (backtest)"):
        assert title in page
    assert page.count("data:image/png;base64,") == 3  # one fan chart group, heatmap, costs
    assert "no data yet" not in page
    assert "latest utilization reading <b>2026-01-07 23:00</b>" in page
    assert re.search(r"plan run plan-\S+ on demand up to the hour of <b>2026-01-07 2\d:00</b>", page)
    summary = page[page.index(">Summary<"):page.index(">Forecasts<")]
    assert ("$7,000 per month on the demand path (the history of the lookback and the forecast after it), $2,000 less "
            "than the default split.") in summary
    assert "reservation option(s) for the plan" in summary
    assert "Next 24 hours: " in summary and "Firing alerts: " in summary
    assert "runbook</th>" in page[page.index(">Firing alerts<"):]
    # every model the champion's run backtested, on its series, lowest WAPE first
    assert "lgbm 0.100, seasonal_naive 0.300</td>" in page[page.index(">Champion models"):]
    assert HOSTILE not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert sorted(Path(f).name for f in out["files"]) == sorted(
        f"recommendations_{k}.{ext}" for k in ("allocation", "prescale", "reservation") for ext in ("csv", "parquet"))
    assert out["sections"] == {"forecast_groups": 1, "forecast_series": 2, "heatmap_nodes": 3, "heatmap_alerts": 2,
                               "allocation_plans": 2, "reservations": 1, "spot_pools": 0, "prescale_actions": 2,
                               "firing_alerts": 3, "champions": 1, "replays": 0}

    alloc = pd.read_csv(out_dir / "recommendations_allocation.csv")
    assert list(alloc.columns[:11]) == list(report_io.PROVENANCE)
    for kind in ("allocation", "prescale", "reservation"):  # every row of every kind says where it comes from
        rows = pd.read_csv(out_dir / f"recommendations_{kind}.csv")
        assert rows[["run_id", "model_id", "generated_at", "data_cutoff", "currency", "unit"]].notna().all().all()
        assert rows["generated_at"].str.endswith("+00:00").all() and (rows["currency"] == "USD").all()
        none = rows["model_id"] == "none"
        assert rows.loc[none, "model_note"].astype(str).str.contains("no model of its own|no champion forecast").all()
    assert set(alloc["run_id"]) == {"plan-1"}  # the latest plan run only
    assert {"resource", "plan", "private", "monthly_cost", "idle_penalty"} <= set(alloc.columns)
    pre = pd.read_parquet(out_dir / "recommendations_prescale.parquet")
    assert len(pre) == 29 and {"ts", "action", "target_capacity", "key"} <= set(pre.columns)
    res = pd.read_parquet(out_dir / "recommendations_reservation.parquet")
    assert res["estimated_monthly_savings"].iloc[0] == 500.0
    assert str(res["data_cutoff"].dtype) == "datetime64[us, UTC]" or str(res["data_cutoff"].dt.tz) == "UTC"

    before = _snapshot(out_dir)
    report_flow(db_path=str(full_db), out_dir=str(out_dir))
    assert _snapshot(out_dir) == before


def test_report_with_only_utilization(prefect_harness, db_path: Path, tmp_path: Path) -> None:
    from pipelines.flows.report import report_flow

    with warehouse.open_warehouse(db_path) as con:
        _load_utilization(con)
    out = report_flow(db_path=str(db_path), out_dir=str(tmp_path / "r"))
    page = Path(out["html"]).read_text()
    assert out["files"] == []
    assert ">Summary<" not in page  # nothing decided yet
    assert page.count("data:image/png;base64,") == 1  # the heatmap
    for stage in ("train", "plan"):
        assert f"no data yet: run headroom {stage}" in page
    assert "no alert is firing (run headroom detect if it has not run)" in page
    assert out["sections"]["heatmap_nodes"] == 3 and out["sections"]["forecast_series"] == 0


def test_heatmap_marks_bursts_and_fault_rows() -> None:
    nodes = pd.DataFrame(NODES, columns=["cluster", "pool", "node_id"])
    hours = pd.date_range(START, periods=24, freq="h")
    alerts = pd.DataFrame({
        "kind": ["burst", "hardware_fault", "hardware_fault", "burst"],
        "entity": ["c1/p1/cpu", "c1-p2-n01-gpu0", "c1-p1-n0", "c9/p1/gpu"],
        "window_start": [START + pd.Timedelta(hours=2), START, START, START],
        "window_end": [START + pd.Timedelta(hours=4), START + pd.Timedelta(days=1), START, START],
        "status": ["resolved", "firing", "firing", "firing"],
    })
    marks = report_plots.heatmap_marks(nodes, hours, alerts)
    assert marks.bursts == ((0, 1, 2, 5),)
    assert marks.fault_rows == (2,)  # "c1-p1-n0" is no node's id or id + separator
    assert marks.alerts == 2
    # a DCGM device is named by its UUID: its node comes from the alert's node label
    uuid = pd.DataFrame({"kind": ["hardware_fault"], "entity": ["GPU-21aa-0001"], "window_start": [START],
                         "window_end": [START + pd.Timedelta(days=2)], "status": ["firing"],
                         "labels": [json.dumps({"node": NODES[1][2]})]})
    assert report_plots.heatmap_marks(nodes, hours, uuid).fault_rows == (1,)


def test_flatten_recommendations_prefixes_clashing_fields() -> None:
    plan = pd.DataFrame({"run_id": ["r"], "kind": ["x"], "key": ["k"], "model_id": [None],
                         "data_cutoff": [START], "payload": [json.dumps({"key": 1, "a": {"b": 2}})]})
    frame = report_io.flatten_recommendations(plan)["x"]
    assert list(frame.columns) == [*report_io.PROVENANCE, "payload_key", "a_b"]
    assert frame.loc[0, "model_id"] == "none" and frame.loc[0, "model_note"] == "no model"


def test_exports_keep_formulas_out_of_spreadsheets(tmp_path) -> None:
    """A text cell that a spreadsheet would run (=, +, -, @) is written as text in the CSV;
    numbers (a negative saving) and the Parquet copy are left as they are."""
    rows = {"run_id": ["r"], "kind": ["spot"], "key": ["=HYPERLINK(\"http://x\")/spot"], "model_id": [None],
            "data_cutoff": [START], "created_at": [START],
            "payload": [json.dumps({"zone": "@SUM(A1)", "reason": "+1 cheaper", "saving": -5.0, "resource": "gpu"})]}
    recs = report_io.flatten_recommendations(pd.DataFrame(rows))
    report_io.write_report(tmp_path, "<html></html>", recs)
    back = pd.read_csv(tmp_path / "recommendations_spot.csv")
    assert back.loc[0, "key"] == "'=HYPERLINK(\"http://x\")/spot" and back.loc[0, "zone"] == "'@SUM(A1)"
    assert back.loc[0, "reason"] == "'+1 cheaper" and back.loc[0, "saving"] == -5.0 and back.loc[0, "unit"] == "GPU"
    assert back.loc[0, "data_cutoff"].endswith("+00:00")
    assert pd.read_parquet(tmp_path / "recommendations_spot.parquet").loc[0, "zone"] == "@SUM(A1)"


def test_flattened_times_are_timestamps_like_data_cutoff(tmp_path) -> None:
    plan = pd.DataFrame({"run_id": ["r"], "kind": ["prescale"], "key": ["k"], "model_id": [None],
                         "data_cutoff": [START], "payload": [json.dumps({"ts": "2026-02-02T00:00:00"})]})
    frame = report_io.flatten_recommendations(plan)["prescale"]
    frame.to_parquet(tmp_path / "p.parquet")
    back = pd.read_parquet(tmp_path / "p.parquet")
    assert back["ts"].dtype.kind == "M" and back["ts"].iloc[0] == pd.Timestamp("2026-02-02")


def test_heatmap_stays_readable_for_200_nodes() -> None:
    hours = pd.date_range(START, periods=168, freq="h")
    ids = [f"node-{i:03d}" for i in range(200)]
    heat = pd.DataFrame([(f"c{i // 50}", "p", n, h, 0.5) for i, n in enumerate(ids) for h in hours[::7]],
                        columns=["cluster", "pool", "node_id", "hour", "util"])
    nodes, grid_hours, matrix = report_plots.heatmap_grid(heat)
    assert matrix.shape == (200, len(grid_hours))
    fig = report_plots.heatmap_figure(nodes, grid_hours, matrix, report_plots.HeatmapMarks((), (57,), 1))
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert "node-057" in labels and all(t.get_fontsize() >= 4 for t in fig.axes[0].get_yticklabels())
    assert fig.get_size_inches()[1] <= 24
    plt.close(fig)


def test_cli_missing_warehouse_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pipelines.cli import main

    missing = tmp_path / "nope.duckdb"
    assert main(["report", "--db", str(missing), "--out", str(tmp_path / "r")]) == 2
    assert "no warehouse" in capsys.readouterr().err
    assert not missing.exists()


def test_exports_are_the_latest_plan_runs_only(tmp_path: Path) -> None:
    """A kind the latest plan run does not have leaves no export from an earlier run."""
    from pipelines.report.data import write_report

    frame = pd.DataFrame({"run_id": ["r1"], "key": ["k"], "model_id": [None], "data_cutoff": [None], "x": [1.0]})
    first = write_report(tmp_path, "<html></html>", {"reservation": frame, "prescale": frame})
    assert len(first["files"]) == 4
    second = write_report(tmp_path, "<html></html>", {"prescale": frame})
    assert sorted(p.name for p in tmp_path.glob("recommendations_*")) == [
        "recommendations_prescale.csv", "recommendations_prescale.parquet"]
    assert len(second["files"]) == 2


def test_a_report_that_fails_midway_leaves_the_old_set_whole(tmp_path: Path, monkeypatch) -> None:
    """The disk fills while the new exports are written: the old page and every old export
    stay as they were, with no new file beside them and no temp file left."""
    from pipelines.report.data import write_report
    from pipelines.runtime.outputs import OutputError

    old = pd.DataFrame({"run_id": ["r1"], "key": ["k"], "model_id": [None], "data_cutoff": [None], "x": [1.0]})
    write_report(tmp_path, "<html>old</html>", {"reservation": old, "prescale": old})
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def full(self, path, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", full)
    with pytest.raises(OutputError, match="No space left on device"):
        write_report(tmp_path, "<html>new</html>", {"prescale": old.assign(x=2.0)})
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_report_and_plan_refuse_what_they_cannot_use(prefect_harness, tmp_path, capsys) -> None:
    """A zero-byte file is no warehouse; an empty DuckDB file is brought to the schema and
    said to hold no data; an output "folder" that is a file, or a folder where report.html
    goes, is refused before anything is written. Exit 2 with a message, no traceback."""
    import duckdb

    from pipelines.cli import main

    (tmp_path / "zero.duckdb").touch()
    duckdb.connect(str(tmp_path / "empty.duckdb")).close()
    (tmp_path / "afile").touch()
    (tmp_path / "out" / "report.html").mkdir(parents=True)
    (tmp_path / "table.csv").write_text("a,b\n1,2\n")  # some DuckDB versions open a CSV as a database
    cases = [
        (["plan", "--db", str(tmp_path / "zero.duckdb")], "is not a DuckDB warehouse file"),
        (["detect", "--db", str(tmp_path / "table.csv")], "table.csv is not a DuckDB warehouse file"),
        (["ingest", "--kind", "catalog", "--db", str(tmp_path / "table.csv"), str(tmp_path / "table.csv")],
         "table.csv is not a DuckDB warehouse file"),
        (["plan", "--db", str(tmp_path)], "is a folder, not a DuckDB warehouse file"),
        (["report", "--db", str(tmp_path / "zero.duckdb"), "--out", str(tmp_path / "r")],
         "is not a DuckDB warehouse file"),
        (["plan", "--db", str(tmp_path / "empty.duckdb")], "no utilization in"),
        (["report", "--db", str(tmp_path / "empty.duckdb"), "--out", str(tmp_path / "afile")], "is a file, not a folder"),
        (["report", "--db", str(tmp_path / "empty.duckdb"), "--out", str(tmp_path / "afile" / "sub")],
         "afile is a file, not a folder"),
        (["report", "--db", str(tmp_path / "empty.duckdb"), "--out", str(tmp_path / "out")],
         "report.html is a folder"),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (argv, err)
    assert list((tmp_path / "out").iterdir()) == [tmp_path / "out" / "report.html"]


def test_empty_sections_of_a_plan_run_say_why_not_to_run_plan() -> None:
    """A plan ran, but with no catalog offer (no allocation, no spot) and no forecast (no
    pre-scale): the sections say that, not "run headroom plan" again."""
    from pipelines.report.data import ReportData
    from pipelines.report.html import allocation_section, tables_section

    empty = pd.DataFrame()
    data = ReportData(data_cutoff=pd.Timestamp("2026-01-02"), counts={"spot_prices": 100}, forecasts=empty,
                      history=empty, heatmap=empty, heatmap_resource=None, alerts=empty, champions=empty,
                      plan_run="run-1", recommendations={})
    page = allocation_section(data) + tables_section(data)
    assert "run headroom plan" not in page
    assert "none in plan run run-1: no pool has a priced public offer in the instance catalog" in page
    assert "none in plan run run-1: no pool has a public offer to compare spot prices with" in page
    assert "none in plan run run-1: no forecast beyond the data cutoff (run headroom train, then plan)" in page


def test_the_summary_prices_the_running_fleet_beside_the_split() -> None:
    """The reference a bill payer compares with; when it is cheaper than the split, the
    summary says the bounds keep the split partly off private, and where to widen them."""
    from pipelines.report.data import ReportData
    from pipelines.report.html import summary_lines

    alloc = pd.DataFrame({"unique_id": ["c/p/gpu"] * 2, "plan": ["default_3_5_2", "tuned"],
                          "private": [0.3, 0.7], "public": [0.5, 0.3], "edge": [0.2, 0.0],
                          "monthly_cost": [9000.0, 7000.0], "current_fleet_cost": [5000.0, 5000.0]})
    empty = pd.DataFrame()
    data = ReportData(data_cutoff=None, counts={}, forecasts=empty, history=empty, heatmap=empty,
                      heatmap_resource=None, alerts=empty, champions=empty, plan_run="p",
                      recommendations={"allocation": alloc})
    line = summary_lines(data)[0]
    assert ("$7,000 per month on the demand path (the history of the lookback and the forecast after it), $2,000 less "
            "than the default split.") in line
    assert "The running fleet, priced as private machines, would cost $5,000 for the same demand (less than" in line
    assert "widen them in the plan config" in line
    # a default that cannot be bought as it reads is no yardstick: no "less than the default"
    alloc["buyable"] = [False, True]
    line = summary_lines(dataclasses.replace(data, recommendations={"allocation": alloc}))[0]
    assert "forecast after it)." in line and "than the default" not in line
    # a split that costs what the default does says so, not "$0 less"
    alloc["buyable"] = True
    alloc["monthly_cost"] = [7000.0, 7000.0]
    line = summary_lines(dataclasses.replace(data, recommendations={"allocation": alloc}))[0]
    assert "forecast after it), the same as the default split." in line


def test_the_summary_speaks_of_the_recommended_plan_only() -> None:
    """A pool that keeps its running fleet is not summed into a split it does not take, and
    the reservations priced for that split's public share are not offered as savings."""
    from pipelines.report.data import ReportData
    from pipelines.report.html import summary_lines

    alloc = pd.DataFrame({"unique_id": ["c/p/gpu"] * 3, "plan": ["default_3_5_2", "tuned", "running_fleet"],
                          "private": [0.3, 0.7, 1.0], "public": [0.5, 0.3, 0.0], "edge": [0.2, 0.0, 0.0],
                          "monthly_cost": [9000.0, 7000.0, 5000.0], "recommended": [False, False, True],
                          "headline": ["", "", "keep the running fleet, $5,000/month"]})
    res = pd.DataFrame({"unique_id": ["c/p/gpu"], "monthly_savings": [800.0]})
    empty = pd.DataFrame()
    data = ReportData(data_cutoff=None, counts={}, forecasts=empty, history=empty, heatmap=empty,
                      heatmap_resource=None, alerts=empty, champions=empty, plan_run="p",
                      recommendations={"allocation": alloc, "reservation": res})
    lines = summary_lines(data)
    assert lines[0] == "c/p/gpu: keep the running fleet, $5,000/month."
    assert not any(line.startswith("Split private/public/edge") for line in lines)
    assert "Reservations: none to buy while every pool keeps its running fleet" in lines[1]
    assert not any("saves $800" in line for line in lines)


def test_the_summary_sums_each_pools_recommended_split_whatever_its_public_share() -> None:
    """A recommended 0/0/100 split was left out of the line (only splits with a public share
    counted), and a pool recommended the default was shown with its tuned split."""
    from pipelines.report.data import ReportData
    from pipelines.report.html import summary_lines

    alloc = pd.DataFrame({"unique_id": ["c/a/gpu"] * 2 + ["c/b/gpu"] * 2, "plan": ["default_3_5_2", "tuned"] * 2,
                          "private": [0.3, 0.0, 0.3, 0.6], "public": [0.5, 0.0, 0.5, 0.4], "edge": [0.2, 1.0, 0.2, 0.0],
                          "monthly_cost": [9000.0, 6000.0, 4000.0, 4500.0], "recommended": [False, True, True, False],
                          "headline": ["", "the split 0%/0%/100%", "the default 3-5-2 split", ""]})
    empty = pd.DataFrame()
    data = ReportData(data_cutoff=None, counts={}, forecasts=empty, history=empty, heatmap=empty,
                      heatmap_resource=None, alerts=empty, champions=empty, plan_run="p",
                      recommendations={"allocation": alloc})
    line = next(line for line in summary_lines(data) if line.startswith("Split"))
    assert line.startswith("Split private/public/edge: c/a/gpu 0%/0%/100%, c/b/gpu 30%/50%/20%; $10,000 per month")
    assert "$3,000 less than the default split" in line


def test_exports_never_show_negative_zero(tmp_path: Path) -> None:
    """A payload value that rounded to -0.0 (or any frame passed in) is written as 0.0."""
    payload = {"expected_savings": -0.0, "savings_vs_default": 0.0, "monthly_cost": 5.0}
    plan = pd.DataFrame({"run_id": ["r"], "kind": ["allocation"], "key": ["k"], "model_id": [None],
                         "data_cutoff": [START], "payload": [json.dumps(payload)]})
    flat = report_io.flatten_recommendations(plan)["allocation"]
    assert not np.signbit(flat["expected_savings"].to_numpy()).any()
    frame = pd.DataFrame({"run_id": ["r", "r"], "key": ["a", "b"], "model_id": [None, None],
                          "data_cutoff": [None, None], "x": [-0.0, float("nan")],
                          "mixed": pd.Series([-0.0, None], dtype=object)})
    report_io.write_report(tmp_path, "<html></html>", {"allocation": frame})
    csv = (tmp_path / "recommendations_allocation.csv").read_text()
    assert "-0.0" not in csv and "0.0" in csv
    back = pd.read_parquet(tmp_path / "recommendations_allocation.parquet")
    assert not np.signbit(back["x"].to_numpy()[:1]).any() and back["x"].isna().iloc[1]
    assert not np.signbit(float(back["mixed"].iloc[0]))
    assert np.signbit(frame["x"].to_numpy()[0])  # the caller's frame is not changed


def test_money_is_one_format_with_the_currency() -> None:
    assert money(1234.6) == "$1,235" and money(-40) == "-$40"
    assert money(-0.4) == "$0" and money(-0.0) == "$0"
    assert money(None) == "–" and money(float("nan")) == "–"


def _plan_page_data() -> report_io.ReportData:
    """A plan run with allocation and pre-scale rows and a champion, nothing else."""
    alloc = pd.DataFrame({"unique_id": ["c/p/gpu"] * 2, "resource": ["gpu"] * 2, "plan": ["default_3_5_2", "tuned"],
                          "private": [0.3, 0.7], "public": [0.5, 0.3], "edge": [0.2, 0.0],
                          "monthly_cost": [9000.0, 7000.0], "private_cost": [3000.0, 4000.0],
                          "public_cost": [4500.0, 2700.0], "edge_cost": [1000.0, 0.0], "idle_penalty": [500.0, 300.0],
                          "savings_vs_default": [0.0, 2000.0], "retuned": [False, True]})
    ts = START + pd.Timedelta(hours=1)
    pre = pd.DataFrame({"key": ["c/p/gpu/1"], "unique_id": ["c/p/gpu"], "ts": [ts], "action": ["scale_up"],
                        "instances_delta": [1], "units_per_instance": [8.0], "capacity": [16.0],
                        "target_capacity": [24.0], "applies_to": ["pool nodes (whole demand, not split)"]})
    champions = pd.DataFrame({"group": ["gpu"], "kind": ["lgbm"], "model_id": ["m"], "data_cutoff": [START],
                              "wape": [0.1], "mase": [0.8], "smape": [9.0], "msis": [7.0],
                              "coverage_80": [0.8], "coverage_95": [0.95]})
    empty = pd.DataFrame()
    return report_io.ReportData(data_cutoff=START, counts={}, forecasts=empty, history=empty, heatmap=empty,
                                heatmap_resource=None, alerts=empty, champions=champions, plan_run="plan-1",
                                recommendations={"allocation": alloc, "prescale": pre})


def test_the_page_explains_its_terms_and_writes_costs_with_the_currency() -> None:
    page = report_html.render_report(_plan_page_data())
    glossary = page[page.index('<section id="glossary">'):]
    for term in ("wape", "mase", "smape", "msis", "coverage", "retuned", "spill"):
        assert f'id="g-{term}"' in glossary
    assert "below 1 does not by itself mean beating that baseline" in glossary  # in-sample scaled, as M4 defines it
    assert '<a href="#glossary">glossary</a>' in page  # in the nav and the champion models section
    models = page[page.index('<section id="models">'):page.index('<section id="glossary">')]
    for col, anchor in (("wape", "wape"), ("mase", "mase"), ("coverage_80", "coverage"), ("msis", "msis")):
        assert f'<th><a href="#g-{anchor}">{col}</a></th>' in models
    alloc = page[page.index('<section id="allocation">'):page.index('<section id="reservations">')]
    assert '<td class="num">$7,000</td>' in alloc and '<td class="num">$2,000</td>' in alloc
    assert '<td class="num">0.7</td>' in alloc  # shares are not money


def test_the_prescale_section_says_what_it_scales() -> None:
    page = report_html.render_report(_plan_page_data())
    section = page[page.index('<section id="prescale">'):page.index('<section id="alerts">')]
    assert "The schedule applies to each pool's running nodes" in section
    assert "does not follow the split above" in section and "units_per_instance</th>" in section
    summary = page[page.index(">Summary<"):]
    assert "1 scale-up and 0 scale-down action(s) of the pools&#x27; running nodes" in summary


def test_the_cost_legend_is_outside_every_panel() -> None:
    """The legend sits above the panels, so it cannot cover a bar, however tall."""
    alloc = _plan_page_data().recommendations["allocation"]
    fig = report_plots.cost_figure(pd.concat([alloc, alloc.assign(unique_id="d/q/cpu")]))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    assert all(ax.get_legend() is None for ax in fig.axes) and len(fig.legends) == 1
    legend = fig.legends[0].get_window_extent(renderer)
    assert not any(legend.overlaps(ax.get_window_extent(renderer)) for ax in fig.axes)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["private cost", "public cost", "edge cost",
                                                                  "idle penalty"]
    assert fig.axes[0].get_ylabel() == "monthly cost ($)"
    plt.close(fig)
