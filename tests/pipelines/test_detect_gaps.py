"""A monitoring outage is no evidence: the burst detector reads nothing in hours no node
reported, where a line interpolated across a day looked like bursts against the daily cycle."""
from __future__ import annotations

from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

from anomaly.cusum import CusumPolicy
from pipelines.detect import jobs
from pipelines.store import detection, warehouse
from pipelines.synth.fleet import generate_fleet


def test_no_burst_is_raised_inside_a_day_no_node_reported(db_path: Path) -> None:
    util = generate_fleet(nodes=4, days=30, seed=2, telemetry=False)["utilization"]
    gap = pd.Timestamp("2026-01-30")
    before, after = util[util["ts"] < gap], util[util["ts"] >= gap + pd.Timedelta(days=1)]
    policy = CusumPolicy()
    for part in (before, after):  # the day after the outage arrives with the next delivery
        with warehouse.open_warehouse(db_path) as con:
            con.register("_u", part)
            con.execute("INSERT INTO utilization SELECT ts, cluster, pool, node_id, resource, used, capacity FROM _u")
            con.unregister("_u")
        until = part["ts"].max().to_pydatetime()
        jobs.detect_bursts(str(db_path), until, [], policy, until=until)
    with warehouse.open_warehouse(db_path) as con:
        series = detection.demand_series(con)
        bursts = con.execute("SELECT entity, window_start, window_end FROM alerts WHERE kind = 'burst'").df()
    silent = series[(series["ds"] >= gap) & (series["ds"] < gap + pd.Timedelta(days=1))]
    assert len(silent) == 24 * series["unique_id"].nunique() and silent["y"].isna().all()
    assert np.isfinite(series.loc[series["ds"] < gap, "y"]).all()
    inside = bursts[(bursts["window_start"] >= gap) & (bursts["window_start"] < gap + pd.Timedelta(days=1))]
    assert inside.empty, inside  # before this fix: 8 alerts there, 6 of them critical
    assert not bursts.empty  # the detector still runs: the fleet's real bursts are raised


def test_a_daily_run_retrains_the_fault_model_it_made_a_day_before(db_path: Path) -> None:
    """With ``run`` once a day, the clock (the data's end) moves exactly a day: yesterday's
    model is a day old and must be retrained, not reused every other day."""
    from datetime import datetime, timedelta

    from anomaly.fault_features import FaultPolicy
    from pipelines.detect import steps

    made = datetime(2026, 2, 1, 23, 55)
    params = detection.policy_params(FaultPolicy())
    with warehouse.open_warehouse(db_path) as con:
        detection.save_model(con, detection.FAULT_MODEL, "device_telemetry", params, made, b"x", "{}", made)
        job = lambda now: steps._model_job(con, detection.FAULT_MODEL, "device_telemetry", params, now, "1D",  # noqa: E731
                                           lambda: (lambda: (None, None)))
        assert job(made + timedelta(hours=23, minutes=55)) is None  # younger than a day: reused
        assert job(made + timedelta(days=1)) is not None  # a day old: retrained


def test_a_young_series_with_an_outage_waits_to_calibrate_without_stopping_the_others() -> None:
    """Hours no node reported are NaN: a series whose readings are too few for a first
    calibration waits for a later run, and the other series are calibrated meanwhile."""
    from forecasters.demand import blank_filled, regularize
    from pipelines.detect.steps import run_bursts

    ds = pd.date_range("2026-01-01", periods=80, freq="h")
    y = 10 + 3 * np.sin(np.arange(80) * 2 * np.pi / 24) + np.random.default_rng(0).normal(0, 0.3, 80)
    young = pd.DataFrame({"unique_id": "c/p/gpu", "ds": ds, "y": y})
    young = young[~young["ds"].between(ds[20], ds[43])]  # a day's outage in its first days
    old_ds = pd.date_range("2025-12-01", periods=24 * 40, freq="h")
    old = pd.DataFrame({"unique_id": "c/q/gpu", "ds": old_ds,
                        "y": 10 + 3 * np.sin(np.arange(len(old_ds)) * 2 * np.pi / 24)})
    series = blank_filled(regularize(pd.concat([young, old], ignore_index=True)))
    assert series["y"].isna().sum() == 24
    result = run_bursts(series, {}, CusumPolicy())
    assert set(result.states) == {"c/q/gpu"}


