"""The planner's I/O: its inputs from the warehouse and its recommendations back into it."""
from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass

import duckdb
import pandas as pd

from anomaly.spike_features import NoGridStep, SpikeGridTooLarge, SpikePolicy
from anomaly.spikes import market_probabilities
from pipelines.runtime.money import money
from pipelines.store import demand, detection, warehouse
from pipelines.store.models import CHAMPION_FORECASTS_SQL, LATEST_RUN_FORECASTS_SQL
from planner.allocation import Split
from planner.prescale import PrescalePolicy
from planner.spot import market_stats

log = logging.getLogger(__name__)

# running capacity per series: each node's last reading (within a day of the newest one,
# so nodes that report a little earlier or later still count), and the step one machine adds
CAPACITY_SQL = """
WITH newest AS (SELECT max(ts) AS ts FROM utilization),
latest AS (
    SELECT u.cluster, u.pool, u.node_id, u.resource, u.capacity
    FROM utilization u, newest
    WHERE u.ts > newest.ts - INTERVAL 1 DAY
    QUALIFY row_number() OVER (PARTITION BY u.node_id, u.resource ORDER BY u.ts DESC) = 1
),
-- a node reporting capacity 0 for any resource is drained: none of its resources runs (its
-- memory would otherwise count against CPUs it does not offer, its zero halve the node size)
running AS (
    SELECT * FROM latest
    WHERE node_id NOT IN (SELECT node_id FROM latest WHERE capacity <= 0)
)
SELECT cluster || '/' || pool || '/' || resource AS unique_id,
       sum(capacity) AS capacity, median(capacity) AS units_per_node, count(*) AS nodes
FROM running
GROUP BY ALL
ORDER BY unique_id
"""

# this month's tuned splits, oldest first (the newest run that re-tuned a pool's split wins)
TUNED_SPLITS_SQL = """
SELECT run_id, key, payload FROM recommendations
WHERE kind = 'allocation' AND key LIKE '%/tuned'
  AND strftime(data_cutoff, '%Y-%m') = ?
ORDER BY data_cutoff, created_at, run_id
"""


@dataclass(frozen=True)
class PlanInputs:
    """Everything :func:`planner.make_plan` reads."""

    history: pd.DataFrame
    forecast: pd.DataFrame
    capacity: pd.DataFrame
    catalog: pd.DataFrame
    data_cutoff: pd.Timestamp | None
    spot_prices: pd.DataFrame | None = None  # change events, for the spot recommendation
    spike_probabilities: pd.DataFrame | None = None  # latest p_spike per spot market
    recent: pd.DataFrame | None = None  # each series at its own resolution, for the pre-scaling margin
    lookback_days: int | None = None  # the demand history the plan priced

    @property
    def run_id(self) -> str:
        return f"plan-{self.data_cutoff:%Y%m%dT%H%M}" if self.data_cutoff is not None else "plan-empty"


def load_inputs(con: duckdb.DuckDBPyConnection, lookback_days: int = 28,
                calibration: str = PrescalePolicy().calibration) -> PlanInputs:
    """Demand history, the champions' latest forecasts, running capacity and the catalog."""
    history = demand.load_recent_demand(con, lookback_days)
    forecast = warehouse.query(con, CHAMPION_FORECASTS_SQL)
    if forecast.empty:
        forecast = warehouse.query(con, LATEST_RUN_FORECASTS_SQL)
    capacity = warehouse.query(con, CAPACITY_SQL)
    catalog = warehouse.query(con, "SELECT * FROM instance_catalog ORDER BY provider, region, instance_type")
    cutoff = pd.Timestamp(history["ds"].max()) if not history.empty else None
    # spot prices as of the data cutoff, so a plan run is the same whenever it is re-run
    spot = detection.spot_prices(con)
    if cutoff is not None:
        if not spot.empty and spot["ts"].min() > cutoff:  # else a spot plan vanished without a word
            log.warning("spot prices start at %s, after the data's end %s: no spot plan", spot["ts"].min(), cutoff)
        spot = spot[spot["ts"] <= cutoff]
    probs = None
    if not spot.empty:
        # the detect flow's spike model (its default horizon) rates each market's next hours
        model = detection.latest_spike_model(con, SpikePolicy())
        try:
            if model is not None and (cutoff is None or spot["ts"].min() <= cutoff):
                probs = market_probabilities(model, spot, detection.on_demand(con), SpikePolicy(), at=cutoff)
        except (SpikeGridTooLarge, NoGridStep) as exc:
            log.warning("spot markets not rated for spikes: %s", exc)
    recent = demand.recent_at_resolution(con, pd.Timedelta(calibration))
    return PlanInputs(history, forecast, capacity, catalog, cutoff, spot, probs, recent, lookback_days)


