"""The report's plots: matplotlib figures (Agg) from frames, no file I/O."""
from __future__ import annotations

import math
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FuncFormatter

from pipelines.report.data import json_object
from pipelines.runtime.money import CURRENCY, money
from pipelines.runtime.text import printable

# names are drawn as written: a '$' pair in a pool's name is text, not TeX (an unknown
# command in one stopped the whole report)
matplotlib.rcParams["text.parse_math"] = False

MAX_FAN_SERIES = 9
MAX_COST_PANELS = 12  # pools drawn in the allocation chart; the table has them all
COST_PARTS = ("private_cost", "public_cost", "edge_cost", "idle_penalty")
COST_COLORS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52")
BURST_COLOR, FAULT_COLOR = "#ff2020", "#ff00ff"
# what a demand series counts, by resource (the pool's total, summed over its nodes)
UNITS = {"gpu": "GPUs busy (pool total)", "cpu": "cores busy (pool total)", "mem": "GiB used (pool total)"}


def label(name: object, limit: int = 48) -> str:
    """A name as a plot draws it: characters that do not print (controls, bidi overrides,
    zero-width) as '?', and cut to ``limit`` with an ellipsis (a 10,000-character node id
    made the heatmap 140,000 pixels wide)."""
    text = printable(name)
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


@dataclass(frozen=True)
class HeatmapMarks:
    """Anomalies drawn on the heatmap: burst boxes (row0, row1, col0, col1) and fault rows."""

    bursts: tuple[tuple[int, int, int, int], ...]
    fault_rows: tuple[int, ...]
    alerts: int


def fan_series(forecasts: pd.DataFrame) -> list[str]:
    """The series shown for one group: the largest forecast demand first, at most nine."""
    total = forecasts.groupby("unique_id")["mean"].sum().reset_index()
    total = total.sort_values(["mean", "unique_id"], ascending=[False, True])
    return total["unique_id"].head(MAX_FAN_SERIES).tolist()


def fan_chart(group: pd.DataFrame, history: pd.DataFrame, days: int = 7) -> plt.Figure:
    """Small multiples: recent actual demand, forecast mean and its 80%/95% bands."""
    shown = fan_series(group)
    ncols = min(3, len(shown))
    nrows = math.ceil(len(shown) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.4 * ncols, 2.9 * nrows), squeeze=False)
    for ax, uid in zip(axes.flat, shown):
        fc = group[group["unique_id"] == uid].sort_values("ds")
        start = fc["ds"].min()
        act = history[(history["unique_id"] == uid) & (history["ds"] >= start - pd.Timedelta(days=days))]
        act = act.sort_values("ds")
        ax.fill_between(fc["ds"], fc["lo_95"], fc["hi_95"], color="C0", alpha=0.18, lw=0, label="95%")
        ax.fill_between(fc["ds"], fc["lo_80"], fc["hi_80"], color="C0", alpha=0.35, lw=0, label="80%")
        ax.plot(act["ds"], act["y"], color="#222", lw=0.9, label="actual")
        ax.plot(fc["ds"], fc["mean"], color="C0", lw=1.4, label="forecast")
        ax.axvline(start, color="#888", ls=":", lw=1)
        ax.set_title(f"{label(uid)}\n{fc['model'].iloc[0]}", fontsize=9)
        ax.set_ylabel(UNITS.get(uid.rsplit("/", 1)[-1], "demand"), fontsize=8)
        locator = mdates.AutoDateLocator(minticks=3, maxticks=8)
        ax.xaxis.set_major_locator(locator)
        # day and month on every tick: a concise offset ("2026-Feb") made January days read as February
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%d %b"))
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(shown):]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.tight_layout()
    fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=4, fontsize=8, frameon=False)
    return fig


def _node_for(entity: str, node_ids: list[str]) -> str | None:
    """The longest node id that ``entity`` is or starts with (followed by a separator)."""
    found = [n for n in node_ids if entity == n or (entity.startswith(n) and not entity[len(n)].isalnum())]
    return max(found, key=len) if found else None


