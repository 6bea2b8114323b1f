"""Demand rules on plain frames: node hours summed, silences filled, late nodes carried."""
from __future__ import annotations

import pandas as pd
import pytest

from forecasters import demand


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


def test_most_nodes_silent_together_and_back_is_said_to_look_like_an_outage(caplog) -> None:
    """Three of four nodes silent for 10 hours, then back: the monitoring, more likely than the
    fleet; the hours still count the one node that reported, and the log says so."""
    hours = pd.date_range("2024-01-01", periods=72, freq="h")
    rows = [{"unique_id": "c/p/cpu", "node_id": f"n{k}", "ds": h, "used": 10.0}
            for k in range(4) for i, h in enumerate(hours) if not (k > 0 and 30 <= i < 40)]
    with caplog.at_level("WARNING"):
        out = demand.regularize(demand.sum_nodes(pd.DataFrame(rows))).set_index("ds")["y"]
    assert (out.loc[hours[30]:hours[39]] == 10).all()
    assert "3 of 4 nodes silent together from 2024-01-02 06:00:00 to 2024-01-02 15:00:00" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):  # one node of four off for a while is the fleet, not the monitoring
        demand.regularize(demand.sum_nodes(pd.DataFrame(
            [{"unique_id": "c/p/cpu", "node_id": f"n{k}", "ds": h, "used": 10.0}
             for k in range(4) for i, h in enumerate(hours) if not (k == 2 and 30 <= i < 40)])))
    assert "silent together" not in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):  # every node silent: no reading at all, a gap (it said "a drop")
        demand.regularize(demand.sum_nodes(pd.DataFrame(
            [{"unique_id": "c/p/cpu", "node_id": f"n{k}", "ds": h, "used": 10.0}
             for k in range(2) for i, h in enumerate(hours) if not 30 <= i < 40])))
    assert "2 of 2 nodes silent together" in caplog.text and "no node reported: they are missing" in caplog.text
    assert "a drop in demand" not in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):  # all silent for 10 of 20 hours, one node of four for the rest
        demand.regularize(demand.sum_nodes(pd.DataFrame(
            [{"unique_id": "c/p/cpu", "node_id": f"n{k}", "ds": h, "used": 10.0}
             for k in range(4) for i, h in enumerate(hours) if not (30 <= i < 50 and (k > 0 or 35 <= i < 45))])))
    assert "in 10 of them no node reported (missing, filled as gaps are); the others count only" in caplog.text


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

    with caplog.at_level("INFO", logger="forecasters.demand"):
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


def test_regularize_fills_gaps_and_drops_partial_last_hour() -> None:
    ds = pd.to_datetime(["2024-01-01 00:00", "2024-01-01 01:00", "2024-01-01 03:00", "2024-01-01 04:00"])
    raw = pd.DataFrame({"unique_id": "c/p/gpu", "ds": ds, "y": [1.0, 2.0, 4.0, 1.0], "nodes": [3, 3, 3, 1]})
    out = demand.regularize(raw)
    assert out["y"].tolist() == [1.0, 2.0, 3.0, 4.0]
    # the interpolated hour is listed: a backtest must not score a forecast against it
    assert demand.filled_points(out).tolist() == [("c/p/gpu", pd.Timestamp("2024-01-01 02:00"))]
    assert demand.filled_points(demand.regularize(raw[raw["ds"] < ds[2]])) is None


def test_a_backtest_does_not_score_interpolated_hours() -> None:
    """A day of the backtest window interpolated as a straight line: the forecasts of those
    hours are left out of the scores, and stored without an actual."""
    import numpy as np

    from forecasters import selection

    ds = pd.date_range("2026-01-01", periods=24 * 14, freq="h")
    y = 10 + 5 * np.sin(2 * np.pi * np.arange(len(ds)) / 24)
    raw = pd.DataFrame({"unique_id": "c/p/gpu", "ds": ds, "y": y})
    gappy = demand.regularize(raw[(raw["ds"] < ds[-20]) | (raw["ds"] >= ds[-4])])
    spec = selection.TrainSpec(horizon=24, freq="h", season_length=24, windows=1)
    unscored = demand.filled_points(gappy)
    assert len(unscored) == 16
    metrics, cv, _ = selection.backtest_model(gappy, "seasonal_naive", spec, unscored)
    assert int(cv["y"].isna().sum()) == 16
    # seasonal naive on a pure daily wave is exact on every real hour
    assert metrics["wape"] == pytest.approx(0.0, abs=1e-9)
    assert selection.backtest_model(gappy, "seasonal_naive", spec)[0]["wape"] > 0.05


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


def test_a_series_that_stopped_reporting_is_not_forecast_from_its_past(caplog) -> None:
    ds = pd.date_range("2026-01-01", periods=24 * 10, freq="h")
    frame = pd.concat([pd.DataFrame({"unique_id": "c/live/cpu", "ds": ds, "y": 1.0}),
                       pd.DataFrame({"unique_id": "c/late/cpu", "ds": ds[:-10], "y": 1.0}),
                       pd.DataFrame({"unique_id": "c/gone/cpu", "ds": ds[:-48], "y": 1.0})])
    kept = demand.drop_stale(frame)
    assert sorted(kept["unique_id"].unique()) == ["c/late/cpu", "c/live/cpu"]
    assert "more than 24 h before the data cutoff" in caplog.text and "c/gone/cpu (last 2026-01-08 23:00:00)" in caplog.text
