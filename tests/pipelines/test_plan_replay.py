"""``headroom plan replay``: no lookahead, one demand for every strategy, one-line errors."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipelines.cli import main
from pipelines.plan import replay as plan_replay
from planner.prescale import PrescalePolicy

STEP = pd.Timedelta("5min")


def tide(days: float, seed: int = 0, start: str = "2026-01-01") -> pd.Series:
    """5-minute cluster demand with a daily tide and noise, named as a replayed series."""
    ts = pd.date_range(start, periods=int(days * 288), freq=STEP)
    hours = (ts - ts[0]) / pd.Timedelta("1h")
    rng = np.random.default_rng(seed)
    y = 100 + 60 * np.sin(2 * np.pi * hours / 24) + rng.normal(0, 6, len(ts))
    return pd.Series(np.clip(y, 1, None), index=ts, name="c1/train/cpu")


def utilization_csv(path: Path, series: pd.Series, pool: str = "train", capacity: float = 400.0) -> Path:
    frame = pd.DataFrame({"ts": series.index.strftime("%Y-%m-%dT%H:%M:%SZ"), "cluster": "c1", "pool": pool,
                          "node_id": "n1", "resource": "cpu", "used": series.to_numpy().round(3),
                          "capacity": capacity})
    frame.to_csv(path, index=False)
    return path


def test_the_decision_at_a_cutoff_never_reads_data_at_or_after_it() -> None:
    """Everything from the cutoff on is changed (tripled, and a spike); every strategy's capacity
    up to and including the cutoff must stay where it was."""
    base = tide(9)
    start = base.index[0] + pd.Timedelta(days=7)
    cutoff = start + pd.Timedelta(hours=27, minutes=35)  # mid-hour, mid-day: no boundary hides a leak
    changed = base.copy()
    changed[changed.index >= cutoff] *= 3.0
    changed[changed.index >= cutoff + pd.Timedelta("2h")] += 500.0
    policy = PrescalePolicy()
    end = base.index[-1] + STEP
    a = plan_replay.replay(base, start, end, 8.0, policy, models=("seasonal_naive", "lgbm"))
    b = plan_replay.replay(changed, start, end, 8.0, policy, models=("seasonal_naive", "lgbm"))
    at = int(a.ts.searchsorted(cutoff))
    assert a.ts[at] == cutoff
    for name in a.capacities:
        if name == "oracle":  # the oracle is the demand itself: it is meant to see it
            continue
        np.testing.assert_array_equal(a.capacities[name][: at + 1], b.capacities[name][: at + 1], err_msg=name)
    # ... and the change is seen once it is known (the test would pass on a replay that ignores data)
    assert a.capacities["planned"][at + 12] < b.capacities["planned"][at + 12]
    days = [d for d in a.champions if pd.Timestamp(d) <= cutoff.floor("D")]
    assert [a.champions[d] for d in days] == [b.champions[d] for d in days]


def test_every_strategy_is_scored_on_the_same_demand(tmp_path: Path) -> None:
    series = tide(8, seed=3)
    start = series.index[0] + pd.Timedelta(days=7)
    r = plan_replay.replay(series, start, series.index[-1] + STEP, 8.0, PrescalePolicy(),
                           models=("seasonal_naive",))
    t = r.table.set_index("strategy")
    assert {"oracle", "static_peak", "reactive_80", "reactive_70", "reactive_60", "reactive_50",
            "reactive_80_30m", "planned"} <= set(t.index)
    served = {k: np.minimum(c, r.demand).sum() for k, c in r.capacities.items()}
    hours = STEP / pd.Timedelta("1h")
    for name, cap in r.capacities.items():
        assert len(cap) == len(r.demand) == 288
        # capacity = what served the demand + idle: the same demand underlies every row
        short = np.clip(r.demand - cap, 0, None).sum() * hours
        assert t.loc[name, "unit_hours_short"] == pytest.approx(short)
        assert (served[name] + short / hours) == pytest.approx(r.demand.sum())
    assert t.loc["oracle", "cost_vs_oracle"] == pytest.approx(1.0)
    assert t.loc["oracle", "underprovisioned_pct"] == 0


def test_replay_from_the_cli_writes_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = utilization_csv(tmp_path / "u.csv", tide(9, seed=1))
    out = tmp_path / "replay.csv"
    code = main(["plan", "replay", "--utilization", str(src), "--start", "2026-01-08", "--instance-units", "8",
                 "--models", "seasonal_naive", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    table = pd.read_csv(out)
    assert list(table.columns[:8]) == ["strategy", "cost", "cost_vs_oracle", "avg_utilization",
                                       "underprovisioned_pct", "unit_hours_short", "idle_unit_hours",
                                       "scale_actions"]
    assert "planned" in set(table["strategy"])
    assert "reactive frontier" in capsys.readouterr().out


def _one_line_error(capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    return err


@pytest.mark.parametrize(("case", "args", "needle"), [
    ("unknown pool", ["--pool", "nosuch"], "has no data"),
    ("pool without that resource", ["--resource", "gpu"], "no gpu data"),
    ("start after end", ["--start", "2026-01-08", "--end", "2026-01-07"], "is not before"),
    ("instance size 0", ["--instance-units", "0"], "must be a number > 0 and at most 1e9"),
    ("instance size inf", ["--instance-units", "inf"], "must be a number > 0 and at most 1e9, got inf"),
    ("price inf", ["--unit-price", "inf"], "--unit-price must be a number > 0 and at most 1e6"),
    ("price 1e308", ["--unit-price", "1e308"], "at most 1e6 (per unit-hour), got 1e+308"),  # every cost inf
    ("unknown model", ["--models", "nope"], "--models: unknown model(s) nope; choose from"),
    ("no model", ["--models", ","], "--models: no model named in ','; choose from"),
    ("span outside the data", ["--start", "2027-01-01"], "is not before"),
    ("span under a step", ["--start", "2026-01-02T00:00", "--end", "2026-01-02T00:03"], "shorter than one step"),
    ("end before the data", ["--end", "2025-01-01"], "--end 2025-01-01 00:00:00 leaves nothing to replay"),
    ("lead without a unit", ["--lead", "5"], "--lead: '5' has no unit"),
    ("lead 0", ["--lead", "0s"], "--lead: '0s' is not a positive duration"),
    ("lead past the forecasts", ["--lead", "100000D"], "--lead: '100000D' is longer than 1 day"),
])
def test_bad_replay_input_is_one_line_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str,
                                                 args: list[str], needle: str) -> None:
    src = utilization_csv(tmp_path / "u.csv", tide(3))
    code = main(["plan", "replay", "--utilization", str(src), *(["--models", "seasonal_naive"] * ("--models" not in args)),
                 *args])
    assert code == 2, case
    _one_line_error(capsys, needle)


def test_a_gap_longer_than_a_day_is_one_line_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = tide(6)
    s = s[(s.index < "2026-01-03") | (s.index >= "2026-01-04 06:00")]
    src = utilization_csv(tmp_path / "u.csv", s)
    assert main(["plan", "replay", "--utilization", str(src), "--models", "seasonal_naive"]) == 2
    _one_line_error(capsys, "2026-01-03", "longer than one day")
    # a span after the gap replays: what came before the gap is not read (the error's advice works)
    assert main(["plan", "replay", "--utilization", str(src), "--models", "seasonal_naive", "--start",
                 "2026-01-05 12:00", "--instance-units", "8"]) == 0, capsys.readouterr().err
    assert "reactive frontier" in capsys.readouterr().out
    # a start less than a day after the gap leaves the first decisions no history: an error saying where
    # to start, not a replay without forecasts
    assert main(["plan", "replay", "--utilization", str(src), "--models", "seasonal_naive", "--start",
                 "2026-01-04 07:00", "--instance-units", "8"]) == 2
    _one_line_error(capsys, "less than a day after it before --start", "start at 2026-01-05 06:00:00 or later")


def test_a_pool_with_too_few_readings_is_one_line_with_exit_2(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    src = utilization_csv(tmp_path / "u.csv", tide(3).iloc[:2])
    assert main(["plan", "replay", "--utilization", str(src)]) == 2
    _one_line_error(capsys, "too few to replay")
    # under a day: no option to blame, the data are too short
    utilization_csv(tmp_path / "u.csv", tide(0.5))
    assert main(["plan", "replay", "--utilization", str(src), "--models", "seasonal_naive"]) == 2
    _one_line_error(capsys, "is too short to replay", "give more than a day")


def test_several_pools_need_one_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = pd.read_csv(utilization_csv(tmp_path / "a.csv", tide(3), pool="train"))
    b = pd.read_csv(utilization_csv(tmp_path / "b.csv", tide(3), pool="serve")).assign(node_id="n2")
    pd.concat([a, b]).to_csv(tmp_path / "u.csv", index=False)
    assert main(["plan", "replay", "--utilization", str(tmp_path / "u.csv")]) == 2
    _one_line_error(capsys, "choose one with --pool")


def test_a_replay_of_the_warehouse_is_stored_and_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Priced from the catalog's machine of the pool, sized by it, stored once however often it
    is replayed, and drawn in the report."""
    db = tmp_path / "w.duckdb"
    src = utilization_csv(tmp_path / "u.csv", tide(9, seed=2))
    cat = tmp_path / "catalog.csv"
    pd.DataFrame([{"provider": "onprem", "region": "dc", "instance_type": "train-16c", "location": "private",
                   "resource": "cpu", "units": 16, "vcpus": 16, "memory_gb": 64, "on_demand_price": 1.6,
                   "reserved_1y_price": "", "reserved_3y_price": "", "tflops": ""}]).to_csv(cat, index=False)
    assert main(["ingest", "--kind", "utilization", "--db", str(db), str(src)]) == 0
    assert main(["ingest", "--kind", "catalog", "--db", str(db), str(cat)]) == 0
    args = ["plan", "replay", "--db", str(db), "--start", "2026-01-08", "--models", "seasonal_naive"]
    for _ in range(2):
        assert main(args) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "instances of 16 units" in out and "cost_usd" in out
    # another rule over the same span replaces it, and the page says which rule it was
    assert main([*args, "--lead", "10min"]) == 0, capsys.readouterr().err
    assert "lead 10min, 99% quantile" in capsys.readouterr().out
    import duckdb
    with duckdb.connect(str(db), read_only=True) as con:
        n, strategies = con.execute("SELECT count(DISTINCT replay_id), count(*) FROM replays").fetchone()
        steps = con.execute("SELECT count(*) FROM replay_capacity").fetchone()[0]
        # stamped with the last step it scored, not the step after the data's newest reading
        stamp, newest = con.execute("SELECT (SELECT max(created_at) FROM replays), (SELECT max(ts) FROM "
                                    "replay_capacity)").fetchone()
    assert (n, strategies, steps) == (1, 8, 2 * 288)
    assert stamp == newest
    report = tmp_path / "rep"
    assert main(["report", "--db", str(db), "--out", str(report)]) == 0
    page = (report / "report.html").read_text()
    assert "Pre-scaling replayed" in page and 'alt="replay of c1/train/cpu"' in page
    assert "the rule replayed as planned: lead 10min, 99% quantile of misses over 7D" in page
    # and at which price its cost_usd is: the catalog machine's, or the one given
    assert "cost_usd at $0.1" in page
    assert main([*args, "--lead", "10min", "--unit-price", "5"]) == 0, capsys.readouterr().err
    assert "cost_usd at $5 per unit-hour" in capsys.readouterr().out
    assert main(["report", "--db", str(db), "--out", str(report)]) == 0
    assert "cost_usd at $5 per unit-hour" in (report / "report.html").read_text()


