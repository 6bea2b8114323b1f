"""The "3-5-2" hybrid-cloud split and the cost simulator that re-tunes it.

A split shares demand between private cloud, public on-demand and edge (30/50/20 by
default). Private and edge capacity is bought for the month and idles when demand is low
(the idle penalty). By default (``fill="layered"``) it carries the bottom of the demand
curve, private first, each sized to carry its share of the month's unit-hours, and public
on-demand, elastic, carries the rest: the peaks. With ``fill="proportional"`` each
location takes its share of every hour, the fixed ones sized to the ``provision_quantile``
of that share, and public also absorbs what they cannot carry. The simulator prices a split
on an hourly demand path with :mod:`planner.cost`; :func:`tune_split` searches the
splits within the policy's bounds for the cheapest one.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from planner.cost import LOCATIONS, CostPolicy, Offer, provisioned_cost
from planner.layers import layered


@dataclass(frozen=True)
class Split:
    """Shares of demand per location; they sum to 1."""

    private: float
    public: float
    edge: float

    def __post_init__(self) -> None:
        shares = (self.private, self.public, self.edge)
        if min(shares) < 0 or abs(sum(shares) - 1.0) > 1e-6:
            raise ValueError(f"split shares must be >= 0 and sum to 1, got {shares}")

    def share(self, location: str) -> float:
        return float(getattr(self, location))

    def label(self) -> str:
        return "-".join(f"{round(10 * self.share(loc), 1):g}" for loc in LOCATIONS)


DEFAULT_SPLIT = Split(0.30, 0.50, 0.20)


@dataclass(frozen=True)
class AllocationPolicy:
    """Search space and sizing rule of the split simulator."""

    step: float = 0.05
    # (min, max) share per location: keep some of each (data locality, latency at the edge,
    # burst capacity in public) so the tuner re-weights the split rather than abandoning it;
    # private keeps at least 30%: the critical load that stays on the fleet's own machines
    bounds: dict[str, tuple[float, float]] = field(default_factory=lambda: {
        "private": (0.30, 0.70), "public": (0.20, 0.80), "edge": (0.05, 0.35)})
    provision_quantile: float = 1.0  # fixed capacity covers this quantile of its hourly share
    # how the fixed locations take their share: "layered", the bottom of the demand curve
    # (private first, then edge; public on-demand carries the rest, the peaks), each sized to
    # carry its share of the month's unit-hours; "proportional", that share of every hour
    fill: str = "layered"
    # demand scenarios the tuned split must do well on (multipliers of the demand path): with
    # whole machines the cost is a step function of the shares, and the cheapest split for
    # exactly last month's demand is often a rounding accident that next month does not repeat
    scenarios: tuple[float, ...] = (0.85, 1.0, 1.15, 1.3)
    # moving load costs too (migrations, contracts): keep the default split unless another one
    # is expected to save at least this share of its cost
    min_savings: float = 0.03

    def __post_init__(self) -> None:
        if not 0 < self.step <= 0.5:
            raise ValueError("step must be in (0, 0.5]")
        if abs(1.0 / self.step - round(1.0 / self.step)) > 1e-6:
            raise ValueError(f"step must divide 1 into whole steps (such as 0.05, 0.1, 0.125, 0.25), got {self.step}")
        if not 0 < self.provision_quantile <= 1:
            raise ValueError("provision_quantile must be in (0, 1]")
        if self.fill not in ("layered", "proportional"):
            raise ValueError(f"fill must be 'layered' or 'proportional', got {self.fill!r}")
        if set(self.bounds) != set(LOCATIONS):
            raise ValueError(f"bounds must name exactly {LOCATIONS}")
        for loc, (lo, hi) in self.bounds.items():
            if not 0 <= lo <= hi <= 1:
                raise ValueError(f"bounds of {loc} must satisfy 0 <= lo <= hi <= 1, got ({lo}, {hi})")
        lows = sum(lo for lo, _ in self.bounds.values())
        highs = sum(hi for _, hi in self.bounds.values())
        if lows > 1 + 1e-9 or highs < 1 - 1e-9:
            raise ValueError(f"bounds: no split adds up to 1 (the lower bounds sum to {lows:g}, the upper "
                             f"bounds to {highs:g})")
        if not 0 <= self.min_savings < 1:
            raise ValueError("min_savings must be in [0, 1)")
        if not self.scenarios or min(self.scenarios) <= 0:
            raise ValueError("scenarios must be positive demand multipliers")


def _fixed(demand: np.ndarray, split: Split, offers: dict[str, Offer],
           policy: AllocationPolicy) -> tuple[dict[str, tuple[float, np.ndarray]], np.ndarray]:
    """Private and edge: (instances, served units per hour) per location, and the spill."""
    if policy.fill == "layered":
        return layered(demand, {loc: split.share(loc) for loc in ("private", "edge")}, offers)
    fixed: dict[str, tuple[float, np.ndarray]] = {}
    spill = np.zeros_like(demand)
    for loc in ("private", "edge"):
        if split.share(loc) == 0:
            continue
        want = demand * split.share(loc)
        offer = offers.get(loc)
        if offer is None:  # nothing to buy there: its share goes public
            spill += want
            continue
        instances = float(np.ceil(np.quantile(want, policy.provision_quantile) / offer.units - 1e-9))
        served = np.minimum(want, instances * offer.units)
        spill += want - served
        fixed[loc] = (instances, served)
    return fixed, spill


def elastic_cost(load: np.ndarray, offer: Offer, costs: CostPolicy) -> dict[str, float]:
    """Public on-demand following the hourly ``load`` in whole instances."""
    return provisioned_cost(np.ceil(load / offer.units - 1e-9), load, offer, costs.public)


def _demand(demand: np.ndarray) -> np.ndarray:
    d = np.asarray(demand, dtype=float)
    if d.size == 0:
        raise ValueError("the demand path is empty")
    if not np.isfinite(d).all():
        raise ValueError("the demand path has NaN or infinite values")
    return np.clip(d, 0.0, None)


def public_load(demand: np.ndarray, split: Split, offers: dict[str, Offer],
                policy: AllocationPolicy = AllocationPolicy(), at: float = 1.0) -> np.ndarray:
    """Units per hour that run on public on-demand: what the fixed locations' machines leave;
    with ``at``, if demand came in at ``at`` times ``demand`` on the machines bought for it."""
    d = _demand(demand)
    fixed = _fixed(d, split, offers, policy)[0]
    if at == 1.0:
        return _public(d, fixed)
    other, caps = d * at, {loc: n * offers[loc].units for loc, (n, _) in fixed.items()}
    if policy.fill == "layered":  # the layers stack from the bottom: together they serve min(demand, capacity)
        return other - np.minimum(other, sum(caps.values()))
    return other - sum((np.minimum(other * split.share(loc), c) for loc, c in caps.items()), np.zeros_like(d))


def _public(demand: np.ndarray, fixed: dict[str, tuple[float, np.ndarray]]) -> np.ndarray:
    """What public on-demand carries: the demand the fixed locations' machines do not serve."""
    return demand - sum((served for _, served in fixed.values()), np.zeros_like(demand))


