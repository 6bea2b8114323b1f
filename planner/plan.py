"""One planning pass over a fleet: allocation, reservations and pre-scaling per pool.

Pure: it takes the demand history, the latest forecasts, the running capacity and the
instance catalog as DataFrames and returns one DataFrame per recommendation kind.

A pool is a ``cluster/pool`` pair; it is planned on its primary resource (GPUs when it
has any, else vCPUs), since memory and the host CPUs of GPU nodes come with the machine.
"""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from planner.allocation import (
    DEFAULT_SPLIT,
    RUNNING_FLEET,
    AllocationPolicy,
    Split,
    allowed,
    current_fleet_cost,
    current_fleet_parts,
    elastic_cost,
    fleet_spill,
    kept_plans,
    out_of_sample,
    public_load,
    saving,
    scenario_cost,
    tune_split,
    unbought,
)
from planner.cost import (
    LOCATIONS,
    CostPolicy,
    Offer,
    OfferPolicy,
    continent,
    named_for,
    public_choices,
    qualifying_offers,
    reference_offer,
    select_offers,
)
from planner.prescale import PrescalePolicy, prescale_schedule
from planner.recommend import recommend
from planner.reservations import ReservationPolicy, recommend_reservations
from planner.shift import hourly_level, level_shift, trend
from planner.spot import SPOT_COLUMNS, SpotPolicy, on_demand_rest, recommend_spot
from planner.validation import require_columns

log = logging.getLogger(__name__)

# The pre-scale schedule starts from the capacity the pool's nodes report at the data cutoff and
# moves it by whole instances (see instance_units), for the pool's whole forecast demand: it
# scales the fleet as it runs, not one location of the recommended split (where private and edge
# are bought for the month and public on-demand follows the load in its own instance type).
PRESCALE_APPLIES_TO = "pool nodes (whole demand, not split)"


@dataclass(frozen=True)
class PlanPolicy:
    """Every planner knob in one place."""

    costs: CostPolicy = field(default_factory=CostPolicy)
    offers: OfferPolicy = field(default_factory=OfferPolicy)
    allocation: AllocationPolicy = field(default_factory=AllocationPolicy)
    reservations: ReservationPolicy = field(default_factory=ReservationPolicy)
    prescale: PrescalePolicy = field(default_factory=PrescalePolicy)
    spot: SpotPolicy = field(default_factory=SpotPolicy)
    default_split: Split = DEFAULT_SPLIT


def _same_split(row: dict, split: Split) -> bool:
    """Whether an allocation row's shares are ``split``'s."""
    return all(abs(float(row[loc]) - split.share(loc)) < 1e-9 for loc in LOCATIONS)