@pytest.mark.parametrize("order", [(2, 3), (3, 2)])
def test_the_report_picks_one_replay_of_spans_that_end_together(order: tuple[int, int]) -> None:
    """The run's week and a longer replay by hand end at the data's end: the page showed
    whichever was stored first. Now the longest, whatever the order."""
    from pipelines.store import replays, warehouse

    with warehouse.open_warehouse(":memory:") as con:
        end = pd.Timestamp("2026-01-18")
        for days in order:
            start = end - pd.Timedelta(days=days)
            con.execute("INSERT INTO replays VALUES (?, 'p', ?, ?, 300, 1, 'm', 'planned', '{}', ?, NULL)",
                        [replays.replay_id("p", start, end), start, end, end])
        rows, _ = replays.latest_replays(con)
    assert rows["span_start"].tolist() == [end - pd.Timedelta(days=3)]


def test_replay_reads_the_configured_plan_policy(tmp_path: Path, monkeypatch, capsys) -> None:
    """HEADROOM_PLAN_CONFIG sets replay's rule as it sets plan's and run's: a bad one stops it."""
    src = utilization_csv(tmp_path / "u.csv", tide(3))
    policy = tmp_path / "plan.toml"
    policy.write_text("[prescale]\nlead = '5'\n")
    monkeypatch.setenv("HEADROOM_PLAN_CONFIG", str(policy))
    assert main(["plan", "replay", "--utilization", str(src), "--models", "seasonal_naive"]) == 2
    _one_line_error(capsys, "plan.toml: prescale.lead: '5' has no unit")
    policy.write_text("[prescale]\nshortage_cost = 1.0\n")  # the 50% quantile, as its header says
    assert main(["plan", "replay", "--utilization", str(src), "--models", "seasonal_naive",
                 "--instance-units", "8"]) == 0
    assert "50% quantile" in capsys.readouterr().out


