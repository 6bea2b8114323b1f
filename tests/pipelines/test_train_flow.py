"""The train flow on a real warehouse file, under the session's Prefect harness."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from pipelines import demand, model_store, warehouse

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def utilization() -> pd.DataFrame:
    from pipelines.synth import generate_fleet

    return generate_fleet(nodes=4, days=10, seed=1)["utilization"]


def _load(con, utilization: pd.DataFrame) -> None:
    """Plain insert: utilization keeps its key in pipelines.ingest, not as a PRIMARY KEY."""
    con.register("_util", utilization)
    con.execute("INSERT INTO utilization SELECT ts, cluster, pool, node_id, resource, used, capacity FROM _util")
    con.unregister("_util")


def test_demand_is_hourly_sum_of_node_means(con, utilization: pd.DataFrame) -> None:
    _load(con, utilization)
    got = demand.load_demand(con)
    assert set(got.columns) == {"unique_id", "ds", "y"}
    assert got["unique_id"].str.count("/").eq(2).all()
    assert (got.groupby("unique_id")["ds"].diff().dropna() == pd.Timedelta(hours=1)).all()
    # one hour by hand
    uid = got["unique_id"].iloc[0]
    cluster, pool, resource = uid.split("/")
    hour = got["ds"].iloc[5]
    rows = utilization[(utilization.cluster == cluster) & (utilization.pool == pool)
                       & (utilization.resource == resource) & (utilization.ts.dt.floor("h") == hour)]
    expected = rows.groupby("node_id")["used"].mean().sum()
    assert got.loc[(got.unique_id == uid) & (got.ds == hour), "y"].iloc[0] == pytest.approx(expected)


def test_a_node_silent_for_some_hours_is_not_counted_as_zero(caplog) -> None:
    """Three nodes at 10 each. n3 misses 5 hours (missed scrapes: interpolated, the total
    stays 30); n2 is off for 30 hours (not invented: 20); n3 leaves after hour 200 (not
    extended); n2's last 2 hours are not in yet (late, not gone): with only n1 of the two
    expected those hours are no total, and the series ends at its last complete hour."""
    hours = pd.date_range("2024-01-01", periods=240, freq="h")
    rows = []
    for node in ("n1", "n2", "n3"):
        for i, h in enumerate(hours):
            if (node == "n3" and (100 <= i < 105 or i > 200)) or (node == "n2" and (150 <= i < 180 or i >= 238)):
                continue
            rows.append({"unique_id": "c/p/cpu", "node_id": node, "ds": h, "used": 10.0})
    with caplog.at_level("WARNING"):
        out = demand.regularize(demand.sum_nodes(pd.DataFrame(rows))).set_index("ds")["y"]
    assert out.index[0] == hours[0]
    assert (out.loc[hours[100]:hours[104]] == 30).all()  # n3's short silence filled
    assert (out.loc[hours[150]:hours[179]] == 20).all()  # n2 off for a day and more: not invented
    assert (out.loc[hours[201]:] == 20).all() and out.index[-1] == hours[237]  # n3 gone; n2 late
    assert "5 node-hour(s)" in caplog.text and "2 hour(s) with 50% or fewer" in caplog.text


def test_hours_most_nodes_have_not_reported_yet_are_dropped() -> None:
    """100 nodes, 60 of them 2 hours late: the last 2 hours are not a drop in demand."""
    hours = pd.date_range("2024-01-01", periods=48, freq="h")
    rows = [{"unique_id": "c/p/cpu", "node_id": f"n{k}", "ds": h, "used": 1.0}
            for k in range(100) for i, h in enumerate(hours) if not (k < 60 and i >= 46)]
    out = demand.regularize(demand.sum_nodes(pd.DataFrame(rows)))
    assert out["ds"].max() == hours[45] and (out["y"] == 100).all()


def test_a_node_a_few_hours_behind_counts_at_its_last_value(caplog) -> None:
    """4 nodes at 10 each, one 2 (then 3) hours behind the others: its hours are not a 25%
    dip (a forecast would start from it, and the CUSUM reads an hour once) but count at its
    last value, 10; when its readings come they count as they are. A node further behind
    than LATE_CARRY hours counts as absent."""
    hours = pd.date_range("2024-01-01", periods=72, freq="h")

    def totals(missing: int, last: float = 10.0) -> pd.Series:
        rows = [{"unique_id": "c/p/cpu", "node_id": f"n{k}", "ds": h, "used": last if (k == 3 and i == 71 - missing)
                 else 10.0} for k in range(4) for i, h in enumerate(hours) if not (k == 3 and i > 71 - missing)]
        return demand.regularize(demand.sum_nodes(pd.DataFrame(rows))).set_index("ds")["y"]

    with caplog.at_level("INFO", logger="pipelines.demand"):
        late = totals(2)
    assert late.index[-1] == hours[71] and (late == 40).all()
    assert "1 node(s) not reported" in caplog.text
    assert (totals(demand.LATE_CARRY) == 40).all()
    assert (totals(0) == 40).all()
    drained = totals(2, last=0.0)  # a node drained before it left adds nothing
    assert (drained.loc[hours[70]:] == 30).all()
    gone = totals(demand.LATE_CARRY + 1)
    assert (gone.loc[hours[71 - demand.LATE_CARRY]:] == 30).all() and (gone.loc[:hours[67]] == 40).all()


def test_the_burst_detector_waits_for_a_late_node_and_a_moved_node_is_not_late() -> None:
    """A busy node dies 2 hours before the end and its load moves onto the other 3: carried at
    its last value it would be counted twice (a burst the CUSUM cannot take back), so the
    detector's view (late="wait") leaves those hours out until the node reports or falls more
    than LATE_CARRY hours behind. A node that moved to another pool of its cluster is not late
    in the old one; a node whose other resource reports on time still is (its exporter is late)."""
    hours = pd.date_range("2024-01-01", periods=72, freq="h")
    rows = [{"unique_id": "c/p/gpu", "node_id": f"n{k}", "ds": h,
             "used": 10.0 + (10.0 / 3 if k < 3 and i >= 70 else 0.0)}
            for k in range(4) for i, h in enumerate(hours) if not (k == 3 and i >= 70)]
    frame = pd.DataFrame(rows)
    carried = demand.regularize(demand.sum_nodes(frame)).set_index("ds")["y"]
    assert carried.iloc[-1] == pytest.approx(50)  # the train/plan view: 40 + the dead node's 10
    waited = demand.regularize(demand.sum_nodes(frame, late="wait")).set_index("ds")["y"]
    assert waited.index[-1] == hours[69] and (waited == 40).all()
    with pytest.raises(ValueError, match="late must be"):
        demand.sum_nodes(frame, late="never")

    moved = frame.copy()
    moved.loc[(moved["node_id"] == "n0") & (moved["ds"] >= hours[70]), "unique_id"] = "c/q/gpu"
    moved = pd.concat([moved, frame[(frame.node_id == "n3") & (frame.ds >= hours[68])].assign(unique_id="c/p/cpu")])
    out = demand.regularize(demand.sum_nodes(moved)).set_index(["unique_id", "ds"])["y"]
    # n0 moved to q: p counts n1, n2 (and late n3 at its last value, 10), not n0 as well
    assert out.loc[("c/p/gpu", hours[71])] == pytest.approx(2 * (10 + 10 / 3) + 10)
    assert out.loc[("c/q/gpu", hours[71])] == pytest.approx(10 + 10 / 3)


def test_an_hour_still_in_progress_waits_until_it_is_complete(con) -> None:
    """5-minute readings up to 10:25: the 10:00 hour has 6 of its 12 readings per node, so
    it is not demand yet (the detect flow would commit its CUSUM state past it); once the
    hour is complete it is."""
    def readings(end: str) -> pd.DataFrame:
        ts = pd.date_range("2024-01-01", end, freq="5min")
        return pd.DataFrame([{"ts": t, "cluster": "c", "pool": "p", "node_id": n, "resource": "cpu",
                              "used": 1.0 + (t.minute >= 30), "capacity": 8.0} for t in ts for n in ("a", "b")])
    _load(con, readings("2024-01-01 10:25"))
    assert demand.load_demand(con)["ds"].max() == pd.Timestamp("2024-01-01 09:00")
    con.execute("DELETE FROM utilization")
    _load(con, readings("2024-01-01 10:55"))
    got = demand.load_demand(con)
    assert got["ds"].max() == pd.Timestamp("2024-01-01 10:00") and got["y"].iloc[-1] == 3.0


def test_regularize_fills_gaps_and_drops_partial_last_hour() -> None:
    ds = pd.to_datetime(["2024-01-01 00:00", "2024-01-01 01:00", "2024-01-01 03:00", "2024-01-01 04:00"])
    raw = pd.DataFrame({"unique_id": "c/p/gpu", "ds": ds, "y": [1.0, 2.0, 4.0, 1.0], "nodes": [3, 3, 3, 1]})
    out = demand.regularize(raw)
    assert out["y"].tolist() == [1.0, 2.0, 3.0, 4.0]


def test_regularize_does_not_invent_a_long_outage(caplog) -> None:
    """Gaps up to a day are interpolated; after a longer outage the series restarts, and a
    series with less than a week since its outage is left out, each said in the log."""
    a = pd.date_range("2024-01-01", periods=24 * 10, freq="h")
    b = pd.date_range("2024-02-01", periods=24 * 8, freq="h")  # after a 3-week outage
    c = pd.date_range("2024-02-05", periods=24 * 2, freq="h")  # only 2 days after it
    raw = pd.concat([
        pd.DataFrame({"unique_id": "c/p/gpu", "ds": a.append(b), "y": 1.0}),
        pd.DataFrame({"unique_id": "c/q/gpu", "ds": a.append(c), "y": 2.0}),
        pd.DataFrame({"unique_id": "c/r/gpu", "ds": a.delete(range(100, 120)), "y": 3.0}),  # 20 h gap
    ])
    with caplog.at_level("WARNING"):
        out = demand.regularize(raw)
    sizes = out.groupby("unique_id").size().to_dict()
    assert sizes == {"c/p/gpu": 24 * 8, "c/r/gpu": 24 * 10}
    assert out.loc[out["unique_id"] == "c/p/gpu", "ds"].min() == b[0]
    assert "c/q/gpu: left out" in caplog.text and "the series starts after it" in caplog.text
    assert "c/r/gpu: 20 missing hour(s) interpolated" in caplog.text


def test_pick_champions_by_wape() -> None:
    table = pd.DataFrame({"group": ["gpu", "gpu", "cpu", "cpu"], "model": ["a", "b", "a", "b"],
                          "wape": [0.2, 0.1, 0.3, np.nan]})
    assert model_store.pick_champions(table) == {"gpu": "b", "cpu": "a"}


def test_train_flow_end_to_end(prefect_harness, db_path, utilization: pd.DataFrame) -> None:
    from pipelines.flows.train import train_flow

    with warehouse.open_warehouse(db_path) as con:
        _load(con, utilization)
    out = train_flow(str(db_path), horizon=12, models=["seasonal_naive", "lgbm"], windows=1, lookback_days=None)
    assert out["series"] == 8
    assert set(out["groups"]) == {"cpu", "gpu", "mem"}
    for g in out["groups"].values():
        assert g["champion"] == min(g["scores"], key=g["scores"].get)
        assert g["model_id"].startswith(g["champion"])

    with warehouse.open_warehouse(db_path) as con:
        models = warehouse.query(con, "SELECT * FROM models")
        forecasts = warehouse.query(con, "SELECT * FROM forecasts")
        backtests = warehouse.query(con, "SELECT * FROM backtests")
        assert len(models) == 3 and models["is_champion"].all()
        assert set(forecasts["model_id"]) == set(models["model_id"])
        assert len(forecasts) == 8 * 12
        assert len(backtests) == 8 * 12 * 2  # two models, one window
        assert (forecasts["lo_95"] <= forecasts["mean"]).all() and (forecasts["mean"] <= forecasts["hi_95"]).all()
        assert json.loads(models["metrics"].iloc[0])["wape"] >= 0

        # the stored artifact reproduces the stored forecast
        mid = out["groups"]["gpu"]["model_id"]
        again = model_store.load_model(con, mid).predict(12)
        stored = forecasts[forecasts.model_id == mid].sort_values(["unique_id", "ds"]).reset_index(drop=True)
        np.testing.assert_allclose(again["mean"].to_numpy(), stored["mean"].to_numpy())
        assert model_store.champion_id(con, "gpu") == mid

    # re-running over the same data leaves the same rows, models untouched
    out2 = train_flow(str(db_path), horizon=12, models=["seasonal_naive", "lgbm"], windows=1, lookback_days=None)
    assert out2["run_id"] == out["run_id"]
    with warehouse.open_warehouse(db_path) as con:
        counts = warehouse.table_counts(con).set_index("table")["rows"]
        assert counts["models"] == 3 and counts["forecasts"] == 8 * 12 and counts["backtests"] == 8 * 12 * 2
        again = warehouse.query(con, "SELECT model_id, metrics, created_at FROM models ORDER BY model_id")
        pd.testing.assert_frame_equal(
            again, models[["model_id", "metrics", "created_at"]].sort_values("model_id").reset_index(drop=True))

    # grouping the same series another way: one champion per series, one forecast per hour
    out3 = train_flow(str(db_path), horizon=12, models=["seasonal_naive"], windows=1, lookback_days=None,
                      group_by="all")
    assert out3["run_id"] != out["run_id"] and out3["run_id"][:19] == out["run_id"][:19]  # same cutoff
    with warehouse.open_warehouse(db_path) as con:
        # each run's backtests are its own: the first run's two models, this one's one
        per_run = warehouse.query(con, "SELECT run_id, count(DISTINCT model) AS n FROM backtests GROUP BY run_id")
        assert dict(zip(per_run["run_id"], per_run["n"])) == {out["run_id"]: 2, out3["run_id"]: 1}
        champs = warehouse.query(con, "SELECT target, series FROM models WHERE is_champion")
        assert champs["target"].tolist() == ["all"] and len(json.loads(champs["series"].iloc[0])) == 8
        from pipelines.report_io import CHAMPION_FORECASTS_SQL

        served = warehouse.query(con, CHAMPION_FORECASTS_SQL)
        assert len(served) == 8 * 12 and not served.duplicated(["unique_id", "ds"]).any()

    # the same champion fitted by a run with other settings (more backtest windows): its
    # forecasts are that run's alone, not two sets picked between by run id
    other = train_flow(str(db_path), horizon=12, models=["seasonal_naive"], windows=2, lookback_days=None,
                       group_by="all")
    assert other["run_id"] != out3["run_id"] and other["groups"]["all"]["model_id"] == out3["groups"]["all"]["model_id"]
    with warehouse.open_warehouse(db_path) as con:
        runs = con.execute("SELECT DISTINCT run_id FROM forecasts WHERE model_id = ?",
                           [other["groups"]["all"]["model_id"]]).fetchall()
        assert runs == [(other["run_id"],)]

    # a run id written again is replaced as a whole: no model of the earlier run lingers
    train_flow(str(db_path), horizon=12, models=["seasonal_naive"], windows=1, lookback_days=None,
               run_id=out["run_id"])
    with warehouse.open_warehouse(db_path) as con:
        kept = warehouse.query(con, "SELECT DISTINCT model FROM backtests WHERE run_id = ?", [out["run_id"]])
        assert kept["model"].tolist() == ["seasonal_naive"]


def test_a_series_too_short_to_backtest_is_left_out_not_the_fleet(prefect_harness, db_path,
                                                                    utilization: pd.DataFrame) -> None:
    """A pool that started reporting 30 hours ago: the others train, it is named in a
    warning; when every series is that short, the error says how many points are needed."""
    from forecasters.validation import HistoryError
    from pipelines.flows.train import train_flow

    end = utilization["ts"].max()
    young = utilization[(utilization["ts"] > end - pd.Timedelta(hours=30)) & (utilization["pool"] == utilization["pool"].iloc[0])]
    young = young.assign(cluster="young", node_id="young-" + young["node_id"])
    with warehouse.open_warehouse(db_path) as con:
        _load(con, pd.concat([utilization, young], ignore_index=True))
    # (the warning that names it is not checked: Prefect's logging setup may take caplog's handler)
    out = train_flow(str(db_path), horizon=12, models=["seasonal_naive"], windows=1, lookback_days=None)
    assert out["series"] == 8  # the young pool's series is not among them
    with pytest.raises(HistoryError, match="every series is shorter than the"):
        train_flow(str(db_path), horizon=24 * 6, models=["seasonal_naive"], windows=2, lookback_days=None)


def test_train_flow_empty_warehouse_is_clear(prefect_harness, db_path) -> None:
    from pipelines.flows.train import train_flow

    with warehouse.open_warehouse(db_path):
        pass
    with pytest.raises(ValueError, match="no utilization"):
        train_flow(str(db_path), models=["seasonal_naive"])


def test_train_cli(prefect_harness, db_path, utilization: pd.DataFrame, capsys: pytest.CaptureFixture[str]) -> None:
    from pipelines.cli import main

    with warehouse.open_warehouse(db_path) as con:
        _load(con, utilization)
    missing = db_path.parent / "typo.duckdb"
    assert main(["train", "--db", str(missing)]) == 2
    assert "no warehouse" in capsys.readouterr().err and not missing.exists()
    assert main(["train", "--db", str(db_path), "--models", "nope"]) == 2
    assert "unknown model" in capsys.readouterr().err
    assert main(["train", "--db", str(db_path), "--models", "seasonal_naive", "--windows", "1",
                 "--horizon", "6", "--lookback-days", "7"]) == 0
    out = capsys.readouterr().out
    assert "champion seasonal_naive" in out and "rows written" in out
    with warehouse.open_warehouse(db_path) as con:
        assert con.execute("SELECT count(*) FROM forecasts").fetchone()[0] == 8 * 6


@pytest.mark.slow
def test_train_flow_on_dask_matches_threads(prefect_harness, tmp_path, utilization: pd.DataFrame) -> None:
    """HEADROOM_TASK_RUNNER=dask fans the backtests and fits out over a local Dask cluster
    and leaves the same champions, forecasts and run id as the thread pool."""
    pytest.importorskip("prefect_dask")
    from pipelines.flows.train import task_runner_for, train_flow
    from pipelines.settings import Settings

    assert type(task_runner_for(Settings(task_runner="dask"))).__name__ == "DaskTaskRunner"
    out = {}
    for runner in ("thread", "dask"):
        db = tmp_path / f"{runner}.duckdb"
        with warehouse.open_warehouse(db) as con:
            _load(con, utilization)
        flow = train_flow.with_options(task_runner=task_runner_for(Settings(task_runner=runner, max_workers=2)))
        out[runner] = flow(str(db), horizon=12, models=["seasonal_naive", "lgbm"], windows=1, lookback_days=None)
        with warehouse.open_warehouse(db, read_only=True) as con:
            out[runner]["forecast"] = warehouse.query(con, "SELECT * FROM forecasts ORDER BY unique_id, ds")
    assert out["dask"]["run_id"] == out["thread"]["run_id"]
    assert out["dask"]["groups"] == out["thread"]["groups"]
    pd.testing.assert_frame_equal(out["dask"]["forecast"], out["thread"]["forecast"])


def test_a_refit_that_differs_replaces_the_stored_artifact(con) -> None:
    """Same id (kind, target, series, cutoff, params) but other bytes: the row must follow the
    new fit, or the forecasts written with it would not match what load_model returns."""
    args = dict(kind="lgbm", target="gpu", series=["c/p/gpu"], data_cutoff=pd.Timestamp("2026-01-01"),
                params={"a": 1}, metrics={"wape": 0.1}, champion=True)
    mid = model_store.register_model(con, artifact=b"first", **args)
    assert model_store.register_model(con, artifact=b"first", **args) == mid
    model_store.register_model(con, artifact=b"second", **args)
    stored = con.execute("SELECT artifact, is_champion FROM models WHERE model_id = ?", [mid]).fetchone()
    assert bytes(stored[0]) == b"second" and stored[1]


def _champ(group: str, kind: str, cutoff: str, series: list[str], wape: float = 0.1) -> dict:
    ds = pd.date_range(pd.Timestamp(cutoff) + pd.Timedelta(hours=1), periods=2, freq="h")
    return {"group": group, "kind": kind, "series": series, "data_cutoff": pd.Timestamp(cutoff),
            "params": {"k": kind}, "metrics": {"wape": wape, "seconds": 1.0}, "artifact": kind.encode() + b"!",
            "forecast": pd.DataFrame({"unique_id": series[0], "ds": ds, "model": kind, "mean": 1.0, "lo_80": 0.0,
                                      "hi_80": 2.0, "lo_95": 0.0, "hi_95": 3.0})}


def _champions(con) -> dict[str, str]:
    return dict(con.execute("SELECT target, kind FROM models WHERE is_champion ORDER BY target").fetchall())


def test_champions_stay_with_the_newest_data(con) -> None:
    """A slow train on older data that saves after one on newer data does not take its
    champions back; a run on newer data retires the champions of older data it did not
    replace (a group left out now), so no stale forecast stays current."""
    new = model_store.save_run(con, "r-new", [_champ("cpu", "lgbm", "2026-01-25", ["c/p/cpu"])], [],
                               pd.Timestamp("2026-01-25"))
    old = model_store.save_run(con, "r-old", [_champ("cpu", "lstm", "2026-01-23", ["c/p/cpu"])], [],
                               pd.Timestamp("2026-01-23"))
    assert new["superseded"] == [] and old["superseded"] == ["cpu"]
    assert _champions(con) == {"cpu": "lgbm"}
    model_store.save_run(con, "r-gpu", [_champ("gpu", "ets", "2026-01-24", ["c/p/gpu"])], [],
                         pd.Timestamp("2026-01-24"))  # (older than cpu's: retires nothing newer)
    assert _champions(con) == {"cpu": "lgbm", "gpu": "ets"}
    later = model_store.save_run(con, "r-later", [_champ("cpu", "lgbm", "2026-01-27", ["c/p/cpu"])], [],
                                 pd.Timestamp("2026-01-27"))
    assert later["retired"] == 1 and _champions(con) == {"cpu": "lgbm"}  # gpu was not trained: retired


def test_a_group_idle_in_every_window_is_ranked_by_mae() -> None:
    """WAPE is undefined where the actuals sum to 0: the group still gets a champion."""
    results = [{"group": "gpu", "model": m, "metrics": {"wape": None, "mae": mae}}
               for m, mae in (("seasonal_naive", 0.0), ("ets", 0.2))]
    results += [{"group": "cpu", "model": "ets", "metrics": {"wape": 0.1, "mae": 3.0}}]
    assert model_store.champions_from(results) == {"cpu": "ets", "gpu": "seasonal_naive"}


def test_the_same_model_scored_again_keeps_its_row_but_takes_the_new_scores(con) -> None:
    args = dict(kind="ets", target="cpu", series=["c/p/cpu"], data_cutoff=pd.Timestamp("2026-01-01"),
                params={"a": 1}, artifact=b"same", champion=True)
    mid = model_store.register_model(con, metrics={"wape": 0.0947, "seconds": 1.0}, **args)
    created = con.execute("SELECT created_at FROM models WHERE model_id = ?", [mid]).fetchone()[0]
    model_store.register_model(con, metrics={"wape": 0.0947, "seconds": 9.0}, **args)  # wall time alone
    assert json.loads(con.execute("SELECT metrics FROM models").fetchone()[0])["seconds"] == 1.0
    model_store.register_model(con, metrics={"wape": 0.087, "seconds": 2.0}, **args)  # --windows 4
    row = con.execute("SELECT metrics, created_at FROM models WHERE model_id = ?", [mid]).fetchone()
    assert json.loads(row[0])["wape"] == 0.087 and row[1] == created


def test_a_series_that_stopped_reporting_is_not_forecast_from_its_past(caplog) -> None:
    ds = pd.date_range("2026-01-01", periods=24 * 10, freq="h")
    frame = pd.concat([pd.DataFrame({"unique_id": "c/live/cpu", "ds": ds, "y": 1.0}),
                       pd.DataFrame({"unique_id": "c/late/cpu", "ds": ds[:-10], "y": 1.0}),
                       pd.DataFrame({"unique_id": "c/gone/cpu", "ds": ds[:-48], "y": 1.0})])
    kept = demand.drop_stale(frame)
    assert sorted(kept["unique_id"].unique()) == ["c/late/cpu", "c/live/cpu"]
    assert "more than 24 h before the data cutoff" in caplog.text and "c/gone/cpu (last 2026-01-08 23:00:00)" in caplog.text


def test_train_cli_refuses_settings_that_cannot_mean_anything(tmp_path, capsys) -> None:
    from pipelines.cli import main

    db = tmp_path / "none.duckdb"
    for argv, said in ((["--models", ","], "unknown model(s) ','"),
                       (["--lookback-days", "1000000"], "--lookback-days must be between 1 and 36500"),
                       (["--lookback-days", "-1"], "--lookback-days must be between 1 and 36500")):
        assert main(["train", "--db", str(db), *argv]) == 2
        assert said in capsys.readouterr().err