def test_a_replay_counts_only_the_alerts_firing_by_its_clock(db_path: Path) -> None:
    """detect --as-of an earlier time said "firing 8", counting alerts that start after it."""
    from datetime import datetime

    with warehouse.open_warehouse(db_path) as con:
        for i, start in enumerate((datetime(2026, 1, 10), datetime(2026, 1, 14))):
            con.execute("INSERT INTO alerts (fingerprint, kind, entity, severity, status, starts_at, updated_at) "
                        "VALUES (?, 'burst', 'c/p/gpu', 'warning', 'firing', ?, ?)", [f"f{i}", start, start])
        assert detection.alert_counts(con, [])["firing"] == 2
        assert detection.alert_counts(con, [], datetime(2026, 1, 12))["firing"] == 1


def test_bursts_in_old_data_read_live_are_history_not_pages(tmp_path: Path) -> None:
    """Last month's export read by a live detect (the wall clock a month past its end): the
    bursts in its last day came and went long ago. They are recorded (the report draws them)
    but no sink hears them fire and resolve; read as of the data's end they are news."""
    util = generate_fleet(nodes=6, days=20, seed=0, telemetry=False)["utilization"]
    end = util["ts"].max().to_pydatetime()
    found = {}
    for name, now in (("live", end + pd.Timedelta(days=30)), ("as_of_end", end)):
        db = tmp_path / f"{name}.duckdb"
        with warehouse.open_warehouse(db) as con:
            con.register("_u", util)
            con.execute("INSERT INTO utilization SELECT ts, cluster, pool, node_id, resource, used, capacity FROM _u")
            con.unregister("_u")
        counts = jobs.detect_bursts(str(db), now, ["jsonl:a.jsonl"], CusumPolicy(), until=now)
        with warehouse.open_warehouse(db, read_only=True) as con:
            found[name] = (counts, *con.execute("SELECT count(*) FILTER (WHERE status = 'resolved'), "
                                                "(SELECT count(*) FROM alert_deliveries) FROM alerts").fetchone())
    counts, resolved, sent = found["live"]
    assert counts["events"] > 0 and counts["history"] == counts["events"] == resolved
    assert (counts["fired"], counts["resolved"], sent) == (0, 0, 0)
    counts, resolved, sent = found["as_of_end"]
    assert counts["fired"] == counts["events"] > 0 and "history" not in counts and sent > 0


