"""The detect flow's spike step: stale feeds, the cached spike model and its retraining."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from pipelines.flows.detect import detect_flow
from pipelines.store import warehouse
from pipelines.synth.fleet import generate_fleet
from tests.pipelines.test_detect_flow import TABLES, load


@pytest.fixture(scope="module")
def fleet() -> dict[str, pd.DataFrame]:
    return generate_fleet(nodes=4, days=10, seed=3)


def test_spot_prices_that_hold_for_hours_are_not_a_stale_feed(prefect_harness, db_path: Path, tmp_path: Path,
                                                             fleet):
    """Spot prices are change events: 13 quiet hours are prices holding. Markets are rated as
    of now, their last prices carried forward, and their alerts still fire."""
    quiet = dict(fleet)
    end = fleet["utilization"]["ts"].max()
    quiet["spot_prices"] = fleet["spot_prices"][fleet["spot_prices"]["ts"] <= end - pd.Timedelta(hours=13)]
    with warehouse.open_warehouse(db_path) as con:
        load(con, quiet)
    out = detect_flow(str(db_path), now=end.to_pydatetime(), detectors=["spikes"],
                      jsonl_path=str(tmp_path / "a.jsonl"))
    assert out["spikes"]["fired"] > 0
    with warehouse.open_warehouse(db_path) as con:
        starts = con.execute("SELECT min(window_start) FROM alerts WHERE kind = 'price_spike'").fetchone()[0]
    assert pd.Timestamp(starts) > end - pd.Timedelta(hours=13)  # rated as of now, not of the last change


def _count_spike_fits(monkeypatch) -> list[int]:
    from anomaly.spikes import SpikePredictor

    calls = [0]
    fit = SpikePredictor.fit

    def counted(self, frame):
        calls[0] += 1
        return fit(self, frame)

    monkeypatch.setattr(SpikePredictor, "fit", counted)
    return calls


def test_spike_model_is_reused_between_runs_and_retrained_on_schedule(prefect_harness, db_path: Path,
                                                                      monkeypatch, fleet):
    from pipelines.commands.summaries import detect_lines

    fits = _count_spike_fits(monkeypatch)
    monkeypatch.setenv("HEADROOM_SPIKE_RETRAIN_EVERY", "2D")
    cut = fleet["spot_prices"]["ts"].min() + pd.Timedelta(days=6)
    with warehouse.open_warehouse(db_path) as con:
        load(con, fleet)
    t0 = cut.to_pydatetime()
    first = detect_flow(str(db_path), now=t0, detectors=["spikes"])
    assert first["spikes"]["trained"] == 1 and fits[0] == 1
    assert first["spikes"]["model"]["model"] == "retrained"
    assert "spike model: retrained (no model yet)" in "\n".join(detect_lines(first))
    model_id = first["spikes"]["model"]["model_id"]

    again = detect_flow(str(db_path), now=t0 + pd.Timedelta(hours=1), detectors=["spikes"])
    assert again["spikes"]["trained"] == 0 and fits[0] == 1  # no fit: the cached model scores
    assert again["spikes"]["model"]["model_id"] == model_id
    assert f"spike model: reused (trained {pd.Timestamp(t0):%Y-%m-%d %H:%M})" in "\n".join(detect_lines(again))
    with warehouse.open_warehouse(db_path) as con:
        assert con.execute("SELECT count(*) FROM models WHERE kind = 'spike_predictor'").fetchone()[0] == 1

    later = detect_flow(str(db_path), now=t0 + pd.Timedelta(days=2, hours=1), detectors=["spikes"])
    assert later["spikes"]["trained"] == 1 and fits[0] == 2  # 2 days old: the setting's age
    assert later["spikes"]["model"]["model_id"] != model_id
    assert later["spikes"]["model"]["why"] == "the model is 49h old; retrain age 2d"


def test_spike_model_is_retrained_when_the_prices_run_past_its_data(db_path: Path, monkeypatch, fleet):
    """Prices loaded late (a backfill): the model learnt from data a week behind the prices now
    held, though it is only an hour old."""
    from anomaly.spike_features import SpikePolicy
    from pipelines.detect import jobs

    fits = _count_spike_fits(monkeypatch)
    start = fleet["spot_prices"]["ts"].min()
    with warehouse.open_warehouse(db_path) as con:
        load(con, fleet, start + pd.Timedelta(days=4))
    policy = SpikePolicy(horizon="6h")
    now = (start + pd.Timedelta(days=9)).to_pydatetime()
    first = jobs.train_spike_model(str(db_path), now, policy, "3D")
    assert (first["trained"], first["model"], fits[0]) == (True, "retrained", 1)
    assert jobs.train_spike_model(str(db_path), now + pd.Timedelta(hours=1), policy, "3D")["model"] == "reused"
    with warehouse.open_warehouse(db_path) as con:
        con.execute("DELETE FROM spot_prices")
        load(con, {**{k: fleet[k].iloc[0:0] for k in TABLES if k != "spot_prices"},
                   "spot_prices": fleet["spot_prices"][fleet["spot_prices"]["ts"] < now]})
    out = jobs.train_spike_model(str(db_path), now + pd.Timedelta(hours=2), policy, "3D")
    assert (out["trained"], out["model"], fits[0]) == (True, "retrained", 2)
    # another horizon is another model: the reason says one exists under other settings
    other = jobs.train_spike_model(str(db_path), now + pd.Timedelta(hours=3), SpikePolicy(horizon="3h"), "3D")
    assert other["why"] == "no model for these settings yet (the registered ones were trained under others)"
    assert "past the model's data" in out["why"]


def test_a_live_model_stands_past_its_age_until_an_input_comes_in(db_path: Path, monkeypatch, fleet):
    """Live (no replay clock), a retrain with no file loaded since would learn the same rows: the
    model stands (it was retrained, stamped with the retrain's time, and a replay as of its
    first training then retrained for "no model yet"). A file coming in makes the age count."""
    from anomaly.fault_features import FaultPolicy
    from anomaly.spike_features import SpikePolicy
    from pipelines.detect import jobs

    fits = _count_spike_fits(monkeypatch)
    with warehouse.open_warehouse(db_path) as con:
        load(con, fleet)
    now, policy, day = fleet["spot_prices"]["ts"].max().to_pydatetime(), SpikePolicy(horizon="6h"), pd.Timedelta(days=1)
    first = jobs.train_spike_model(str(db_path), now, policy, "1D")
    assert first["model"] == "retrained" and jobs.train_fault_model(str(db_path), now, FaultPolicy(), "1D")
    later = jobs.train_spike_model(str(db_path), now + 3 * day, policy, "1D")
    assert (later["model"], later["trained_at"], fits[0]) == ("reused", first["trained_at"], 1)
    assert not jobs.train_fault_model(str(db_path), now + 3 * day, FaultPolicy(), "1D")

    with warehouse.open_warehouse(db_path) as con:  # a file of prices and one of telemetry come in
        for kind in ("spot-prices", "telemetry"):
            con.execute("INSERT INTO ingest_batches (batch_id, kind, source_format, path, sha256, rows_read, "
                        "rows_loaded, rows_rejected, status, started_at, finished_at) VALUES (?, ?, 'csv', 'f.csv', "
                        "'x', 1, 1, 0, 'loaded', now()::TIMESTAMP, now()::TIMESTAMP)", [kind, kind])
    again = jobs.train_spike_model(str(db_path), now + 3 * day, policy, "1D")
    assert (again["model"], again["why"], fits[0]) == ("retrained", "the model is 3d old; retrain age 1d", 2)
    assert again["model_id"] == first["model_id"] and again["trained_at"] > first["trained_at"]
    assert jobs.train_fault_model(str(db_path), now + 3 * day, FaultPolicy(), "1D")


def test_a_warehouse_without_spot_prices_is_told_what_the_spike_model_lacks(prefect_harness, db_path: Path,
                                                                          fleet):
    from pipelines.commands.summaries import detect_lines

    no_prices = {**fleet, "spot_prices": fleet["spot_prices"].iloc[:0]}
    with warehouse.open_warehouse(db_path) as con:
        load(con, no_prices)
    end = fleet["utilization"]["ts"].max().to_pydatetime()
    out = detect_flow(str(db_path), now=end, detectors=["spikes"])
    assert out["spikes"]["model"]["model"] == "none"
    assert ("spike model: none yet (no spike model yet: it learns from spot-price history with both spikes and "
            "calm hours in it (the warehouse holds 0 spot-price row(s) in 0 market(s)))") in "\n".join(detect_lines(out))


def test_prices_short_of_one_grid_step_are_nothing_to_learn_not_a_crash():
    """A spot feed's first half-hour (one change at 16:54, the grid hourly) crashed detect with
    a traceback, so no sink heard the other detectors' alerts; it is a feed with nothing to
    learn yet, no market to rate, and no market in the plan's window."""
    from anomaly.spike_features import SpikePolicy
    from pipelines.detect.steps import score_spikes, train_spikes
    from planner.spot import market_stats

    one = pd.DataFrame({"ts": [pd.Timestamp("2026-01-07 16:54")], "provider": "aws", "region": "us-east-1",
                        "zone": "us-east-1a", "instance_type": "c3.xlarge", "product": "Linux", "price": 0.03})
    assert train_spikes(one, pd.DataFrame(), SpikePolicy()) == (None, None)
    assert score_spikes(object(), one, pd.DataFrame(), SpikePolicy()) == []  # type: ignore[arg-type]
    assert market_stats(one, "7D", end=pd.Timestamp("2026-01-07 16:54")).empty
