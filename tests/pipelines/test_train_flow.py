"""The train flow on a real warehouse file, under the session's Prefect harness."""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from forecasters import selection
from pipelines.store import demand, warehouse
from pipelines.store import models as model_store

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def utilization() -> pd.DataFrame:
    from pipelines.synth.fleet import generate_fleet

    return generate_fleet(nodes=4, days=10, seed=1)["utilization"]


def _load(con, utilization: pd.DataFrame) -> None:
    """Plain insert: utilization keeps its key in pipelines.ingest.loading, not as a PRIMARY KEY."""
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


def test_pick_champions_by_wape() -> None:
    table = pd.DataFrame({"group": ["gpu", "gpu", "cpu", "cpu"], "model": ["a", "b", "a", "b"],
                          "wape": [0.2, 0.1, 0.3, np.nan]})
    assert selection.pick_champions(table) == {"gpu": "b", "cpu": "a"}


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
        from pipelines.store.models import CHAMPION_FORECASTS_SQL

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


def test_interpolated_hours_are_not_scored(prefect_harness, db_path, utilization: pd.DataFrame) -> None:
    """Every node silent for 10 hours of the backtest window: train interpolates them (a
    straight line) but stores their forecasts without an actual, so no champion is picked on
    hours that were never read."""
    from pipelines.flows.train import train_flow

    end = utilization["ts"].max()
    silent = (utilization["ts"] > end - pd.Timedelta(hours=20)) & (utilization["ts"] <= end - pd.Timedelta(hours=10))
    with warehouse.open_warehouse(db_path) as con:
        _load(con, utilization[~silent])
    out = train_flow(str(db_path), horizon=24, models=["seasonal_naive"], windows=1, lookback_days=None)
    with warehouse.open_warehouse(db_path) as con:
        blank = con.execute("SELECT count(*) FILTER (WHERE y IS NULL), count(DISTINCT unique_id) FROM backtests "
                            "WHERE run_id = ?", [out["run_id"]]).fetchone()
    assert blank == (10 * out["series"], out["series"])


def test_a_series_one_model_cannot_fit_is_left_out_of_that_model_only(prefect_harness, db_path,
                                                                      utilization: pd.DataFrame) -> None:
    """A pool 60 hours old: long enough for seasonal_naive's backtest, too short for lgbm's
    (72 points) but not for its fit (60). lgbm is backtested on the other series and says which
    it left out; the champion, chosen on the series both scored, forecasts every series, so
    the young one still gets its forecast."""
    from pipelines.flows.train import train_flow

    end = utilization["ts"].max()
    young = utilization[(utilization["ts"] > end - pd.Timedelta(hours=60)) & (utilization["pool"] == utilization["pool"].iloc[0])]
    young = young.assign(cluster="young", node_id="young-" + young["node_id"])
    with warehouse.open_warehouse(db_path) as con:
        _load(con, pd.concat([utilization, young], ignore_index=True))
    out = train_flow(str(db_path), horizon=12, models=["seasonal_naive", "lgbm"], windows=1, lookback_days=None)
    assert out["series"] == 11  # 8 of the fleet, the young pool's 3 resources
    for g in out["groups"].values():  # one young series per resource group
        assert len(g["left_out"]) == 2 and g["left_out"][0].startswith("lgbm: series young/")
        assert re.match(r"champion chosen on the \d+ series every model's backtest scored", g["left_out"][1])
        assert "left out of its backtest, not its fit" in g["left_out"][0] and "need at least 72" in g["left_out"][0]
        assert g["scores"]["lgbm"] is not None
    with warehouse.open_warehouse(db_path) as con:
        ids = {r[0] for r in con.execute("SELECT DISTINCT unique_id FROM forecasts WHERE run_id = ?",
                                         [out["run_id"]]).fetchall()}
    assert sum(u.startswith("young/") for u in ids) == 3 and len(ids) == 11