def spot_markets(inputs: PlanInputs, lookback: str) -> pd.DataFrame | None:
    """Each spot market's price over the ``lookback`` before the data cutoff
    (:func:`planner.spot.market_stats`), or None without spot prices in that window."""
    spot = inputs.spot_prices
    if spot is None or spot.empty:
        return None
    if not (spot["price"] > 0).any():  # 0 is a placeholder (the last real price holds): none here
        log.warning("every spot price is 0, which reads as no price: no spot plan")
        return None
    if inputs.data_cutoff is not None and spot["ts"].max() < inputs.data_cutoff - pd.Timedelta(lookback):
        log.warning("spot prices end at %s, before the last %s of the data: no spot plan", spot["ts"].max(),
                    lookback)
        return None
    return market_stats(spot, lookback, on_demand=inputs.catalog, end=inputs.data_cutoff)


def kept_splits(con: duckdb.DuckDBPyConnection, inputs: PlanInputs, fill: str = "layered") -> dict[str, Split]:
    """Splits already tuned this month, per series: re-tuning is monthly. A series whose
    newest tuning is this very run's (a re-run, or a plain run after ``plan --retune`` on the
    same data) is left out: the run tunes it again, to the same split, so re-running any
    plan leaves the same rows and a retune is not undone by an earlier run's split. So is one
    tuned under another ``fill`` rule (rows without one were proportional): a split means
    other machines under each; and one tuned on another ``lookback_days``."""
    if inputs.data_cutoff is None:
        return {}
    rows = warehouse.query(con, TUNED_SPLITS_SQL, [f"{inputs.data_cutoff:%Y-%m}"])
    newest: dict[str, tuple] = {}  # series: (run, split, tuned on a shift)
    fills: dict[str, str] = {}
    for run_id, key, payload in zip(rows["run_id"], rows["key"], rows["payload"]):
        p = json.loads(payload)
        # a split tuned on another span of history (a `plan --lookback-days 2` to look) is not
        # this run's month: it neither stands for it nor hides the one that does
        seen = p.get("window_days", p.get("lookback_days", inputs.lookback_days))  # (older rows: lookback_days)
        if p.get("shift_days") is None and inputs.lookback_days is not None and seen != inputs.lookback_days:
            continue
        # the run that tuned it, not one that kept an earlier split (runs written before
        # tuned_this_run existed said so with retuned)
        if p.get("tuned_this_run", p.get("retuned")):
            newest[key.rsplit("/", 1)[0]] = (run_id, Split(p["private"], p["public"], p["edge"]),
                                             p.get("shift_days") is not None)
            fills[key.rsplit("/", 1)[0]] = p.get("fill", "proportional")
    # a split tuned on the few days since a level shift is not the month's: the next run tunes again
    newest = {uid: (run_id, split) for uid, (run_id, split, shifted) in newest.items() if not shifted}
    other = sorted(uid for uid in newest if fills[uid] != fill)
    if other:
        log.warning("this month's split of %s was tuned under fill = %r, not %r: re-tuned", ", ".join(other),
                    fills[other[0]], fill)
    return {uid: split for uid, (run_id, split) in newest.items() if run_id != inputs.run_id and uid not in other}


def _clean(value: object) -> object:
    if isinstance(value, float):  # + 0.0: a value that rounds to -0.0 is stored as 0.0
        return None if math.isnan(value) else round(value, 6) + 0.0
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    if hasattr(value, "item"):  # numpy scalars
        return _clean(value.item())
    return value


def recommendation_rows(plan: dict[str, pd.DataFrame], inputs: PlanInputs) -> pd.DataFrame:
    """The ``recommendations`` rows of one plan run: one per (kind, key), payload as JSON."""
    keys = {
        "allocation": lambda r: f"{r['unique_id']}/{r['plan']}",
        "reservation": lambda r: f"{r['unique_id']}/{r['instance_type']}/{r['term']}",
        "prescale": lambda r: f"{r['unique_id']}/{pd.Timestamp(r['ts']):%Y-%m-%dT%H:%M}",
        "spot": lambda r: f"{r['unique_id']}/spot",
        "unplanned": lambda r: f"{r['unique_id']}/{r['not_planned']}",
    }
    rows = []
    for kind, frame in plan.items():
        for rec in frame.to_dict("records"):
            payload = {k: _clean(v) for k, v in rec.items() if k != "model_id"}
            # the run's window; lookback_days, what the row was priced on, where the planner says
            # (fewer days of history, or the days since a level shift), else the window
            payload["window_days"] = inputs.lookback_days
            if payload.get("lookback_days") is None:
                payload["lookback_days"] = inputs.lookback_days
            model_id = rec.get("model_id")
            rows.append({
                "run_id": inputs.run_id, "kind": kind, "key": keys[kind](rec),
                "payload": json.dumps(payload, sort_keys=True),
                "model_id": None if model_id is None or pd.isna(model_id) else str(model_id),
                "data_cutoff": inputs.data_cutoff, "created_at": inputs.data_cutoff,
            })
    return pd.DataFrame(rows, columns=["run_id", "kind", "key", "payload", "model_id", "data_cutoff", "created_at"])