def primary_series(capacity: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``capacity`` (``unique_id = cluster/pool/resource``) that a pool is planned on."""
    require_columns(capacity, ["unique_id", "capacity", "units_per_node"], "capacity")
    ids = capacity["unique_id"].astype(str)
    cap = capacity[ids.str.contains("/", regex=False)]
    if cap.empty:
        return cap.assign(pool_id=pd.Series(dtype=str), resource=pd.Series(dtype=str))
    parts = cap["unique_id"].astype(str).str.rsplit("/", n=1, expand=True)
    cap = cap.assign(pool_id=parts[0], resource=parts[1])
    rank = cap["resource"].map({"gpu": 0, "cpu": 1}).fillna(9)
    cap = cap.assign(_rank=rank)[rank < 9].sort_values(["pool_id", "_rank"])
    return cap.groupby("pool_id", sort=True).head(1).drop(columns="_rank").reset_index(drop=True)


def memory_per_vcpu(capacity: pd.DataFrame, pool_id: str) -> float | None:
    """GiB of memory per vCPU of a pool's running nodes (its ``mem`` over its ``cpu``
    capacity), None when it does not report both."""
    cap = capacity.set_index(capacity["unique_id"].astype(str))["capacity"]
    mem, cpu = cap.get(f"{pool_id}/mem"), cap.get(f"{pool_id}/cpu")
    if mem is None or cpu is None or not np.isfinite(mem) or not np.isfinite(cpu) or cpu <= 0 or mem <= 0:
        return None
    return float(mem) / float(cpu)


def offer_fit(offers: OfferPolicy, capacity: pd.DataFrame, pool_id: str, resource: str, peak: float) -> tuple:
    """:func:`planner.cost.select_offers`' arguments after ``pool`` for a pool: the policy's
    ratios and regions, its nodes' memory per vCPU (CPU pools), instances up to the size
    ratio of its ``peak`` demand."""
    ratio = offers.max_size_ratio
    return (offers.min_tflops_ratio, offers.min_memory_ratio, offers.regions,
            memory_per_vcpu(capacity, pool_id) if resource == "cpu" else None, offers.any_region,
            None if ratio is None else ratio * max(float(peak), 0.0))


def instance_units(catalog: pd.DataFrame, resource: str, pool: str, node_units: float,
                   policy: PrescalePolicy) -> float | None:
    """The units one pre-scaling step adds: the catalog machine named for the pool, else the
    policy's ``instance_units``, else the pool's node size (None when none is known)."""
    if not catalog.empty:
        own = catalog[(catalog["resource"] == resource) & (catalog["location"] == "private") & (catalog["units"] > 0)
                      & catalog["instance_type"].map(lambda t: named_for(t, pool)).astype(bool)]
        if not own.empty:
            return float(own["units"].iloc[0])
    if policy.instance_units is not None:
        return float(policy.instance_units)
    return float(node_units) if np.isfinite(node_units) and node_units > 0 else None


def offer_names(offers: dict) -> str:
    """Which machine each location is priced on, ``location: provider/region/instance_type``."""
    return "; ".join(f"{loc}: {o.provider}/{o.region}/{o.instance_type}" for loc, o in sorted(offers.items()))


def future_forecast(history: pd.DataFrame, forecast: pd.DataFrame, uid: str) -> pd.DataFrame:
    """The forecast rows of ``uid`` after its last observed hour (a forecast made before the
    data cutoff has hours that are past already), with finite values."""
    f = forecast.loc[forecast["unique_id"] == uid]
    last = history.loc[history["unique_id"] == uid, "ds"].max()
    if pd.notna(last):
        f = f.loc[f["ds"] > last]
    numeric = f.select_dtypes("number")
    return f.loc[np.isfinite(numeric.to_numpy(dtype=float)).all(axis=1)].sort_values("ds")


def demand_path(history: pd.DataFrame, forecast: pd.DataFrame, uid: str) -> np.ndarray:
    """Hourly demand of ``uid``: its (finite) history, then the forecast mean beyond it."""
    h = history.loc[history["unique_id"] == uid].sort_values("ds")["y"].to_numpy(dtype=float)
    f = future_forecast(history, forecast, uid)["mean"].to_numpy(dtype=float)
    return np.concatenate([h[np.isfinite(h)], f])


CATALOG_REMEDY = "ingest a catalog with one: headroom ingest --kind catalog"


def _why_no_offer(catalog: pd.DataFrame, resource: str, pool: str, fit: tuple,
                  regions: tuple[str, ...] | None) -> tuple[str, str]:
    """What keeps the public offers out, and what to do about it, for the warning; ``fit`` is
    :func:`select_offers`'s arguments after ``pool``."""
    if catalog.empty:
        return " (the catalog is empty)", CATALOG_REMEDY
    ref = reference_offer(catalog, resource, pool)
    if ref is None and resource == "gpu" and (catalog["resource"] == "gpu").any():
        return (f" (the catalog has no private machine for GPU pool {pool!r}, so its GPU model, and which GPUs can "
                "do its work, is unknown)"), f"add the fleet's own machine as a private row named {pool}-...; " \
            + CATALOG_REMEDY
    if ref is None:
        return f" (the catalog has no priced {resource} offer)", CATALOG_REMEDY
    if resource == "gpu" and not (float(ref.get("tflops", np.nan) or np.nan) > 0):
        return (f" (the pool's machine {ref['instance_type']} has no TFLOPS in the catalog, so no other GPU can be "
                "compared with it)"), CATALOG_REMEDY
    anywhere = (*fit[:2], None, fit[3], True, *fit[5:])
    if regions is not None and "public" in select_offers(catalog, resource, pool, *anywhere):
        return (f" in the regions the planner config allows ({', '.join(regions)}), though the catalog has one "
                "elsewhere"), "widen [offers] regions"
    return "", CATALOG_REMEDY