def test_nodes_that_report_apart_or_at_other_rates_add_up(tmp_path: Path) -> None:
    """Replay and the plan's margin sum a pool's nodes per step of its own grid: a node scraped
    150 s after the others, one jittered by up to 40 s, and, in another pool, an hourly node
    beside a per-minute one. Summed per exact reading time, each step held one node."""
    import duckdb

    from pipelines.store import demand

    five = pd.date_range("2026-01-01", periods=3 * 288, freq="5min")
    jitter = pd.to_timedelta(np.random.default_rng(0).integers(-40, 41, len(five)), unit="s")
    minute = pd.date_range("2026-01-01", periods=3 * 1440, freq="1min")
    hour = pd.date_range("2026-01-01 00:07", periods=3 * 24, freq="1h")
    parts = [("train", "n1", five, 1.0), ("train", "n2", five + pd.Timedelta("150s"), 10.0),
             ("train", "n3", five + jitter, 100.0), ("mixed", "m1", minute, 2.0), ("mixed", "m2", hour, 20.0)]
    frame = pd.concat([pd.DataFrame({"ts": ts.strftime("%Y-%m-%dT%H:%M:%SZ"), "cluster": "c1", "pool": pool,
                                     "node_id": node, "resource": "cpu", "used": used, "capacity": 400.0})
                       for pool, node, ts, used in parts])
    frame.to_csv(tmp_path / "u.csv", index=False)
    db = tmp_path / "w.duckdb"
    assert main(["ingest", "--kind", "utilization", "--db", str(db), str(tmp_path / "u.csv")]) == 0
    with duckdb.connect(str(db), read_only=True) as con:
        train = demand.series_at_resolution(con, "c1/train/cpu")
        mixed = demand.series_at_resolution(con, "c1/mixed/cpu")
        recent = demand.recent_at_resolution(con, pd.Timedelta("1D"))
        replayed, _ = plan_replay.pick_series(con, "c1/mixed", "cpu")
    # its last step, which only the per-minute node's last readings reached, ends the data: it
    # was read as a gap after the data's end ("1 step(s) without readings ... to 03:00")
    assert np.isfinite(replayed.iloc[-1]) and replayed.index[-1] < hour[-1]
    inner = train.iloc[1:-1]  # the first and last steps: a node's reading rounded beyond the others'
    assert (inner["ts"].diff().dropna() == STEP).all() and (inner["nodes"] == 3).all()
    np.testing.assert_allclose(inner["y"], 111.0)
    inner = mixed.iloc[1:-1]
    assert (inner["ts"].diff().dropna() == pd.Timedelta("1h")).all() and (inner["nodes"] == 2).all()
    np.testing.assert_allclose(inner["y"], 22.0)
    last_day = recent[recent["unique_id"] == "c1/train/cpu"].iloc[1:-1]
    np.testing.assert_allclose(last_day["y"], 111.0)