CARRIED = ("carried_private", "carried_public", "carried_edge")  # shares of the unit-hours served


def simulate(demand: np.ndarray, split: Split, offers: dict[str, Offer], costs: CostPolicy,
             policy: AllocationPolicy = AllocationPolicy()) -> dict[str, float]:
    """Cost of serving the hourly ``demand`` path with ``split``, by location, per month.

    Returns ``private_cost, public_cost, edge_cost`` (compute incl. surcharges),
    ``idle_penalty``, ``monthly_cost`` (all scaled to ``costs.hours_per_month``) and
    ``spill_units`` (unit-hours per month the fixed locations could not carry), and
    ``carried_private``, ``carried_public``, ``carried_edge``: the share of the unit-hours
    each really serves (whole machines carry more, or less, than the split's shares).
    """
    d = _demand(demand)
    out = {"private_cost": 0.0, "public_cost": 0.0, "edge_cost": 0.0, "idle_penalty": 0.0}
    fixed, spill = _fixed(d, split, offers, policy)
    for loc, (instances, served) in fixed.items():
        c = provisioned_cost(np.full(d.size, instances), served, offers[loc], costs.at(loc))
        out[f"{loc}_cost"] += c["compute"]
        out["idle_penalty"] += c["idle_penalty"]
    load = _public(d, fixed)
    if load.sum() > 1e-9:
        if "public" not in offers:
            raise ValueError("no public offer to carry the public share and the spill-over")
        c = elastic_cost(load, offers["public"], costs)
        out["public_cost"] += c["compute"]
        out["idle_penalty"] += c["idle_penalty"]
    total = out["private_cost"] + out["public_cost"] + out["edge_cost"] + out["idle_penalty"]
    scale = costs.hours_per_month / d.size
    result = {k: v * scale for k, v in out.items()}
    result["monthly_cost"] = total * scale
    # what of it public really carried: with layers, the machines bought for the other shares
    # (whole machines, sized up) can take a share with no offer, and then none of it runs on public
    result["spill_units"] = min(float(spill.sum()), float(load.sum())) * scale
    # the unit-hours each location really carries: whole machines move them off the shares
    volume = float(d.sum())
    for loc in ("private", "edge"):
        result[f"carried_{loc}"] = float(fixed[loc][1].sum()) / volume if loc in fixed and volume > 0 else 0.0
    result["carried_public"] = float(load.sum()) / volume if volume > 0 else 0.0
    return result


