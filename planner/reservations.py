"""Reservation recommendations: how many public-cloud units to commit to for 1 or 3 years.

Public capacity is bought in whole instances, on demand as reserved: an hour that needs
4.5 units of 4-unit instances runs 2 of them (as the allocation's cost simulation bills
it). A reserved instance costs ``r`` per hour whether it runs or not; on demand it would
cost ``o`` per hour, but only in the hours it runs. The ``k``-th instance is worth
reserving when it runs in more than ``r / o`` of the hours, so the best number of reserved
instances is the ``1 - r / o`` quantile of the hourly instance count (the newsvendor rule).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from planner.cost import CostPolicy, Offer

RESERVATION_COLUMNS = [
    "location", "provider", "region", "instance_type", "term", "units_per_instance", "instances",
    "reserved_units", "coverage_quantile", "break_even_utilization", "expected_utilization", "units_utilization",
    "break_even_months", "monthly_cost_reserved", "monthly_cost_on_demand", "monthly_savings", "savings_pct",
    "min_units_used", "mean_units_used", "max_units_used", "payment_option", "upfront_cost",
    "recurring_monthly_cost", "reason",
]
TERM_MONTHS = {"1y": 12, "3y": 36}


@dataclass(frozen=True)
class ReservationPolicy:
    """Which terms to consider and when a reservation is worth recommending."""

    terms: tuple[str, ...] = ("1y", "3y")
    min_monthly_savings: float = 0.0  # recommend only reservations that save more than this


def _term_price(offer: Offer, term: str) -> float | None:
    if term not in ("1y", "3y"):
        raise ValueError(f"unknown reservation term {term!r}; use 1y or 3y")
    return offer.reserved_1y if term == "1y" else offer.reserved_3y


def instances_needed(demand: np.ndarray, units: float) -> np.ndarray:
    """Whole instances of ``units`` each that carry the hourly ``demand``."""
    d = np.clip(np.asarray(demand, dtype=float), 0.0, None)
    return np.ceil(d / units - 1e-9)


def plan_cost(demand: np.ndarray, reserved_units: float, on_demand: float, reserved: float,
              units: float | None = None) -> float:
    """Hourly cost over ``demand``: reserved units always paid, the rest on demand (per unit
    prices). With ``units`` (per instance), capacity comes in whole instances: the hours'
    instance counts beyond the reserved ones run on demand."""
    d = np.clip(np.asarray(demand, dtype=float), 0.0, None)
    if units is not None:
        d = instances_needed(d, units) * units
    return float(reserved_units * reserved * d.size + np.clip(d - reserved_units, 0.0, None).sum() * on_demand)


def best_reserved_instances(counts: np.ndarray, ratio: float) -> int:
    """The number of reserved instances that minimises the cost over the hourly instance
    ``counts`` when a reserved instance costs ``ratio`` of an on-demand one: the ``k``-th
    is worth it while it runs in more than ``ratio`` of the hours."""
    n = np.asarray(counts, dtype=np.int64)
    if n.size == 0 or n.max() < 1:
        return 0
    share_running = np.cumsum(np.bincount(n)[::-1])[::-1] / n.size  # [k]: share of hours with >= k
    return int((share_running[1:] > ratio + 1e-12).sum())


def recommend_reservations(demand: np.ndarray, offer: Offer, costs: CostPolicy,
                           policy: ReservationPolicy = ReservationPolicy(),
                           downside: tuple[float, np.ndarray] | None = None) -> pd.DataFrame:
    """One row per term: the reserved instances and what they save on ``demand`` (hourly
    units that would otherwise run on ``offer``'s whole instances on demand), per month.

    A commitment outlives the month it is sized on: with ``downside`` (a demand multiplier
    below 1 and the load then), no more instances are reserved than still pay at that load.
    Terms without a reserved price in the catalog, and levels of zero instances, give no row.
    """
    d = np.clip(np.asarray(demand, dtype=float), 0.0, None)
    if d.size == 0:
        raise ValueError("recommend_reservations needs a non-empty demand path")
    factors = costs.at(offer.location)
    on_demand = float(factors.effective(offer.unit_price))
    scale = costs.hours_per_month / d.size
    counts = instances_needed(d, offer.units)
    baseline = plan_cost(d, 0.0, on_demand, 0.0, offer.units) * scale
    rows = []
    for term in policy.terms:
        price = _term_price(offer, term)
        if price is None or price <= 0:
            continue
        reserved = float(factors.effective(price / offer.units))
        if reserved >= on_demand:
            continue
        quantile = 1.0 - reserved / on_demand
        instances = best_reserved_instances(counts, reserved / on_demand)
        if downside is not None:  # no more than still pay if demand comes in lower
            instances = min(instances, best_reserved_instances(instances_needed(downside[1], offer.units),
                                                               reserved / on_demand))
        if instances < 1:
            continue
        units = instances * offer.units
        cost = plan_cost(d, units, on_demand, reserved, offer.units) * scale
        savings = baseline - cost
        ratio = reserved / on_demand  # the break-even: the share of its hours a reserved instance must run
        used = float(np.minimum(counts, instances).mean() / instances)  # of the reserved instance-hours
        if savings <= policy.min_monthly_savings or used <= ratio + 1e-12:
            continue
        rows.append({
            "location": offer.location, "provider": offer.provider, "region": offer.region,
            "instance_type": offer.instance_type, "term": term, "units_per_instance": offer.units,
            "instances": instances, "reserved_units": units, "coverage_quantile": quantile,
            "break_even_utilization": ratio, "expected_utilization": used,
            "units_utilization": float(np.minimum(d, units).mean() / units),
            # months of the on-demand spend it replaces that pay for the whole term's commitment
            "break_even_months": TERM_MONTHS[term] * ratio / used,
            "monthly_cost_reserved": cost, "monthly_cost_on_demand": baseline, "monthly_savings": savings,
            "savings_pct": savings / baseline if baseline > 0 else np.nan,
            "min_units_used": float(d.min()), "mean_units_used": float(d.mean()), "max_units_used": float(d.max()),
            # the catalog's reserved price is an hourly rate billed monthly: AWS's "No Upfront"
            "payment_option": "no_upfront", "upfront_cost": 0.0,
            "recurring_monthly_cost": units * reserved * costs.hours_per_month,
            "reason": (f"{instances} x {offer.instance_type} reserved for {term} would run {used:.0%} of their hours, "
                       f"above the {ratio:.0%} that breaks even, and save ${savings:,.0f}/month "
                       f"({savings / baseline:.0%}) against running all of it on demand"
                       + ("" if downside is None else f"; they still pay with demand x {downside[0]:g}")
                       if baseline > 0 else
                       f"{instances} x {offer.instance_type} reserved for {term} run {used:.0%} of their hours"),
        })
    return pd.DataFrame(rows, columns=RESERVATION_COLUMNS)