def test_a_reading_dated_a_century_ahead_skips_its_detector_and_stops_as_of_data(prefect_harness, db_path: Path,
                                                                                 capsys) -> None:
    """One telemetry row typed as 2126: it was the data's end, so every real device read as
    silent (a critical alert resolved) and a model was registered as of 2126."""
    from pipelines.cli import main
    from pipelines.flows.detect import detect_flow
    from tests.pipelines.test_detect_flow import load

    fleet = generate_fleet(nodes=4, days=10, seed=3)
    with warehouse.open_warehouse(db_path) as con:
        load(con, fleet)
        end = con.execute("SELECT max(ts) FROM device_telemetry").fetchone()[0]
        con.execute("INSERT INTO device_telemetry SELECT TIMESTAMP '2126-01-14 13:00', device_id, node_id, metric, "
                    "value FROM device_telemetry LIMIT 1")
    assert set(jobs.stray_readings(str(db_path), ["bursts", "faults", "spikes"])) == {"faults"}
    assert main(["detect", "--db", str(db_path), "--as-of", "data", "--detectors", "bursts"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "newest device_telemetry reading (2126-01-14 13:00 UTC)" in err, err
    out = detect_flow(str(db_path), detectors=["faults"])
    assert "mistyped date" in out["faults"]["skipped"]
    with warehouse.open_warehouse(db_path, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM models").fetchone()[0] == 0
    with warehouse.open_warehouse(db_path, read_only=True) as con:  # run's clock: not 2126 (every detector ran there)
        assert detection.data_end(con) == max(end, con.execute("SELECT max(ts) FROM spot_prices").fetchone()[0])
    # a replay before it does not read it: the detector runs
    assert jobs.stray_readings(str(db_path), ["faults"], until=end) == {}


def test_live_readings_a_year_past_the_clock_skip_their_detector(db_path: Path) -> None:
    """A node whose clock is a year ahead reports every 5 minutes: no lone stray, but live its
    readings stand a year past this machine's clock."""
    fleet = generate_fleet(nodes=4, days=10, seed=3)
    util = fleet["utilization"]
    ahead = util[util["node_id"] == util["node_id"].iloc[0]].assign(ts=lambda f: f["ts"] + pd.Timedelta(days=365))
    with warehouse.open_warehouse(db_path) as con:
        con.register("_u", pd.concat([util, ahead]))
        con.execute("INSERT INTO utilization SELECT ts, cluster, pool, node_id, resource, used, capacity FROM _u")
        con.unregister("_u")
    wall = (util["ts"].max() + pd.Timedelta(hours=1)).to_pydatetime()
    found = jobs.stray_readings(str(db_path), ["bursts"], wall=wall)
    assert "days after this machine's clock" in found["bursts"]
    assert jobs.stray_readings(str(db_path), ["bursts"]) == {}  # (no lone stray: a replay's clock reads on)
    with warehouse.open_warehouse(db_path, read_only=True) as con:  # run's clock: not a year ahead
        assert detection.data_end(con) < util["ts"].max() + pd.Timedelta(days=2)


def test_a_feed_back_from_a_three_day_outage_is_no_mistyped_date(db_path: Path) -> None:
    """Its first hour alone stood 3 days after the rest: bursts were skipped as "a mistyped
    date?" (and train refused) until a second hour came in. Its nodes came back together: a
    row typed a few days ahead comes alone."""
    util = generate_fleet(nodes=4, days=10, seed=3, telemetry=False)["utilization"]
    end = util["ts"].max()
    back = util[util["ts"] == end].assign(ts=end + pd.Timedelta(days=3))
    with warehouse.open_warehouse(db_path) as con:
        con.register("_u", pd.concat([util[util["ts"] < end], back]))
        con.execute("INSERT INTO utilization SELECT ts, cluster, pool, node_id, resource, used, capacity FROM _u")
        con.unregister("_u")
        assert detection.stray_reading(con, "bursts") is None and detection.data_end(con) == end + pd.Timedelta(days=3)
        # one row typed 3 days ahead (a mistyped day) is a stray: few rows hold its time
        con.execute("DELETE FROM utilization WHERE ts > ?", [end])
        con.execute("INSERT INTO utilization SELECT ts + INTERVAL 3 DAY, cluster, pool, node_id, resource, used, "
                    "capacity FROM utilization WHERE ts = (SELECT max(ts) FROM utilization) LIMIT 1")
        assert "stands 3 days after" in detection.stray_reading(con, "bursts")


def test_a_silent_burst_is_warned_of_once_when_its_alert_resolves(db_path: Path, monkeypatch, caplog) -> None:
    """A burst whose series has said nothing for 6 hours resolves with a warning; the runs after
    it, with nothing left to resolve, say nothing of it (serve runs detect every 15 minutes)."""
    from pipelines.detect import steps

    silent = steps.BurstResult({}, [], [], 0, silent=("c/p/gpu",))
    monkeypatch.setattr(steps, "run_bursts", lambda *a, **k: silent)
    with warehouse.open_warehouse(db_path) as con:
        con.execute("INSERT INTO alerts (fingerprint, kind, entity, severity, status, starts_at, updated_at) "
                    "VALUES ('f0', 'burst', 'c/p/gpu', 'warning', 'firing', '2026-01-10', '2026-01-10')")
    now = datetime(2026, 1, 12)
    said = []
    for _ in range(2):
        caplog.clear()
        counts = jobs.detect_bursts(str(db_path), now, [], CusumPolicy())
        said.append((counts["resolved"], sum("no data for over 6h (c/p/gpu" in r.getMessage() for r in caplog.records)))
    assert said == [(1, 1), (0, 0)]
