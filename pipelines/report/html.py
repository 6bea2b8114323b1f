"""Render the report: frames in, one self-contained HTML page out (no file I/O here).

Plots (:mod:`pipelines.report.plots`) are embedded as base64 PNGs; every text is HTML-escaped.
Nothing depends on the wall clock, so the same warehouse renders the same bytes.
"""
from __future__ import annotations

import base64
import html
import io
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from pipelines.report.data import PROVENANCE, RESERVATION_NAMES, ReportData
from pipelines.report.plots import (
    COST_PARTS,
    MAX_FAN_SERIES,
    cost_figure,
    cost_panels,
    fan_chart,
    heatmap_figure,
    heatmap_grid,
    heatmap_marks,
    heatmap_rows,
    label,
    replay_figure,
)
from pipelines.report.text import GLOSSARY, GLOSSARY_ANCHORS, PRESCALE_SCOPE
from pipelines.runtime.money import money
from pipelines.store.status import UNPLANNED_WHAT
from planner.allocation import RUNNING_FLEET

MAX_TABLE_ROWS = 100
SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}
ALERT_COLUMNS = ["kind", "entity", "severity", "probability", "summary", "runbook", "starts_at"]
RESERVATION_TABLE_COLUMNS = ["unique_id", "resource", "term", "instance_type", "provider", "region", "instances",
                             "units_per_instance", "reserved_units", "expected_utilization",
                             "break_even_utilization", "break_even_months", "savings_pct",
                             "monthly_cost_reserved", "monthly_cost_on_demand", "monthly_savings",
                             "coverage_quantile", "location"]
PRESCALE_COLUMNS = ["ts", "unique_id", "resource", "action", "instances_delta", "units_per_instance", "capacity",
                    "target_capacity", "forecast_mean", "forecast_upper", "reason"]
ALLOCATION_COLUMNS = ["unique_id", "resource", "plan", "private", "public", "edge", "carried_private",
                      "carried_public", "carried_edge", "monthly_cost", *COST_PARTS,
                      "savings_vs_default", "expected_savings", "out_of_sample_savings", "in_sample_savings",
                      "backtest_split", "current_fleet_cost", "recommended", "reason", "retuned", "tuned_this_run",
                      "offers"]