def own_machine_priced(catalog: pd.DataFrame, resource: str, pool: str, uid: str) -> bool:
    """Whether the pool's running machines can be priced. Warns when the catalog names no
    private machine for the pool (an instance type starting with its name), as they are then
    priced as another machine, and returns False when it names one without a price."""
    ref = None if catalog.empty else reference_offer(catalog, resource, pool)
    if ref is None:  # no offer at all: the no-offer warning says so
        return True
    if ref["location"] == "private" and named_for(ref["instance_type"], pool):
        if float(ref["on_demand_price"]) > 0:
            return True
        log.warning("%s: the pool's own machine %s has no price in the instance catalog (0 or none reads as "
                    "unknown), so neither the running fleet nor a private share can be priced: no allocation or "
                    "reservation (give its amortised price per hour; %s)", uid, ref["instance_type"], CATALOG_REMEDY)
        return False
    if ref["location"] != "private":
        log.warning("%s: the instance catalog has no private machine for pool %r: the running fleet cannot be priced "
                    "(%s)", uid, pool, CATALOG_REMEDY)
        return True
    log.warning("%s: the instance catalog names no private machine for pool %r (an instance type starting with it): "
                "its machines are priced as %s/%s/%s, the cheapest private offer", uid, pool, ref["provider"],
                ref["region"], ref["instance_type"])
    return True


SHORT_HISTORY_HOURS = 24 * 7
# a series the plan leaves out, wholly ("all") or of one kind ("allocation": and its reservations
# and spot; "prescale"), and why: the report and the exports name it, as the log does
UNPLANNED_COLUMNS = ["unique_id", "resource", "not_planned", "reason"]


def _allocate(uid: str, resource: str, path: np.ndarray, hist: np.ndarray, capacity: float, kept: Split | None,
              offers: dict[str, Offer], policy: PlanPolicy) -> pd.DataFrame:
    """A pool's allocation rows (:func:`recommend`'s): the tuned split (or this month's
    ``kept`` one, re-priced), the default and the running fleet, on the demand ``path``."""
    if kept is None:
        alloc = tune_split(path, offers, policy.costs, policy.allocation, policy.default_split)
    else:  # this month's split stands (re-tuning is monthly): price it on today's demand
        alloc = kept_plans(path, policy.default_split, kept, offers, policy.costs, policy.allocation)
    alloc.insert(0, "unique_id", uid)
    alloc.insert(1, "resource", resource)
    # tuned_this_run: this run searched the splits (the month's first run, or --retune);
    # False: this month's earlier choice is kept and only re-priced.
    alloc["tuned_this_run"] = kept is None
    alloc["fill"] = policy.allocation.fill  # how the split's machines take their share
    # retuned: the row's split is not the default (the tuner moved it, now or earlier this
    # month); the default row, and a tuned row that kept the default, are not re-tuned
    alloc["retuned"] = [not _same_split(r, policy.default_split) for r in alloc.to_dict("records")]
    alloc["offers"] = offer_names(offers)
    # the reference a bill payer compares with: the running capacity as it is
    parts = current_fleet_parts(path, capacity, offers, policy.costs)
    current = None if parts is None else parts["monthly_cost"]
    alloc["current_fleet_cost"] = np.nan if current is None else current
    if current is not None:  # the fleet as it runs, priced on the same demand: a plan to beat
        base = float(alloc.loc[alloc["plan"] == "default_3_5_2", "monthly_cost"].iloc[0])
        # over the same demand scenarios the split is chosen on (None: a scenario spills with no offer)
        fleet = [current_fleet_cost(path * m, capacity, offers, policy.costs)
                 for m in policy.allocation.scenarios]
        default_mean = scenario_cost(path, policy.default_split, offers, policy.costs, policy.allocation)
        alloc = pd.concat([alloc, pd.DataFrame([{
            "unique_id": uid, "resource": resource, "plan": RUNNING_FLEET, "private": 1.0, "public": 0.0,
            "edge": 0.0, **parts,  # monthly_cost and its parts, as the splits' rows give them
            "savings_vs_default": saving(base, current),
            "expected_savings": np.nan if None in fleet else saving(default_mean, float(np.mean(fleet))),
            "tuned_this_run": kept is None, "retuned": False, "offers": alloc["offers"].iloc[0],
            "current_fleet_cost": current}])], ignore_index=True)
    oos = out_of_sample(hist, offers, policy.costs, policy.allocation, policy.default_split)
    for k, v in (oos or {}).items():  # on the tuned row: what its re-tune is worth out of sample
        alloc.loc[alloc["plan"] == "tuned", k] = v
    return recommend(alloc, policy.allocation, offers)


