"""headroom planner: pure capacity-planning core (no I/O).

* :mod:`planner.cost`: the cost model and cost-aware instance selection;
* :mod:`planner.allocation`: the 3-5-2 hybrid split and its cost simulator;
* :mod:`planner.recommend`: the plan recommended among them, and its headline;
* :mod:`planner.reservations`: reserved-capacity recommendations (newsvendor rule);
* :mod:`planner.prescale`: predictive + reactive pre-scaling at the data's resolution;
* :mod:`planner.scaling`: reactive autoscalers and the score of any capacity on demand;
* :mod:`planner.replay`: every strategy replayed on history and scored side by side;
* :mod:`planner.spot`: spot capacity for the interruptible share of the public load;
* :mod:`planner.shift`: level shifts in recent demand, which the plan is sized after.
"""
from planner.allocation import (
    DEFAULT_SPLIT,
    AllocationPolicy,
    Split,
    candidate_splits,
    current_fleet_cost,
    current_fleet_parts,
    price_plans,
    public_load,
    simulate,
    tune_split,
)
from planner.cost import LOCATIONS, CostPolicy, LocationCost, Offer, OfferPolicy, select_offers
from planner.plan import PlanPolicy, make_plan
from planner.prescale import PrescalePolicy, prescale_schedule
from planner.reservations import ReservationPolicy, recommend_reservations
from planner.spot import SpotPolicy, market_stats, recommend_spot

__all__ = [
    "DEFAULT_SPLIT",
    "LOCATIONS",
    "AllocationPolicy",
    "CostPolicy",
    "LocationCost",
    "Offer",
    "PlanPolicy",
    "PrescalePolicy",
    "ReservationPolicy",
    "Split",
    "SpotPolicy",
    "candidate_splits",
    "current_fleet_cost",
    "current_fleet_parts",
    "make_plan",
    "market_stats",
    "prescale_schedule",
    "price_plans",
    "public_load",
    "recommend_reservations",
    "recommend_spot",
    "select_offers",
    "OfferPolicy",
    "simulate",
    "tune_split",
]