def test_a_pool_the_run_cannot_replay_is_named_with_its_reason(tmp_path: Path) -> None:
    """The run's summary said every such pool was 'too short', whatever stopped it."""
    from pipelines.commands.summaries import replay_lines
    from pipelines.flows.replay import replay_pool_task
    from planner.plan import PlanPolicy

    db = tmp_path / "w.duckdb"
    assert main(["ingest", "--kind", "utilization", "--db", str(db),
                 str(utilization_csv(tmp_path / "u.csv", tide(0.5)))]) == 0
    out = replay_pool_task.fn(str(db), "c1/train", 7, ("seasonal_naive",), PlanPolicy(), 5.0)
    assert out["pool"] == "c1/train" and "no data before the replay's start" in out["skipped"]
    lines = replay_lines({"replays": [], "skipped": 1, "not_replayed": {out["pool"]: out["skipped"]}})
    assert lines[1].startswith("  c1/train") and f"not replayed: {out['skipped']}" in lines[1]


def test_the_warehouse_is_free_for_writers_while_the_replay_runs(tmp_path: Path, monkeypatch, capsys) -> None:
    """The replay's minutes held the read-only connection: every ingest meanwhile waited out
    its lock timeout and failed."""
    from pipelines.store import warehouse

    db = tmp_path / "w.duckdb"
    assert main(["ingest", "--kind", "utilization", "--db", str(db),
                 str(utilization_csv(tmp_path / "u.csv", tide(3)))]) == 0
    replay, opened = plan_replay.replay, []

    def writing_meanwhile(*args, **kwargs):
        with warehouse.open_warehouse(db, lock_timeout_s=0) as con:  # a writer, as ingest is
            opened.append(con.execute("SELECT count(*) FROM utilization").fetchone()[0])
        return replay(*args, **kwargs)

    monkeypatch.setattr(plan_replay, "replay", writing_meanwhile)
    assert main(["plan", "replay", "--db", str(db), "--models", "seasonal_naive"]) == 0, capsys.readouterr().err
    assert opened == [3 * 288]