def test_a_young_series_a_model_can_fit_leaves_it_champion_where_it_is_best() -> None:
    """lgbm's backtest left a young pool out (too short for its windows) but its fit takes it:
    it is compared with seasonal naive on the series both scored and, better there, is champion
    (a young pool moved its whole group to seasonal naive). A young pool its fit cannot take
    keeps the model that forecasts every series."""
    def cv(model: str, err: float, ids: list[str]) -> pd.DataFrame:
        return pd.DataFrame({"unique_id": ids, "ds": pd.Timestamp("2026-01-01"), "model": model,
                             "y": 10.0, "mean": 10.0 + err})
    old, young = ["p1", "p2", "p3"], ["p1", "p2", "p3", "young"]
    naive = {"group": "gpu", "model": "seasonal_naive", "metrics": {"wape": 0.083, "mae": 0.8},
             "cv": cv("seasonal_naive", 1.0, young), "skipped": {}, "unfit": {}}
    lgbm = {"group": "gpu", "model": "lgbm", "metrics": {"wape": 0.066, "mae": 0.7},
            "cv": cv("lgbm", 0.5, old), "skipped": {"young": "96 points, need at least 120"}, "unfit": {}}
    assert selection.champions_from([naive, lgbm]) == {"gpu": "lgbm"}
    assert selection.left_out_lines([naive, lgbm])["gpu"] == [
        "lgbm: series young left out of its backtest, not its fit (96 points, need at least 120)",
        "champion chosen on the 3 series every model's backtest scored (each WAPE above is over the model's own "
        "series)"]
    assert selection.champions_from([naive, {**lgbm, "unfit": lgbm["skipped"]}]) == {"gpu": "seasonal_naive"}
    # on the common series the one that skipped is worse: the other, though its own WAPE is higher
    worse = {**lgbm, "cv": cv("lgbm", 1.5, old), "metrics": {"wape": 0.05, "mae": 0.5}}
    assert selection.champions_from([naive, worse]) == {"gpu": "seasonal_naive"}
    # two models that left out different series between them share none: each on its own scores
    a = {**lgbm, "model": "a", "cv": cv("a", 0.5, ["p1"]), "skipped": {"p2": "short"}, "metrics": {"wape": 0.04}}
    b = {**lgbm, "model": "b", "cv": cv("b", 0.2, ["p2"]), "skipped": {"p1": "short"}, "metrics": {"wape": 0.06}}
    assert selection.champions_from([a, b]) == {"gpu": "a"}


def test_a_series_left_out_for_another_reason_than_length_stays_out_of_the_fit() -> None:
    """A series long enough for the backtest but left out of it (an optimiser that failed) is
    no young pool: the champion's fit leaves it out too, rather than failing the run on it."""
    spec = selection.TrainSpec(horizon=12, windows=1)
    hours = pd.date_range("2026-01-01", periods=200, freq="h")
    history = pd.DataFrame({"unique_id": np.repeat(["long", "young", "tiny"], [200, 70, 40]),
                            "ds": list(hours) + list(hours[:70]) + list(hours[:40]), "y": 1.0})
    skipped = {"long": "optimiser failed", "young": "short", "tiny": "short"}
    assert set(selection.unfit(history, "lgbm", spec, skipped)) == {"long", "tiny"}


def test_train_flow_empty_warehouse_is_clear(prefect_harness, db_path) -> None:
    from pipelines.flows.train import train_flow

    with warehouse.open_warehouse(db_path):
        pass
    with pytest.raises(ValueError, match="no utilization"):
        train_flow(str(db_path), models=["seasonal_naive"])


def test_a_reading_dated_far_ahead_is_named_not_taken_for_short_history(prefect_harness, db_path,
                                                                          utilization: pd.DataFrame, capsys) -> None:
    """One row dated 2126 ended the training window a century on: "every series is shorter than
    96 points". The reading is named, exit 2, nothing written."""
    from pipelines.cli import main

    stray = utilization.tail(1).assign(ts=pd.Timestamp("2126-01-20 10:00"))
    with warehouse.open_warehouse(db_path) as con:
        _load(con, pd.concat([utilization, stray]))
    assert main(["train", "--db", str(db_path), "--models", "seasonal_naive"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "newest utilization reading" in err and "(2126-01-20 10:00 UTC)" in err
    with warehouse.open_warehouse(db_path) as con:
        assert con.execute("SELECT count(*) FROM models").fetchone()[0] == 0


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
    assert re.search(r"^  \S+ +seasonal_naive +\d\.\d{3}", out, re.M) and "written: models 3, forecasts 48" in out
    with warehouse.open_warehouse(db_path) as con:
        assert con.execute("SELECT count(*) FROM forecasts").fetchone()[0] == 8 * 6
    # --json: the same run's summary as one document, nothing else on stdout
    assert main(["train", "--db", str(db_path), "--models", "seasonal_naive", "--windows", "1",
                 "--horizon", "6", "--lookback-days", "7", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["rows"]["forecasts"] == 48 and {g["champion"] for g in doc["groups"].values()} == {"seasonal_naive"}


@pytest.mark.slow
def test_train_flow_on_dask_matches_threads(prefect_harness, tmp_path, utilization: pd.DataFrame) -> None:
    """HEADROOM_TASK_RUNNER=dask fans the backtests and fits out over a local Dask cluster
    and leaves the same champions, forecasts and run id as the thread pool."""
    pytest.importorskip("prefect_dask")
    from pipelines.flows.train import task_runner_for, train_flow
    from pipelines.runtime.settings import Settings

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
    assert selection.champions_from(results) == {"cpu": "ets", "gpu": "seasonal_naive"}


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


def test_train_cli_refuses_settings_that_cannot_mean_anything(tmp_path, capsys) -> None:
    from pipelines.cli import main

    db = tmp_path / "none.duckdb"
    for argv, said in ((["--models", ","], "--models: no model named in ','"),
                       (["--lookback-days", "1000000"], "--lookback-days must be between 1 and 36500"),
                       (["--lookback-days", "-1"], "--lookback-days must be between 1 and 36500")):
        assert main(["train", "--db", str(db), *argv]) == 2
        assert said in capsys.readouterr().err