def current_fleet_cost(demand: np.ndarray, capacity_units: float, offers: dict[str, Offer],
                       costs: CostPolicy) -> float | None:
    """The monthly cost of serving ``demand`` on the capacity running now, priced as
    private machines (the reference a bill is compared with: no split, the fleet as it is),
    with what exceeds it on public on-demand. None without a private offer, or no capacity."""
    parts = current_fleet_parts(demand, capacity_units, offers, costs)
    return None if parts is None else parts["monthly_cost"]


def current_fleet_parts(demand: np.ndarray, capacity_units: float, offers: dict[str, Offer],
                        costs: CostPolicy) -> dict[str, float] | None:
    """:func:`current_fleet_cost` by part, as :func:`simulate` gives a split's:
    ``private_cost, public_cost, edge_cost, idle_penalty, monthly_cost``."""
    d = _demand(demand)
    offer = offers.get("private")
    if offer is None or not capacity_units > 0:
        return None
    instances = _fleet_instances(capacity_units, offer)
    spill = fleet_spill(d, capacity_units, offers)
    c = provisioned_cost(np.full(d.size, instances), d - spill, offer, costs.private)
    out = {"private_cost": c["compute"], "public_cost": 0.0, "edge_cost": 0.0, "idle_penalty": c["idle_penalty"]}
    if spill.sum() > 0:
        if "public" not in offers:
            return None
        p = elastic_cost(spill, offers["public"], costs)
        out["public_cost"] += p["compute"]
        out["idle_penalty"] += p["idle_penalty"]
    scale = costs.hours_per_month / d.size
    result = {k: v * scale for k, v in out.items()}
    result["monthly_cost"] = sum(out.values()) * scale
    return result


def _fleet_instances(capacity_units: float, offer: Offer) -> float:
    """The running capacity in private machines of ``offer``, a fraction where its nodes are
    of other sizes: the fleet is priced per unit as it runs (1 + 2 + 8 GPUs as 2.75 four-GPU
    machines, not 3, which priced it 9% high)."""
    return float(capacity_units / offer.units)


def fleet_spill(demand: np.ndarray, capacity_units: float, offers: dict[str, Offer]) -> np.ndarray:
    """Units per hour the running fleet (``capacity_units``) cannot carry, which public
    on-demand carries; all of it without a private offer."""
    d = _demand(demand)
    offer = offers.get("private")
    if offer is None or not capacity_units > 0:
        return d
    return d - np.minimum(d, _fleet_instances(capacity_units, offer) * offer.units)