def drained_fleet(tmp_path: Path) -> Path:
    """A warehouse of two one-node cpu pools over two days: c1/live, and c1/drain, whose node
    reports capacity 0 for the last 8 hours."""
    ts = pd.date_range("2026-01-01", periods=48, freq="1h")
    rows = [pd.DataFrame({"ts": ts.strftime("%Y-%m-%dT%H:%M:%SZ"), "cluster": "c1", "pool": pool, "node_id": node,
                          "resource": "cpu", "used": 1.0, "capacity": cap}) for pool, node, cap in
            (("live", "n1", 4.0), ("drain", "n2", np.where(np.arange(48) < 40, 4.0, 0.0)))]
    pd.concat(rows).assign(used=lambda f: f["used"].where(f["capacity"] > 0, 0.0)).to_csv(tmp_path / "u.csv",
                                                                                        index=False)
    db = tmp_path / "w.duckdb"
    assert main(["ingest", "--kind", "utilization", "--db", str(db), str(tmp_path / "u.csv")]) == 0
    return db


def test_a_drained_pool_is_not_replayed_by_the_run(tmp_path: Path) -> None:
    """A pool whose nodes report capacity 0 at the data's end is not planned; the run replayed
    it all the same ("planned 3.27x" in the report beside "not planned")."""
    db = drained_fleet(tmp_path)
    from pipelines.store import warehouse

    with warehouse.open_warehouse(db, read_only=True) as con:
        pools = plan_replay.planned_pools(con)
        assert pools == ["c1/drain", "c1/live"] and plan_replay.drained_pools(con, pools) == ["c1/drain"]