def _runs(rows: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for r in sorted(rows):
        if out and r == out[-1][1] + 1:
            out[-1] = (out[-1][0], r)
        else:
            out.append((r, r))
    return out


def heatmap_marks(nodes: pd.DataFrame, hours: pd.DatetimeIndex, alerts: pd.DataFrame) -> HeatmapMarks:
    """Where the alerts land on the grid: bursts of a cluster/pool over their window, fault
    predictions on the node row. Only alerts whose window overlaps the grid (or firing
    alerts without a window) count."""
    if alerts.empty or nodes.empty or len(hours) == 0:
        return HeatmapMarks((), (), 0)
    lo, hi = hours[0], hours[-1] + pd.Timedelta(hours=1)
    node_ids = nodes["node_id"].tolist()
    boxes, faults, count = [], set(), 0
    for a in alerts.itertuples(index=False):
        ws, we = pd.Timestamp(a.window_start), pd.Timestamp(a.window_end)
        has_window = not (pd.isna(ws) or pd.isna(we))
        if has_window and (we < lo or ws >= hi):
            continue
        if not has_window and a.status != "firing":
            continue
        entity = str(a.entity)
        if a.kind == "burst" and has_window and entity.count("/") >= 2:
            cluster, pool = entity.split("/")[:2]
            rows = np.flatnonzero((nodes["cluster"] == cluster).to_numpy() & (nodes["pool"] == pool).to_numpy())
            c0 = max(0, int((ws.floor("h") - lo) / pd.Timedelta(hours=1)))
            c1 = min(len(hours), int((we.floor("h") - lo) / pd.Timedelta(hours=1)) + 1)
            if len(rows) and c1 > c0:
                boxes += [(r0, r1, c0, c1) for r0, r1 in _runs(rows.tolist())]
                count += 1
        elif a.kind == "hardware_fault":
            labelled = json_object(getattr(a, "labels", None)).get("node")
            node = labelled if labelled in node_ids else _node_for(entity, node_ids)
            if node is not None:
                faults.add(node_ids.index(node))
                count += 1
    return HeatmapMarks(tuple(sorted(set(boxes))), tuple(sorted(faults)), count)


def heatmap_grid(heatmap: pd.DataFrame) -> tuple[pd.DataFrame, pd.DatetimeIndex, np.ndarray]:
    """Nodes (ordered by cluster, pool, node), the hour axis and the node x hour matrix."""
    nodes = heatmap[["cluster", "pool", "node_id"]].drop_duplicates().sort_values(["cluster", "pool", "node_id"])
    nodes = nodes.reset_index(drop=True)
    hours = pd.date_range(heatmap["hour"].min(), heatmap["hour"].max(), freq="h")
    matrix = heatmap.pivot_table(index="node_id", columns="hour", values="util", aggfunc="mean")
    matrix = matrix.reindex(index=nodes["node_id"], columns=hours)
    return nodes, hours, matrix.to_numpy(dtype=float)


# rows the heatmap draws at most: 24 inches at 100 dpi give each 8 pixels; past that, rows
# would merge into one pixel and a node running hot could vanish from the picture
HEATMAP_MAX_ROWS = 300


def heatmap_rows(nodes: pd.DataFrame, matrix: np.ndarray, must: tuple[int, ...] | list[int],
                 limit: int = HEATMAP_MAX_ROWS) -> np.ndarray:
    """The rows to draw, in the grid's order: all of them up to ``limit``; past it, ``must``
    (the nodes with a predicted fault) and, of each cluster/pool, a share of the rest in
    proportion to its size (one at least), half its busiest and half its idlest by the mean
    over the hours: the spread of every pool, not a sample of it."""
    n = len(nodes)
    if n <= limit:
        return np.arange(n)
    keep = list(dict.fromkeys(int(r) for r in must))[:limit]
    taken = np.zeros(n, dtype=bool)
    taken[keep] = True
    valid = np.isfinite(matrix)
    mean = np.where(valid.any(axis=1), np.where(valid, matrix, 0).sum(axis=1) / np.maximum(valid.sum(axis=1), 1),
                    -np.inf)  # a node with no reading counts as idlest
    rest = [pos[~taken[pos]] for pos in nodes.groupby(["cluster", "pool"], sort=False).indices.values()]
    sizes = np.array([len(r) for r in rest])
    left = limit - len(keep)
    quota = np.minimum(np.maximum(left * sizes // max(int(sizes.sum()), 1), sizes > 0), sizes)
    while quota.sum() > left:
        quota[np.argmax(quota)] -= 1
    while quota.sum() < left and (quota < sizes).any():
        quota[np.argmax(sizes - quota)] += 1
    for pos, q in zip(rest, quota):
        ranked = pos[np.argsort(-mean[pos], kind="stable")]
        keep += ranked[:(q + 1) // 2].tolist() + (ranked[len(ranked) - q // 2:].tolist() if q // 2 else [])
    return np.sort(np.asarray(keep, dtype=int))


def heatmap_figure(nodes: pd.DataFrame, hours: pd.DatetimeIndex, matrix: np.ndarray,
                   marks: HeatmapMarks) -> plt.Figure:
    """Node x hour utilization, clusters/pools separated, anomalies outlined."""
    n, m = matrix.shape
    height = min(24.0, max(3.5, 1.4 + 0.13 * n))
    fig, ax = plt.subplots(figsize=(13, height))
    cmap = plt.get_cmap("viridis").with_extremes(bad="#dddddd")
    im = ax.imshow(np.ma.masked_invalid(matrix), aspect="auto", cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
    # one readable label per row while rows are tall enough, else every k-th (fault rows always)
    row_pt = (height - 1.4) * 72 / max(n, 1)
    size = min(8.0, row_pt * 0.8)
    step = 1 if size >= 4 else math.ceil(4 / size)
    size = max(size, 4.0)
    faults = set(marks.fault_rows)
    # every k-th row's label, but none so near a fault row's (always labelled) that they overlap
    ticks = sorted({i for i in range(0, n, step) if not any(abs(i - f) < step for f in faults - {i})} | faults)
    ax.set_yticks(ticks)
    ax.set_yticklabels([label(nodes["node_id"].iloc[i]) for i in ticks], fontsize=size)
    for tick, i in zip(ax.get_yticklabels(), ticks):
        if i in marks.fault_rows:
            tick.set_color(FAULT_COLOR)
            tick.set_fontweight("bold")
    days = [i for i, h in enumerate(hours) if h.hour == 0]
    ax.set_xticks(days)
    ax.set_xticklabels([hours[i].strftime("%a %m-%d") for i in days], fontsize=8)
    ax.set_xticks([i for i, h in enumerate(hours) if h.hour % 6 == 0], minor=True)
    ax.set_xlabel("hour (UTC)")
    groups = (nodes["cluster"] + "/" + nodes["pool"]).tolist()
    for start, end in _group_spans(groups):
        if start > 0:
            ax.axhline(start - 0.5, color="white", lw=1.5, zorder=1.5)
        ax.text(m + 0.5, (start + end) / 2, label(groups[start]), fontsize=7, va="center", ha="left", clip_on=False)
    for r in marks.fault_rows:
        ax.add_patch(Rectangle((-0.5, r - 0.5), m, 1, fill=False, ec=FAULT_COLOR, lw=1.6, ls="--", zorder=3))
    for r0, r1, c0, c1 in marks.bursts:
        ax.add_patch(Rectangle((c0 - 0.5, r0 - 0.5), c1 - c0, r1 - r0 + 1, fill=False, ec=BURST_COLOR, lw=2, zorder=3))
    handles = [Patch(fill=False, ec=BURST_COLOR, lw=2, label="demand burst (cluster/pool, window)"),
               Patch(fill=False, ec=FAULT_COLOR, lw=1.6, ls="--", label="hardware fault predicted (node)")]
    ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0, 1.0), ncol=2, fontsize=8, frameon=False)
    cbar = fig.colorbar(im, ax=ax, pad=0.11, fraction=0.025)
    cbar.set_label("used / capacity (hourly mean)")
    return fig


def _group_spans(groups: list[str]) -> list[tuple[int, int]]:
    spans, start = [], 0
    for i in range(1, len(groups) + 1):
        if i == len(groups) or groups[i] != groups[start]:
            spans.append((start, i - 1))
            start = i
    return spans


def cost_panels(alloc: pd.DataFrame) -> tuple[str, list[str]]:
    """The column that names a panel (the pool, else the resource), and the panels drawn: at
    most MAX_COST_PANELS, the costliest first by their recommended (else cheapest) plan."""
    by = "unique_id" if "unique_id" in alloc.columns else "resource"
    cost = pd.to_numeric(alloc["monthly_cost"], errors="coerce")
    pool = alloc[by].astype(str)
    best = cost.where(alloc["recommended"].eq(True)) if "recommended" in alloc.columns else cost
    order = best.groupby(pool).min().fillna(cost.groupby(pool).min()).fillna(-1.0)
    return by, sorted(sorted(order.index, key=lambda p: (-order[p], p))[:MAX_COST_PANELS])


def cost_figure(alloc: pd.DataFrame) -> plt.Figure:
    """Monthly cost per plan, stacked by private / public / edge cost and idle penalty: one
    panel per pool (see :func:`cost_panels`), three to a row."""
    by, resources = cost_panels(alloc)
    ncols = min(3, len(resources))
    nrows = math.ceil(len(resources) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(max(5.0, 3.6 * ncols), 3.8 * nrows), squeeze=False)
    for ax in list(axes.flat)[len(resources):]:
        ax.set_visible(False)
    for ax, res in zip(axes.flat, resources):
        rows = alloc[alloc[by].astype(str) == res].sort_values("plan")
        x = np.arange(len(rows))
        bottom = np.zeros(len(rows))
        for part, color in zip(COST_PARTS, COST_COLORS):
            values = pd.to_numeric(rows[part], errors="coerce").fillna(0).to_numpy() if part in rows else bottom * 0
            ax.bar(x, values, bottom=bottom, color=color, width=0.6, label=part.replace("_", " "))
            bottom = bottom + values
        totals = pd.to_numeric(rows["monthly_cost"], errors="coerce").to_numpy()
        for xi, total, stacked in zip(x, totals, bottom):
            if not np.isnan(total):
                ax.text(xi, max(total, stacked), money(total), ha="center", va="bottom", fontsize=8)
        ax.set_xticks(x)
        ax.set_xticklabels(rows["plan"].astype(str).tolist(), fontsize=8, rotation=15)
        ax.set_title(label(res), fontsize=10)
        ax.set_ylabel(f"monthly cost ({CURRENCY})", fontsize=8)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: money(v)))
        ax.tick_params(axis="y", labelsize=7)
        ax.margins(y=0.12)
        ax.grid(axis="y", alpha=0.3)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.tight_layout()
    # above the panels, outside every axes: a legend inside one could cover a bar
    fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(COST_PARTS), fontsize=8,
               frameon=False)
    return fig


def replay_figure(capacity: pd.DataFrame, title: str) -> plt.Figure:
    """A replay's demand with the capacity headroom planned and an 80%-target reactive
    autoscaler held, at the data's resolution (``ts, demand, planned, reactive_80``)."""
    fig, ax = plt.subplots(figsize=(9.0, 3.0))
    ts = pd.to_datetime(capacity["ts"])
    ax.fill_between(ts, pd.to_numeric(capacity["demand"], errors="coerce"), color="#bbbbbb", step="post",
                    label="demand", linewidth=0)
    for col, color in (("reactive_80", "#d95f02"), ("planned", "#1b9e77")):
        if col in capacity:
            ax.step(ts, pd.to_numeric(capacity[col], errors="coerce"), where="post", color=color, linewidth=1.0,
                    label=f"{col} capacity")
    ax.set_title(label(title, 200), fontsize=10)
    ax.set_ylabel("units", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", ncol=3, frameon=False)
    fig.tight_layout()
    return fig