def unbought(shares: Mapping[str, float], offers: dict[str, Offer]) -> list[str]:
    """The locations ``shares`` (a split's, or a plan row's) puts load on where no offer fits the
    pool: a split with any cannot be bought as it reads."""
    return [loc for loc in LOCATIONS if float(shares[loc]) > 0 and loc not in offers]


def allowed(split: Split, policy: AllocationPolicy, available: tuple[str, ...] = LOCATIONS) -> bool:
    """Whether ``split`` is one of the policy's candidates (its grid and bounds)."""
    return any(all(abs(c.share(loc) - split.share(loc)) < 1e-6 for loc in LOCATIONS)
               for c in candidate_splits(policy, available))


def candidate_splits(policy: AllocationPolicy, available: tuple[str, ...] = LOCATIONS) -> list[Split]:
    """Every split on the policy's grid within its bounds; locations not ``available`` (no
    suitable offer) get no share."""
    steps = round(1.0 / policy.step)
    out = []
    for i in range(steps + 1):
        for j in range(steps + 1 - i):
            p, e = i / steps, j / steps
            q = 1.0 - p - e
            shares = {"private": p, "public": q, "edge": e}
            # a location with nothing to buy takes no share, and public carries it instead:
            # public's upper bound rises only as far as the others' upper bounds require
            bounds = {loc: (lo, hi) if loc in available else (0.0, 0.0) for loc, (lo, hi) in policy.bounds.items()}
            fixed_max = bounds["private"][1] + bounds["edge"][1]
            # (up to the grid: 1 - 0.35 on a grid of 0.25 is 0.75, or no split would be left)
            need = np.ceil((1.0 - fixed_max) / policy.step - 1e-9) * policy.step
            bounds["public"] = (bounds["public"][0], max(bounds["public"][1], need))
            if all(lo - 1e-9 <= shares[loc] <= hi + 1e-9 for loc, (lo, hi) in bounds.items()):
                p6, e6 = round(p, 6), round(e, 6)
                out.append(Split(p6, round(1.0 - p6 - e6, 6), e6))  # rounded shares still sum to 1
    if not out:
        raise ValueError(f"no split on the grid of step {policy.step} lies within the allocation bounds "
                         f"{dict(policy.bounds)}: use a finer step or wider bounds")
    return out


def tune_split(demand: np.ndarray, offers: dict[str, Offer], costs: CostPolicy,
               policy: AllocationPolicy = AllocationPolicy(),
               default: Split = DEFAULT_SPLIT) -> pd.DataFrame:
    """The default split and the split on the grid with the least mean cost over the policy's
    demand scenarios (the default itself unless that saves ``min_savings``, when the default
    can be bought at all), both priced on ``demand``. A location
    with no offer takes no share in the tuned split (in the default one, its share spills to
    public).

    One row per plan (``default_3_5_2``, ``tuned``) with the shares, the cost breakdown
    and ``savings_vs_default``. Ties go to the split closest to the default.
    """
    demand = _demand(demand)

    def expected(split: Split) -> float:
        return scenario_cost(demand, split, offers, costs, policy)

    # a default share in a location with no suitable offer cannot be bought: no plan to keep
    buyable = not unbought(asdict(default), offers)
    best, best_key = default, ((round(expected(default), 6), 0.0) if buyable else (np.inf, np.inf))
    for split in candidate_splits(policy, tuple(offers)):
        cost = expected(split)
        distance = sum(abs(split.share(loc) - default.share(loc)) for loc in LOCATIONS)
        key = (round(cost, 6), distance)
        if key < best_key:
            best, best_key = split, key
    default_cost = round(expected(default), 6)  # rounded as the keys are: a tie saves exactly 0
    # the default stands unless another split saves enough (when it can be bought at all)
    if buyable and best_key[0] > default_cost * (1.0 - policy.min_savings):
        best, best_key = default, (default_cost, 0.0)
    out = price_plans(demand, {"default_3_5_2": default, "tuned": best}, offers, costs, policy)
    # what the decision rests on: the saving in the mean over the scenarios (>= min_savings)
    out["expected_savings"] = [0.0, saving(default_cost, best_key[0])]
    return out