def _gone(mine: pd.DataFrame, fc: pd.DataFrame) -> bool:
    """Whether a pool's demand (``ds, y``) was nothing over its last day of readings and its
    forecast ahead (``mean``, when there is one) is nothing too."""
    if mine.empty:
        return False
    last = mine.loc[mine["ds"] > mine["ds"].max() - pd.Timedelta(days=1), "y"].to_numpy(dtype=float)
    ahead = fc["mean"].to_numpy(dtype=float) if "mean" in fc else np.array([])
    return bool(np.nan_to_num(np.concatenate([last, ahead])).max(initial=0.0) <= 1e-9)


def _recommended_load(alloc: pd.DataFrame, path: np.ndarray, capacity: float, offers: dict[str, Offer],
                      policy: PlanPolicy, at: float = 1.0) -> np.ndarray:
    """The hourly load the recommended plan of ``alloc`` runs on public on-demand (with ``at``:
    if demand came in at ``at`` times ``path``, on the machines bought for it)."""
    best = alloc.loc[alloc["recommended"]].iloc[0]
    if best["plan"] == RUNNING_FLEET:
        return fleet_spill(path * at, capacity, offers)
    return public_load(path, Split(float(best["private"]), float(best["public"]), float(best["edge"])), offers,
                       policy.allocation, at=at)


def cheapest_public(load: np.ndarray, choices: list[Offer], costs: CostPolicy, current: Offer) -> Offer:
    """Of ``choices``, the machine that carries ``load`` for least in whole instances (ties:
    the smaller machine, then ``current``, the cheapest per unit; no choices: ``current``).
    At one price per unit, as a cloud prices one family's sizes, the smaller follows the load
    closer: a spot share smaller than one big machine can still take whole small ones."""
    def cost(o: Offer) -> tuple[float, float]:
        c = elastic_cost(load, o, costs)
        return round(c["compute"] + c["idle_penalty"], 6), o.units
    return min([current, *choices], key=cost)


