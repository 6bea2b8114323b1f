"""The heatmap of a fleet larger than its rows can show: which nodes it draws."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from pipelines.report import plots as report_plots

START = pd.Timestamp("2026-02-02")


def fleet_grid(pools: dict[str, int]) -> tuple[pd.DataFrame, np.ndarray]:
    """Nodes of each pool, node i of a pool busy at i / size (its last node has no reading)."""
    nodes = pd.DataFrame([("c", p, f"{p}-{i:04d}") for p, size in pools.items() for i in range(size)],
                         columns=["cluster", "pool", "node_id"])
    util = np.concatenate([np.arange(size) / size for size in pools.values()])
    matrix = np.repeat(util[:, None], 24, axis=1)
    ends = np.cumsum(list(pools.values())) - 1
    matrix[ends] = np.nan
    return nodes, matrix


def test_a_fleet_past_the_rows_draws_its_faults_and_every_pools_spread() -> None:
    """At 600 nodes the rows were 4 pixels tall, and past 2,400 rows merge: a node running
    hot could vanish. Past the limit, the faulty nodes and each pool's busiest and idlest."""
    nodes, matrix = fleet_grid({"a": 500, "b": 95, "tiny": 5})
    rows = report_plots.heatmap_rows(nodes, matrix, must=(3, 250), limit=60)
    assert len(rows) == 60 and list(rows) == sorted(set(rows)) and {3, 250} <= set(rows)
    pool = nodes["pool"].to_numpy()[rows]
    # 58 rows left, shared by size (498, 95, 5 nodes): 48, 9, and the tiny pool its one
    assert (pool == "a").sum() == 2 + 48 and (pool == "b").sum() == 9 and (pool == "tiny").sum() == 1
    # of pool a (rows 0-499): its busiest (498), and its idlest (499: no reading; 0)
    assert {498, 497, 499, 0, 1} <= set(rows) and 250 in rows
    # of b (500-594): the busiest 593 and the node without readings, 594
    assert {593, 594} <= set(rows)
    small, _ = fleet_grid({"a": 40})
    assert list(report_plots.heatmap_rows(small, np.zeros((40, 24)), (), limit=60)) == list(range(40))


def test_the_section_says_how_many_of_the_nodes_it_draws() -> None:
    from pipelines.report.data import ReportData
    from pipelines.report.html import heatmap_section

    hours = pd.date_range(START, periods=24, freq="h")
    ids = [f"n{i:03d}" for i in range(report_plots.HEATMAP_MAX_ROWS + 20)]
    heat = pd.DataFrame([("c", "p", n, h, i / len(ids)) for i, n in enumerate(ids) for h in hours],
                        columns=["cluster", "pool", "node_id", "hour", "util"])
    empty = pd.DataFrame()
    data = ReportData(data_cutoff=START, counts={}, forecasts=empty, history=empty, heatmap=heat,
                      heatmap_resource="gpu", alerts=empty, champions=empty, plan_run=None, recommendations={})
    page = heatmap_section(data)
    assert f"{len(ids)} nodes ({report_plots.HEATMAP_MAX_ROWS} drawn: those with a predicted fault" in page
    plt.close("all")