# columns that hold a cost per month: shown with the currency, as the console shows them
MONEY_COLUMNS = frozenset({"monthly_cost", *COST_PARTS, "savings_vs_default", "expected_savings",
                           "out_of_sample_savings", "in_sample_savings",
                           "current_fleet_cost", "monthly_cost_reserved", "monthly_cost_on_demand",
                           "monthly_savings", "expected_monthly_saving", "recurring_monthly_cost", "upfront_cost",
                           "estimated_monthly_savings", "cost_usd"})

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1280px;color:#222;padding:0 1em}
h1{margin-bottom:.2em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;font-size:13px;margin:.5em 0}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}
img{max-width:100%;height:auto}.empty,.note{color:#777;font-style:italic}nav a{margin-right:1em}
.wide{overflow-x:auto;max-width:100%}body{overflow-wrap:break-word}nav a{display:inline-block}
@media (max-width:600px){body{margin:1em auto;padding:0 .5em}table{font-size:12px}}
"""


def esc(value: object) -> str:
    """HTML-escape any value's text."""
    return html.escape("" if value is None else str(value), quote=True)


def _fmt(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NaT:
        return "–"
    if isinstance(value, pd.Timestamp):
        return value.strftime("%Y-%m-%d %H:%M")
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if math.isinf(v):
            return "∞" if v > 0 else "-∞"
        if v.is_integer():  # counts and units stored as floats (192.0 cores): no decimals
            return f"{int(v):,}"
        return f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.2f}" if abs(v) >= 1 else f"{v:.3g}"
    return str(value)


def _head(column: str) -> str:
    """A column header, linked to its glossary entry when it has one."""
    anchor = GLOSSARY_ANCHORS.get(column)
    return f'<th><a href="#g-{anchor}">{esc(column)}</a></th>' if anchor else f"<th>{esc(column)}</th>"


def table(frame: pd.DataFrame, columns: list[str] | None = None, max_rows: int = MAX_TABLE_ROWS) -> str:
    """An escaped HTML table of ``columns`` (those present), at most ``max_rows`` rows; costs
    (:data:`MONEY_COLUMNS`) with the currency, headers linked to the glossary."""
    cols = [c for c in (columns or list(frame.columns)) if c in frame.columns]
    head = "".join(_head(c) for c in cols)
    rows = []
    for rec in frame[cols].head(max_rows).itertuples(index=False, name=None):
        cells = []
        for col, v in zip(cols, rec):
            numeric = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
            text = money(v) if numeric and col in MONEY_COLUMNS and not pd.isna(v) else _fmt(v)
            cells.append(f'<td class="num">{esc(text)}</td>' if numeric else f"<td>{esc(text)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    more = len(frame) - max_rows
    tail = f'<p class="note">{more:,} more rows in the CSV export</p>' if more > 0 else ""
    # a wide table scrolls inside its own box instead of being cut off (or widening the page)
    return f"<div class=\"wide\"><table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>{tail}"


def _png(fig: plt.Figure, alt: str) -> str:
    buf = io.BytesIO()
    # no Software/date metadata: identical inputs give identical bytes
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img alt="{esc(alt)}" src="data:image/png;base64,{data}">'


def _empty(stage: str) -> str:
    return f'<p class="empty">no data yet: run headroom {esc(stage)}</p>'


def _section(anchor: str, title: str, body: str) -> str:
    return f'<section id="{anchor}"><h2>{esc(title)}</h2>{body}</section>'


# --- forecast fan charts ---------------------------------------------------------------

def forecast_section(data: ReportData) -> str:
    """One fan chart per champion group."""
    fc = data.forecasts
    if fc.empty:
        return _section("forecasts", "Forecasts", _empty("train"))
    parts = []
    for name, group in fc.groupby("group", sort=True):
        n = group["unique_id"].nunique()
        note = f" (showing the {MAX_FAN_SERIES} largest of {n} series)" if n > MAX_FAN_SERIES else ""
        run = ", ".join(sorted(group["run_id"].astype(str).unique()))
        parts.append(f"<h3>{esc(name)}</h3><p class=\"note\">run {esc(run)}{esc(note)}</p>"
                     + _png(fan_chart(group, data.history), f"forecast fan chart {name}"))
    return _section("forecasts", "Forecasts", "".join(parts))


# --- node-by-hour heatmap --------------------------------------------------------------

def heatmap_section(data: ReportData) -> str:
    """The node-by-hour utilization heatmap of the last week."""
    title = "Utilization by node and hour"
    if data.heatmap.empty:
        return _section("heatmap", title, _empty("ingest"))
    nodes, hours, matrix = heatmap_grid(data.heatmap)
    marks = heatmap_marks(nodes, hours, data.alerts)
    rows, total, shown = heatmap_rows(nodes, matrix, marks.fault_rows), len(nodes), ""
    if len(rows) < total:  # more nodes than rows can be told apart: every pool's spread
        nodes, matrix = nodes.iloc[rows].reset_index(drop=True), matrix[rows]
        marks = heatmap_marks(nodes, hours, data.alerts)
        shown = (f" ({len(rows)} drawn: those with a predicted fault, and of each pool its busiest and idlest by "
                 f"the week's mean)")
    note = (f"<p class=\"note\">resource {esc(data.heatmap_resource)}, {total} nodes{shown}, "
            f"{esc(_fmt(hours[0]))} .. {esc(_fmt(hours[-1]))}; {marks.alerts} alert(s) marked</p>")
    return _section("heatmap", title, note + _png(heatmap_figure(nodes, hours, matrix, marks), "utilization heatmap"))


# --- allocation plans ------------------------------------------------------------------

def allocation_section(data: ReportData) -> str:
    """Cost comparison of the allocation plans: chart and table."""
    alloc = data.recommendations.get("allocation", pd.DataFrame())
    title = "Allocation plans: monthly cost"
    if alloc.empty or not {"resource", "plan", "monthly_cost"} <= set(alloc.columns):
        return _section("allocation", title, _none_in_plan(
            data, "no pool has a priced public offer in the instance catalog that can run it (headroom ingest "
                  "--kind catalog)"))
    by, shown = cost_panels(alloc)
    n = alloc[by].astype(str).nunique()
    note = (f"<p class=\"note\">the chart shows the {len(shown)} costliest of {n} pools; the table has them "
            "all</p>" if len(shown) < n else "")
    return _section("allocation", title, note + _png(cost_figure(alloc), "allocation plan costs")
                    + table(alloc, ALLOCATION_COLUMNS))


REPLAY_COLUMNS = ["strategy", "cost_vs_oracle", "underprovisioned_pct", "avg_utilization", "unit_hours_short",
                  "idle_unit_hours", "scale_actions", "cost_usd"]


def replay_section(data: ReportData) -> str:
    """Each series' latest replay: demand against planned and reactive capacity, and the table
    of every strategy scored on that demand."""
    title = "Pre-scaling replayed on the last days"
    rep = data.replays
    if rep.empty:
        return _section("replay", title, '<p class="empty">No replay in the warehouse (headroom run replays the '
                        "last week of every pool; headroom plan replay replays any span).</p>")
    parts = ['<p class="note">At each step the strategies used only the data before it; all are scored on the '
             "same demand at its own resolution. cost_vs_oracle: capacity-time over demand-time (1 is capacity "
             "equal to demand at every step); underprovisioned_pct: the percent of steps with demand above "
             "capacity (0.2 is 0.2%); avg_utilization: demand over capacity, a fraction; cost_usd: the capacity's "
             "unit-hours over the whole replayed span (not a month) at the pool's private machine's price per "
             "unit-hour with its surcharges, or at the price its rule line names.</p>"]
    for rid, rows in rep.groupby("replay_id", sort=False):
        first = rows.iloc[0]
        span = f"{pd.Timestamp(first['span_start']):%Y-%m-%d %H:%M} to {pd.Timestamp(first['span_end']):%Y-%m-%d %H:%M}"
        caption = (f"{label(first['unique_id'])}, {span}, instances of {float(first['instance_units']):g} units, "
                   f"models {first['models']}")
        rule = first.get("rule")
        if isinstance(rule, str) and rule:  # replays stored before 060 do not say it
            parts.append(f'<p class="note">{esc(str(first["unique_id"]))}, the rule replayed as planned: {esc(rule)}</p>')
        cap = data.replay_capacity.get(str(rid), pd.DataFrame())
        if not cap.empty:
            parts.append(_png(replay_figure(cap, caption), f"replay of {first['unique_id']}"))
        else:
            parts.append(f"<h3>{esc(caption)}</h3>")
        order = {k: i for i, k in enumerate(["planned", "oracle"])}
        rows = rows.assign(_o=rows["strategy"].map(order).fillna(9)).sort_values(["_o", "strategy"])
        parts.append(table(rows, [c for c in REPLAY_COLUMNS if c in rows.columns]))
    return _section("replay", title, "".join(parts))


# --- tables ----------------------------------------------------------------------------

def next_day_prescale(prescale: pd.DataFrame) -> pd.DataFrame:
    """Actions other than hold in the first 24 hours of the plan, by time."""
    if prescale.empty or "ts" not in prescale or "action" not in prescale:
        return prescale.iloc[0:0]
    frame = prescale.assign(ts=pd.to_datetime(prescale["ts"], errors="coerce", utc=True).dt.tz_localize(None))
    start = frame["ts"].min()
    keep = (frame["action"] != "hold") & (frame["ts"] < start + pd.Timedelta(hours=24))
    return frame[keep].sort_values(["ts", "key"]).reset_index(drop=True)


def firing_alerts(alerts: pd.DataFrame) -> pd.DataFrame:
    """Firing alerts, the most severe and most likely first."""
    if alerts.empty:
        return alerts
    firing = alerts[alerts["status"] == "firing"]
    rank = firing["severity"].map(SEVERITY_RANK).fillna(len(SEVERITY_RANK))
    ordered = firing.assign(_rank=rank, _p=firing["probability"].fillna(-1.0))
    ordered = ordered.sort_values(["_rank", "_p", "starts_at", "fingerprint"], ascending=[True, False, True, True])
    return ordered.drop(columns=["_rank", "_p"]).reset_index(drop=True)


SPOT_TABLE_COLUMNS = ["unique_id", "action", "instance_type", "zone", "interruptible_share", "spot_instances",
                      "discount", "hours_above_on_demand", "p_spike", "expected_monthly_saving", "reason"]


def _none_in_plan(data: ReportData, why: str) -> str:
    """An empty recommendation section: which stage to run, or why the plan run has none."""
    if not data.plan_run:
        return _empty("plan")
    left = data.recommendations.get("unplanned", pd.DataFrame())
    if not left.empty:  # the plan's own reasons, beside a general one that may not be its
        n = left["unique_id"].nunique() if "unique_id" in left else len(left)
        why = f"{why}; or, for the {n} series it left out, what the summary says of each"
    return f'<p class="note">none in plan run {esc(data.plan_run)}: {esc(why)}</p>'


def spot_table(spot: pd.DataFrame) -> str:
    """The spot recommendation per pool."""
    return table(spot, [c for c in SPOT_TABLE_COLUMNS if c in spot.columns])


def reservation_table(res: pd.DataFrame) -> str:
    """The reservation options: their figures under the names the exports give them, then any
    other payload field, the unit and the reason (not the other provenance columns, which the
    exports keep)."""
    cols = [c for c in RESERVATION_TABLE_COLUMNS if c in res.columns]
    cols += [c for c in res.columns if c not in RESERVATION_TABLE_COLUMNS
             and (c not in PROVENANCE or c in ("unit", "reason"))]
    return table(res[cols].rename(columns=RESERVATION_NAMES))


def tables_section(data: ReportData) -> str:
    """Reservations, the next day's pre-scale actions, firing alerts and champion models."""
    res = data.recommendations.get("reservation", pd.DataFrame())
    pre = data.recommendations.get("prescale", pd.DataFrame())
    actions = next_day_prescale(pre)
    alerts = firing_alerts(data.alerts)
    parts = [
        _section("reservations", "Reservation recommendations", reservation_table(res)
                 if not res.empty else _none_in_plan(data, "no reservation pays for what the recommended plans run "
                                                           "on public (a running fleet that carries its demand runs "
                                                           "nothing there), or the catalog has no reserved prices "
                                                           "for the pools' public offers")),
        _section("spot", "Spot for the interruptible load",
                 spot_table(data.recommendations.get("spot", pd.DataFrame())) if "spot" in data.recommendations
                 else _none_in_plan(data, "no pool has a public offer to compare spot prices with"
                                    if data.counts.get("spot_prices") and "allocation" not in data.recommendations
                                    else "no spot prices in the lookback before the data cutoff")),
        _section("prescale", "Pre-scale actions, next 24 hours",
                 PRESCALE_SCOPE + (table(actions, PRESCALE_COLUMNS) if not actions.empty
                                   else '<p class="note">no scale-up or scale-down in the next 24 hours</p>')
                 if not pre.empty else _none_in_plan(data, "no forecast beyond the data cutoff (run headroom "
                                                           "train, then plan)")),
        _section("alerts", "Firing alerts", table(alerts, ALERT_COLUMNS) if not alerts.empty
                 else '<p class="note">no alert is firing (run headroom detect if it has not run)</p>'),
        _section("models", "Champion models (backtest)",
                 '<p class="note">what the scores mean, and what good looks like: '
                 '<a href="#glossary">glossary</a></p>' + table(data.champions)
                 if not data.champions.empty else _empty("train")),
    ]
    return "".join(parts)


def glossary_section() -> str:
    """The terms of the page in plain words, one line each; table headers link here."""
    items = "".join(f'<dt id="g-{anchor}"><b>{esc(term)}</b></dt><dd>{esc(text)}</dd>'
                    for anchor, term, _, text in GLOSSARY)
    return _section("glossary", "Glossary", f"<dl>{items}</dl>")


# --- page ------------------------------------------------------------------------------

def section_counts(data: ReportData) -> dict[str, int]:
    """What each section shows, as counts."""
    alerts = firing_alerts(data.alerts)
    marks = 0
    if not data.heatmap.empty:
        nodes, hours, _ = heatmap_grid(data.heatmap)
        marks = heatmap_marks(nodes, hours, data.alerts).alerts
    recs = data.recommendations
    return {
        "forecast_groups": int(data.forecasts["group"].nunique()) if not data.forecasts.empty else 0,
        "forecast_series": int(data.forecasts["unique_id"].nunique()) if not data.forecasts.empty else 0,
        "heatmap_nodes": int(data.heatmap["node_id"].nunique()) if not data.heatmap.empty else 0,
        "heatmap_alerts": marks,
        "allocation_plans": len(recs.get("allocation", ())),
        "reservations": len(recs.get("reservation", ())),
        "spot_pools": len(recs.get("spot", ())),
        "prescale_actions": len(next_day_prescale(recs.get("prescale", pd.DataFrame()))),
        "firing_alerts": len(alerts),
        "champions": len(data.champions),
        "replays": int(data.replays["replay_id"].nunique()) if not data.replays.empty else 0,
    }


def summary_lines(data: ReportData) -> list[str]:
    """The decisions in one glance: split and savings, reservations, the next day's scaling,
    firing alerts (plain text; escaped by the caller)."""
    recs = data.recommendations
    lines = []
    alloc = recs.get("allocation", pd.DataFrame())
    if not alloc.empty and "headline" in alloc.columns:  # the recommended plan per pool comes first
        best = alloc[alloc["headline"].fillna("").astype(str) != ""]
        lines += [f"{_pool_of(r)}: {r['headline']}." for r in best.to_dict("records")]
    # what the plan left out, and why, as the plan's log says it: a pool is never silently missing
    left = recs.get("unplanned", pd.DataFrame())
    if not left.empty and {"unique_id", "not_planned", "reason"} <= set(left.columns):
        lines += [f"{r['unique_id']}: {UNPLANNED_WHAT.get(str(r['not_planned']), 'not planned')}: {r['reason']}."
                  for r in left.to_dict("records")]
    # the pools whose recommended plan is a split (not the running fleet), and that split: the
    # tuned one or the default (0/0/100 too); rows without a recommendation (older runs): the tuned
    split_pools = None
    tuned = base = pd.DataFrame()
    if not alloc.empty and {"plan", "monthly_cost"} <= set(alloc.columns):
        if "recommended" in alloc.columns:
            recommended = alloc["recommended"].astype(str).str.lower() == "true"
            tuned = alloc[recommended & (alloc["plan"] != RUNNING_FLEET)]
            split_pools = {_pool_of(r) for r in tuned.to_dict("records")}
        else:
            tuned = alloc[alloc["plan"] == "tuned"]
        # a pool that keeps its running fleet is left out: its headline says why
        mine = {_pool_of(r) for r in tuned.to_dict("records")}
        base = alloc[(alloc["plan"] == "default_3_5_2").to_numpy()
                     & np.array([_pool_of(r) in mine for r in alloc.to_dict("records")], dtype=bool)]
    if not tuned.empty:
        # a default that cannot be bought as it reads (a share with no offer) is no yardstick
        buyable = base.get("buyable", pd.Series(True, index=base.index)).fillna(True).astype(bool)
        pools = {_pool_of(r) for r in base[buyable].to_dict("records")}
        compared = tuned[[_pool_of(r) in pools for r in tuned.to_dict("records")]]
        saved = float(pd.to_numeric(base.loc[buyable, "monthly_cost"]).sum()
                      - pd.to_numeric(compared["monthly_cost"]).sum())
        who = ", ".join(
            f"{_pool_of(r)} {float(r['private']):.0%}/{float(r['public']):.0%}/{float(r['edge']):.0%}"
            for r in tuned.to_dict("records"))
        direction = "less" if round(saved) >= 0 else "more"  # as money() rounds it: never "$0 more"
        total = float(pd.to_numeric(tuned["monthly_cost"]).sum())
        current = pd.to_numeric(tuned.get("current_fleet_cost", pd.Series(dtype=float)), errors="coerce")
        now = (f" The running fleet, priced as private machines, would cost {money(current.sum())} for the same "
               "demand" + (" (less than the recommended split, which the allocation bounds keep partly on "
                           "public and edge: widen them in the plan config to weigh keeping more private)"
                           if current.sum() < total else "") + "."
               if len(current) and current.notna().all() and "headline" not in alloc.columns else "")
        against = ("" if compared.empty else
                   (", the same as the default split" if round(saved) == 0 else
                    f", {money(abs(saved))} {direction} than the default split")
                   + ("" if len(compared) == len(tuned) else
                      f" for the {len(compared)} of them whose default can be bought as it reads"))
        lines.append(f"Split private/public/edge: {who}; {money(total)} per month on the demand path (the "
                     f"history of the lookback and the forecast after it){against}.{now}")
    res = recs.get("reservation", pd.DataFrame())
    # rows that name their plan cover the recommended plan's public load; older rows priced the
    # tuned split's whatever was recommended, and count only for the pools that take a split
    if not res.empty and "monthly_savings" in res and split_pools is not None and "plan" not in res:
        mine = [str(p) in split_pools for p in (res["unique_id"] if "unique_id" in res else res["key"])]
        if not any(mine):
            lines.append(f"Reservations: none to buy while every pool keeps its running fleet (the {len(res)} "
                         "option(s) below price the tuned split's public share).")
        res = res[mine]
    if not res.empty and "monthly_savings" in res:
        pools = res["unique_id"] if "unique_id" in res else res["key"]
        best = pd.to_numeric(res["monthly_savings"]).groupby(pools.fillna("?"), dropna=False).max().sum()
        lines.append(f"{len(res)} reservation option(s) for the plan's public capacity; the best per pool "
                     f"saves {money(best)} per month against paying on-demand for it, for a commitment over "
                     "the whole term (see the instances and term of each).")
    spot = recs.get("spot", pd.DataFrame())
    if not spot.empty and {"action", "expected_monthly_saving"} <= set(spot.columns):
        used = spot[spot["action"] == "use_spot"]
        if used.empty:
            lines.append("Spot: the interruptible share stays on on-demand in every pool.")
        else:
            saved = float(pd.to_numeric(used["expected_monthly_saving"]).sum())
            lines.append(f"Spot: {len(used)} of {len(spot)} pool(s) run their interruptible share on spot; "
                         f"{money(saved)} per month less than on-demand.")
    actions = next_day_prescale(recs.get("prescale", pd.DataFrame()))
    if not actions.empty:
        ups = int((actions["action"] == "scale_up").sum())
        lines.append(f"Next 24 hours: {ups} scale-up and {len(actions) - ups} scale-down action(s) of the pools' "
                     "running nodes (for their whole demand, not only the public share of the split).")
    alerts = firing_alerts(data.alerts)
    if not alerts.empty:
        kinds = alerts["kind"].value_counts()
        critical = alerts.loc[alerts["severity"] == "critical", "entity"].astype(str).tolist()
        lines.append("Firing alerts: " + ", ".join(f"{n} {k}" for k, n in kinds.items())
                     + (f" (critical: {', '.join(critical[:5])}{' ...' if len(critical) > 5 else ''}; "
                        "see each runbook below)" if critical else "") + ".")
    return lines


def _pool_of(row: dict) -> str:
    """What an allocation row is for: its unique_id, else its key without the plan."""
    uid = row.get("unique_id")
    if isinstance(uid, str) and uid:
        return uid
    return str(row.get("key", "?")).rsplit("/", 1)[0]


def summary_section(data: ReportData) -> str:
    """The summary box at the top of the page."""
    lines = summary_lines(data)
    if not lines:
        return ""
    items = "".join(f"<li>{esc(line)}</li>" for line in lines)
    return _section("summary", "Summary", f"<ul>{items}</ul>")


def header(data: ReportData) -> str:
    """Title, the latest reading the report is as of, the plan run and its cutoff, and rows
    per warehouse table. The plan's cutoff is its last complete hour of demand, so it can be
    up to an hour (or a partial hour) before the latest reading."""
    cutoff = (f"latest utilization reading <b>{esc(_fmt(data.data_cutoff))}</b> (UTC)" if data.data_cutoff is not None
              else "no utilization yet")
    plan = ""
    if data.plan_run:
        plan = f", plan run {esc(data.plan_run)}"
        if data.plan_cutoff is not None:
            plan += f" on demand up to the hour of <b>{esc(_fmt(data.plan_cutoff))}</b>"

    counts = pd.DataFrame({"table": list(data.counts), "rows": list(data.counts.values())})
    nav = "".join(f'<a href="#{a}">{esc(t)}</a>' for a, t in (
        ("forecasts", "forecasts"), ("heatmap", "utilization"), ("allocation", "allocation"),
        ("replay", "replay"), ("reservations", "reservations"), ("spot", "spot"), ("prescale", "pre-scale"),
        ("alerts", "alerts"),
        ("models", "models"), ("glossary", "glossary")))
    return (f"<h1>headroom report</h1><p>{cutoff}{plan}</p>"
            f"<nav>{nav}</nav>" + (f"<details><summary>warehouse rows</summary>{table(counts)}</details>"
                                   if data.counts else _empty("ingest")))


def render_report(data: ReportData) -> str:
    """The whole report as one self-contained HTML page."""
    body = "".join([header(data), summary_section(data), forecast_section(data), heatmap_section(data),
                    allocation_section(data), replay_section(data), tables_section(data), glossary_section()])
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1"><title>headroom report</title>'
            f"<style>{CSS}</style></head><body>{body}</body></html>\n")