def saving(reference: float, cost: float) -> float:
    """``reference - cost``, both rounded to 6 decimals (as the plan's payload is), never
    ``-0.0``: two prices of the same load that differ only by float noise (the default's edge
    share spilled to public vs the same share planned on public) save exactly 0, not a tiny
    negative that an export shows as ``-0.0``."""
    return round(float(reference), 6) - round(float(cost), 6) + 0.0


def scenario_cost(demand: np.ndarray, split: Split, offers: dict[str, Offer], costs: CostPolicy,
                  policy: AllocationPolicy = AllocationPolicy()) -> float:
    """The mean monthly cost of ``split`` over the policy's demand scenarios (what the
    tuning minimises)."""
    d = _demand(demand)
    return float(np.mean([simulate(d * m, split, offers, costs, policy)["monthly_cost"] for m in policy.scenarios]))


def kept_plans(demand: np.ndarray, default: Split, kept: Split, offers: dict[str, Offer], costs: CostPolicy,
               policy: AllocationPolicy = AllocationPolicy()) -> pd.DataFrame:
    """This month's split, kept, and the default, priced on ``demand`` as :func:`tune_split`
    prices them (with ``expected_savings`` over the scenarios, on today's demand)."""
    out = price_plans(demand, {"default_3_5_2": default, "tuned": kept}, offers, costs, policy)
    out["expected_savings"] = [0.0, saving(scenario_cost(demand, default, offers, costs, policy),
                                           scenario_cost(demand, kept, offers, costs, policy))]
    return out


def price_plans(demand: np.ndarray, plans: dict[str, Split], offers: dict[str, Offer], costs: CostPolicy,
                policy: AllocationPolicy = AllocationPolicy()) -> pd.DataFrame:
    """One row per named split: shares, cost breakdown and ``savings_vs_default`` (against
    the plan named ``default_3_5_2``, else the first)."""
    rows = []
    for plan, split in plans.items():
        sim = simulate(demand, split, offers, costs, policy)
        rows.append({"plan": plan, "private": split.private, "public": split.public, "edge": split.edge,
                     **{k: sim[k] for k in ("monthly_cost", "private_cost", "public_cost", "edge_cost",
                                            "idle_penalty", "spill_units", *CARRIED)}})
    out = pd.DataFrame(rows)
    ref = out.loc[out["plan"] == "default_3_5_2", "monthly_cost"]
    base = float(ref.iloc[0]) if not ref.empty else float(out["monthly_cost"].iloc[0])
    out["savings_vs_default"] = [saving(base, c) for c in out["monthly_cost"]]
    return out


RUNNING_FLEET = "running_fleet"


def out_of_sample(history: np.ndarray, offers: dict[str, Offer], costs: CostPolicy,
                  policy: AllocationPolicy = AllocationPolicy(), default: Split = DEFAULT_SPLIT,
                  min_hours: int = 24 * 7) -> dict[str, float | str] | None:
    """What re-tuning would have saved on demand it had not seen: the split tuned on the month
    before last (``hours_per_month`` hours, or half the history when shorter), priced against
    the default on last month, beside the same saving in sample. None with under ``min_hours``
    per half."""
    h = _demand(history)
    w = min(int(costs.hours_per_month), h.size // 2)
    if w < min_hours:
        return None
    before, last = h[-2 * w:-w], h[-w:]
    t = tune_split(before, offers, costs, policy, default).set_index("plan")
    split = Split(float(t.loc["tuned", "private"]), float(t.loc["tuned", "public"]), float(t.loc["tuned", "edge"]))
    priced = price_plans(last, {"default_3_5_2": default, "tuned": split}, offers, costs, policy).set_index("plan")
    return {"backtest_split": split.label(), "backtest_hours": float(w),
            "in_sample_savings": float(t.loc["tuned", "savings_vs_default"]),
            "out_of_sample_savings": float(priced.loc["tuned", "savings_vs_default"])}