def make_plan(
    history: pd.DataFrame,
    forecast: pd.DataFrame,
    capacity: pd.DataFrame,
    catalog: pd.DataFrame,
    policy: PlanPolicy = PlanPolicy(),
    splits: dict[str, Split] | None = None,
    spot_markets: pd.DataFrame | None = None,
    spike_probabilities: pd.DataFrame | None = None,
    recent: pd.DataFrame | None = None,
) -> dict[str, pd.DataFrame]:
    """Recommendations by kind (``allocation``, ``reservation``, ``prescale`` and, with
    ``spot_markets``, ``spot``), each with a ``unique_id`` column naming the planned series,
    and ``unplanned``: what was left out of the plan for a series, and why.

    ``splits`` holds this month's tuned split per series, when it was tuned already: the
    split is then kept (re-tuning is monthly) and only re-priced on the new demand.
    ``spot_markets`` (:func:`planner.spot.market_stats`) and ``spike_probabilities`` (the
    latest ``p_spike`` per market) let the interruptible share of the public load go to
    spot; reservations then cover only the rest. ``recent`` (``unique_id, ds, y`` at the data's
    own resolution over the pre-scaling calibration window) sets the pre-scaling margin.
    """
    require_columns(history, ["unique_id", "ds", "y"], "demand history")
    require_columns(forecast, ["unique_id", "ds", "mean"], "forecast")
    splits = splits or {}
    with_spot = spot_markets is not None and not spot_markets.empty
    out: dict[str, list[pd.DataFrame]] = {"allocation": [], "reservation": [], "prescale": [], "spot": []}
    skipped: list[dict] = []  # what is not planned for a series, and why (the plan's "unplanned" rows)

    def skip(uid: str, what: str, why: str) -> None:
        skipped.append({"unique_id": uid, "resource": uid.rpartition("/")[2], "not_planned": what, "reason": why})
    pools = primary_series(capacity)
    # every pool the data name that is not planned is named once, with why
    planned = set(pools["pool_id"])
    forecast_ids = set(forecast["unique_id"].astype(str))
    unplanned: dict[str, set[str]] = {}
    for uid in forecast_ids | set(history["unique_id"].astype(str)) | set(capacity["unique_id"].astype(str)):
        pool_id, _, resource = uid.rpartition("/")
        if pool_id and pool_id not in planned:
            unplanned.setdefault(pool_id, set()).add(resource)
    for pool_id, resources in sorted(unplanned.items()):
        primary = [r for r in ("gpu", "cpu") if r in resources]  # as primary_series ranks them: gpu first
        if primary:
            uid = f"{pool_id}/{primary[0]}"
            log.warning("%s: %s, but no running capacity (its nodes did not report near the data cutoff, or report "
                        "capacity 0: drained): not planned", uid, "forecast" if uid in forecast_ids else "demand")
            skip(uid, "all", "no running capacity: its nodes did not report near the data cutoff, or report "
                             "capacity 0 (drained)")
        else:
            log.warning("%s: reports only %s, no gpu or cpu series to plan on: not planned", pool_id,
                        ", ".join(sorted(resources)))
            skip(f"{pool_id}/{sorted(resources)[0]}", "all",
                 f"reports only {', '.join(sorted(resources))}: no gpu or cpu series to plan on")
    nowhere = set()  # resources whose own machines' regions name no continent: said once each
    for row in pools.itertuples(index=False):
        uid, resource = row.unique_id, row.resource
        if policy.offers.regions is None and not policy.offers.any_region and resource not in nowhere:
            # as qualifying_offers reads the fleet's home: the regions of its private machines of the resource
            own = catalog.loc[(catalog["location"] == "private") & (catalog["resource"] == resource), "region"]
            if not any(continent(r) for r in own.astype(str)):
                nowhere.add(resource)
                where = (f"the fleet's own {resource} machines are in {', '.join(sorted(set(own.astype(str)))[:3])}, "
                         "of no continent headroom knows" if len(own)
                         else f"the catalog has no private {resource} machine to say where the fleet is")
                log.warning("%s: public offers and spot markets from any region qualify (set [offers] regions in the "
                            "plan config to keep them near)", where)
        pool = row.pool_id.split("/")[-1]
        mine = history.loc[history["unique_id"] == uid].sort_values("ds")
        shift = level_shift(mine["ds"], mine["y"].to_numpy(dtype=float))
        basis, notes = history, []
        path = demand_path(history, forecast, uid)
        if shift is not None:  # the month is priced on the days at the new level, not the weeks before,
            # nor on a forecast that learnt mostly those weeks
            log.warning("%s: %s: planned on the days since", uid, shift.text())
            basis = history.loc[(history["unique_id"] != uid) | (history["ds"] > shift.cut)]
            notes.append(f"sized on the {shift.days} day(s) since {shift.change()}")
            since = mine.loc[mine["ds"] > shift.cut, "y"].to_numpy(dtype=float)
            path = since[np.isfinite(since)]
        # a steady rise or fall is said, and a falling pool reserves nothing; the month stays priced
        # on the window (on Bitbrains VMs the next week was nearer the window's level than the last
        # week's 5 times in 8: benchmarks/level_shifts.py), while a commitment outlives the fall
        steady = trend(mine["ds"], mine["y"].to_numpy(dtype=float)) if shift is None else None
        if steady is not None:
            log.warning("%s: %s", uid, steady.text())
            notes.append(f"{steady.text()}; priced on the window" + ("; no reservation while it falls"
                                                                     if steady.tau < 0 else ""))
        if path.size == 0 or not np.nanmax(path) > 0:  # (zeros too: nothing to split, buy or schedule)
            log.warning("%s: no demand, not planned", uid)
            skip(uid, "all", "no demand in the lookback" + (" nor in the forecast ahead" if path.size else ""))
            continue
        fit = offer_fit(policy.offers, capacity, row.pool_id, resource, float(np.nanmax(path)))
        offers = select_offers(catalog, resource, pool, *fit)
        seen = int(np.isfinite(basis.loc[basis["unique_id"] == uid, "y"].to_numpy(dtype=float)).sum())
        fc = future_forecast(history, forecast, uid)  # the forecast after the pool's last hour, read once
        # what the rows say they stand on: the days of history priced, and the forecast's hours after them
        basis_of = {"lookback_days": shift.days if shift is not None else max(round(seen / 24), 1),
                  "forecast_hours": 0 if shift is not None else len(fc)}
        if seen < SHORT_HISTORY_HOURS:
            log.warning("%s: %d hour(s) of demand %s: its monthly costs extrapolate from them, and no reservation "
                        "is recommended on them", uid, seen, "at this level" if shift else "history")
            notes.append(f"on {seen / 24:.1f} day(s) of demand{' at this level' if shift else ''}, extrapolated to the "
                         f"month; no reservation until it has held {SHORT_HISTORY_HOURS // 24} days")
        priced = own_machine_priced(catalog, resource, pool, uid)
        if priced and "public" in offers:
            kept = None if shift is not None else splits.get(uid)  # demand moved: this month's split is re-tuned
            # the default is kept as the tuned split when no other saves enough, in bounds or not
            # (and no split, kept or default, with a share where no offer fits the pool any more)
            lost = kept is not None and bool(unbought(asdict(kept), offers))
            if kept is not None and (lost or not _same_split(asdict(kept), policy.default_split) and not allowed(
                    kept, policy.allocation, tuple(offers))):
                log.warning("%s: this month's split %s is not one the plan allows now (the config's bounds or step, "
                            "or the offers that fit the pool, changed): re-tuned", uid, kept.label())
                kept = None
            hist = basis.loc[basis["unique_id"] == uid].sort_values("ds")["y"].to_numpy(dtype=float)
            hist = hist[np.isfinite(hist)]
            choices = public_choices(qualifying_offers(catalog, resource, pool, *fit))
            # public's machine is the cheapest in whole instances for the load public carries: first
            # the kept (or default) split's, then, if the recommended plan's load prefers another, once more
            offers["public"] = cheapest_public(
                public_load(path, kept or policy.default_split, offers, policy.allocation), choices, policy.costs,
                offers["public"])
            alloc = _allocate(uid, resource, path, hist, float(row.capacity), kept, offers, policy)
            better = cheapest_public(_recommended_load(alloc, path, float(row.capacity), offers, policy), choices,
                                     policy.costs, offers["public"])
            if better != offers["public"]:
                offers["public"] = better
                alloc = _allocate(uid, resource, path, hist, float(row.capacity), kept, offers, policy)
            if notes:  # what the figures stand on, where a reader of the headline sees it
                top = alloc["recommended"].astype(bool)
                alloc.loc[top, "headline"] = alloc.loc[top, "headline"] + f" ({'; '.join(notes)})"
            if shift is not None:  # a split tuned on the days since is re-tuned by the next run
                alloc["shift_days"] = shift.days
            alloc = alloc.assign(**basis_of)
            out["allocation"].append(alloc)
            # reservations and spot cover what the recommended plan runs on public: what a split's
            # private and edge machines leave, or what exceeds the running fleet
            best = alloc.loc[alloc["recommended"]].iloc[0]
            load = _recommended_load(alloc, path, float(row.capacity), offers, policy)
            if with_spot:
                public_rows = qualifying_offers(catalog, resource, pool, *fit)
                spot = recommend_spot(uid, resource, load, public_rows[public_rows["location"] == "public"],
                                      spot_markets, spike_probabilities, policy.costs, policy.spot,
                                      offers["public"])
                out["spot"].append(pd.DataFrame([spot], columns=SPOT_COLUMNS, dtype=object).assign(**basis_of))
                if spot["action"] == "use_spot":  # reserve only what stays on on-demand (spot: whole machines)
                    load = on_demand_rest(load, policy.spot.interruptible_share, float(spot["pool_units"]))
            low = min(policy.allocation.scenarios)
            downside = None
            if low < 1:  # the public load, and what spot leaves of it, if demand comes in lower
                fall = _recommended_load(alloc, path, float(row.capacity), offers, policy, at=low)
                if with_spot and spot["action"] == "use_spot":
                    fall = on_demand_rest(fall, policy.spot.interruptible_share, float(spot["pool_units"]))
                downside = (low, fall)
            # no commitment on under a week of demand at its level, nor on demand that keeps falling,
            # nor on a pool with no demand in its last day that the forecast does not bring back
            # (a drain or a job that ended: the level shift needs two days to tell)
            gone = _gone(mine, fc)
            if gone:
                log.warning("%s: no demand in its last day nor in the forecast ahead: no reservation", uid)
            res = (recommend_reservations(load, offers["public"], policy.costs, policy.reservations, downside)
                   if seen >= SHORT_HISTORY_HOURS and not (steady is not None and steady.tau < 0) and not gone
                   else pd.DataFrame())
            if not res.empty:
                res.insert(0, "unique_id", uid)
                res.insert(1, "resource", resource)
                res.insert(2, "plan", best["plan"])  # the allocation plan whose public load it covers
                res = res.assign(**basis_of)
                out["reservation"].append(res)
        elif priced:
            why, remedy = _why_no_offer(catalog, resource, pool, fit, policy.offers.regions)
            log.warning("%s: no priced public %s offer in the instance catalog that can run it%s: no allocation "
                        "or reservation (%s)", uid, resource, why, remedy)
            skip(uid, "allocation", f"no priced public {resource} offer in the instance catalog that can run it{why} "
                                    f"({remedy})")
        else:
            skip(uid, "allocation", "the pool's own machine has no price in the instance catalog: neither the "
                                    f"running fleet nor a private share can be priced ({CATALOG_REMEDY})")
        units = instance_units(catalog, resource, pool, row.units_per_node, policy.prescale)
        if fc.empty:
            log.warning("%s: no forecast beyond the data cutoff, no pre-scale schedule (run headroom train)", uid)
            skip(uid, "prescale", "no forecast beyond the data cutoff (run headroom train)")
        elif units is None:  # one pool never stops the plan
            log.warning("%s: no instance size (units per node %s, no catalog offer), no pre-scale schedule", uid,
                        row.units_per_node)
            skip(uid, "prescale", "no instance size: no catalog offer, and the node size is unknown")
        else:
            near = None if recent is None else recent.loc[recent["unique_id"] == uid]
            floor = None
            if shift is not None and shift.after > shift.before:  # a forecast that learnt the old level lags
                level = hourly_level(mine["ds"], mine["y"].to_numpy(dtype=float), shift.cut)
                floor = pd.to_datetime(fc["ds"]).dt.hour.map(level).to_numpy(dtype=float)
            sched = prescale_schedule(fc, float(row.capacity), units, policy.prescale, recent=near, floor=floor)
            sched.insert(1, "resource", resource)
            # what the schedule sizes: the pool's running capacity for its whole demand, in
            # instances; it does not follow the split (see PRESCALE_APPLIES_TO)
            sched["applies_to"] = PRESCALE_APPLIES_TO
            sched["units_per_instance"] = units
            if "model_id" in fc:
                sched["model_id"] = fc["model_id"].iloc[0]
            sched["lookback_days"] = basis_of["lookback_days"]  # the history it stands on, as the others say
            out["prescale"].append(sched)
    plan = {k: (pd.concat(v, ignore_index=True) if v else pd.DataFrame()) for k, v in out.items()}
    if not with_spot:
        del plan["spot"]
    plan["unplanned"] = pd.DataFrame(skipped, columns=UNPLANNED_COLUMNS)
    return plan
