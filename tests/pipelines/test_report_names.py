"""Names from the inputs as the report's plots draw them: literal text, never TeX, and of a
bounded width whatever their length."""
from __future__ import annotations

import base64
import io

import numpy as np
import pandas as pd
from PIL import Image

from pipelines.report import html as report_html
from pipelines.report import plots as report_plots

START = pd.Timestamp("2026-02-02")


def png_size(fig) -> tuple[int, int]:
    tag = report_html._png(fig, "x")
    data = base64.b64decode(tag.split("base64,", 1)[1].rstrip('">'))
    return Image.open(io.BytesIO(data)).size


def test_a_dollar_or_a_huge_name_is_drawn_as_short_literal_text() -> None:
    # '$\notacmd$' stopped the report with matplotlib's ParseFatalException; a 10,000-character
    # node id made the heatmap 140,941 pixels wide
    hours = pd.date_range(START, periods=48, freq="h")
    long_id = "N" * 10_000
    heat = pd.DataFrame([(c, p, n, h, 0.5) for c, p, n in (("cost$\\notacmd$", "p", long_id),
                                                           ("c", "pool$5 and $10", "n\x1b[31m\u202egpj.exe"))
                         for h in hours], columns=["cluster", "pool", "node_id", "hour", "util"])
    nodes, grid_hours, matrix = report_plots.heatmap_grid(heat)
    fig = report_plots.heatmap_figure(nodes, grid_hours, matrix, report_plots.HeatmapMarks((), (), 0))
    texts = [t.get_text() for t in fig.axes[0].get_yticklabels()] + [t.get_text() for t in fig.axes[0].texts]
    assert "N" * 47 + "\u2026" in texts and "n?[31m?gpj.exe" in texts
    assert "cost$\\notacmd$/p" in texts and "c/pool$5 and $10" in texts
    width, height = png_size(fig)
    assert width < 2000 and height < 2500

    fc = pd.DataFrame({"unique_id": "cost$\\notacmd$/p/gpu", "ds": hours[-24:], "model": "lgbm",
                       "mean": 1.0, "lo_80": 0.5, "hi_80": 1.5, "lo_95": 0.2, "hi_95": 1.8})
    history = pd.DataFrame({"unique_id": "cost$\\notacmd$/p/gpu", "ds": hours[:24], "y": np.ones(24)})
    fig = report_plots.fan_chart(fc, history)
    assert fig.axes[0].get_title() == "cost$\\notacmd$/p/gpu\nlgbm"
    png_size(fig)
    assert report_plots.label("a" * 60) == "a" * 47 + "\u2026" and report_plots.label("ok") == "ok"


def test_a_fault_rows_label_never_overlaps_a_regular_one() -> None:
    """At 450 nodes every second row is labelled, and the fault rows' (always labelled) sat on
    their neighbours' labels."""
    hours = pd.date_range(START, periods=24, freq="h")
    heat = pd.DataFrame([("c", "p", f"node-{i:03d}", h, 0.5) for i in range(450) for h in hours],
                        columns=["cluster", "pool", "node_id", "hour", "util"])
    nodes, grid_hours, matrix = report_plots.heatmap_grid(heat)
    faults = (57, 58, 300)
    fig = report_plots.heatmap_figure(nodes, grid_hours, matrix, report_plots.HeatmapMarks((), faults, 3))
    ticks = list(fig.axes[0].get_yticks())
    assert set(faults) <= set(ticks) and len(ticks) > 100
    gaps = np.diff(sorted(ticks))
    step = max(set(gaps.tolist()), key=gaps.tolist().count)  # the regular spacing
    assert all(g >= step for a, b, g in zip(ticks, ticks[1:], gaps) if a not in faults or b not in faults)


def test_a_champion_of_a_series_with_no_demand_shows_no_wape_not_nan() -> None:
    """A drained pool's all-zero mem: every model's WAPE divides by nothing; the champion
    table said "lgbm nan, prophet_lgbm nan, seasonal_naive nan"."""
    from pipelines.report.data import champion_metrics

    models = pd.DataFrame({"group": ["c/p/mem", "c/q/cpu"], "kind": "lgbm", "model_id": ["m1", "m2"],
                           "data_cutoff": START, "metrics": '{"wape": null}'})
    rivals = pd.DataFrame({"model_id": ["m1", "m1", "m2"], "model": ["lgbm", "seasonal_naive", "lgbm"],
                           "wape": [np.nan, np.nan, 0.25], "windows": [3, 3, 3]})
    said = champion_metrics(models, rivals)["all_models_wape"].tolist()
    assert said == ["lgbm - (no demand), seasonal_naive - (no demand)", "lgbm 0.250"]


def test_the_cost_chart_draws_the_costliest_pools_three_to_a_row() -> None:
    # 203 pools once drew one row of panels 73,070 px wide, shrunk to a 1,280 px page
    import dataclasses

    from tests.pipelines.test_report import _plan_page_data

    data = _plan_page_data()
    one = data.recommendations["allocation"].assign(recommended=[False, True])
    alloc = pd.concat([one.assign(unique_id=f"c{i:02d}/p/gpu", monthly_cost=one["monthly_cost"] + i)
                       for i in range(20)], ignore_index=True)
    fig = report_plots.cost_figure(alloc)
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert len(shown) == report_plots.MAX_COST_PANELS and fig.get_size_inches()[0] < 12
    assert {ax.get_title() for ax in shown} == {f"c{i:02d}/p/gpu" for i in range(8, 20)}
    report_plots.plt.close(fig)
    page = report_html.render_report(dataclasses.replace(data, recommendations={**data.recommendations,
                                                                                 "allocation": alloc}))
    assert "the chart shows the 12 costliest of 20 pools; the table has them all" in page


def test_a_pool_the_plan_left_out_is_named_in_the_summary_with_why() -> None:
    # a pool silent for a day was warned of on the console and missing from the page and exports
    import dataclasses

    from tests.pipelines.test_report import _plan_page_data

    data = _plan_page_data()
    left = pd.DataFrame({"unique_id": ["c/b/cpu"], "resource": ["cpu"], "not_planned": ["all"],
                         "reason": ["no running capacity: its nodes did not report near the data cutoff"]})
    page = report_html.render_report(dataclasses.replace(data, recommendations={**data.recommendations,
                                                                                "unplanned": left}))
    summary = page[page.index(">Summary<"):]
    assert "c/b/cpu: not planned: no running capacity: its nodes did not report near the data cutoff." in summary