def save_plan(con: duckdb.DuckDBPyConnection, rows: pd.DataFrame, run_id: str) -> int:
    """Replace the run's recommendations in one transaction (a re-run leaves the same rows)."""
    with warehouse.transaction(con):
        con.execute("DELETE FROM recommendations WHERE run_id = ?", [run_id])
        return warehouse.upsert(con, "recommendations", rows) if not rows.empty else 0


def current_text(row: dict) -> str:
    """``; the running fleet as private machines: $1,234/month`` (same demand), or '' when unknown."""
    cost = row.get("current_fleet_cost")
    return "" if cost is None or pd.isna(cost) else f"; the running fleet as private machines: {money(cost)}/month"


def summarize(plan: dict[str, pd.DataFrame], inputs: PlanInputs, written: int) -> dict:
    """What the plan flow returns: run, row counts and the tuned split per pool."""
    alloc = plan["allocation"]
    shares = ["private", "public", "edge"]
    tuned = alloc.loc[alloc["plan"] == "tuned"] if not alloc.empty else alloc
    if not tuned.empty:  # kept_default: the split is the default one (the tuner did not move it)
        tuned = tuned.assign(kept_default=~tuned["retuned"].astype(bool))
    cols = ["unique_id", *shares, "monthly_cost", "savings_vs_default", "expected_savings", "tuned_this_run",
            "retuned", "kept_default", "current_fleet_cost"]
    spot = plan.get("spot", pd.DataFrame())
    headlines = [] if alloc.empty or "recommended" not in alloc else [
        {"unique_id": r["unique_id"], "plan": r["plan"], "monthly_cost": r["monthly_cost"],
         "text": r["headline"]}
        for r in alloc[alloc["recommended"].astype(bool)].to_dict("records")]
    spot_cols = ["unique_id", "action", "zone", "instance_type", "discount", "p_spike", "expected_monthly_saving",
                 "reason"]
    return {
        "run_id": inputs.run_id,
        "data_cutoff": str(inputs.data_cutoff),
        "rows": {k: len(v) for k, v in plan.items()} | {"written": written},
        "allocation": [] if tuned.empty else tuned[cols].to_dict("records"),
        "headline": headlines,
        "spot": [] if spot.empty else spot[spot_cols].to_dict("records"),
        # what the plan left out of a series, and why (the log's warnings, as data)
        "unplanned": plan.get("unplanned", pd.DataFrame()).to_dict("records"),
    }


def split_text(row: dict) -> str:
    """How a pool's split (a ``summarize`` row) was chosen, in words."""
    if row["tuned_this_run"]:
        return "re-tuned now" if row["retuned"] else "tuned now: the default split kept, no other saves enough"
    return ("this month's re-tuned split, kept" if row["retuned"]
            else "this month's split, the default, kept")


def saving_text(savings: float, expected: float | None = None) -> str:
    """A monthly saving against the default split, in words (it can be negative: the split is
    chosen on the mean over demand scenarios, ``expected``, the saving is priced on the demand
    path; a kept split, or a default that cannot be bought, can cost more in both)."""
    if round(savings) >= 0:
        return f"saves {money(savings)}/month vs the default split"
    across = "" if expected is None or not math.isfinite(expected) else (
        " (less across the scenarios)" if round(expected) >= 0 else " (more across the scenarios too)")
    return f"costs {money(-savings)}/month more than the default split on this demand{across}"


def spot_text(spot: dict) -> str:
    """A pool's spot recommendation (a ``summarize`` row), in words."""
    if spot["action"] != "use_spot":
        return "interruptible share stays on on-demand" + (f": {spot['reason']}" if spot.get("reason") else "")
    p = "not rated for spikes" if pd.isna(spot["p_spike"]) else f"p(spike) {spot['p_spike']:.2f}"
    return (f"interruptible share on spot {spot['instance_type']} in {spot['zone']}, {spot['discount']:.0%} "
            f"below on-demand, {p}, saves {money(spot['expected_monthly_saving'])}/month")
