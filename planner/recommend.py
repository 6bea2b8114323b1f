"""The recommendation among a pool's plans (the running fleet, the default split, the tuned
split) and its headline: the plan with the least mean cost over the demand scenarios the split
is tuned on (the forecast's demand path times each of ``AllocationPolicy.scenarios``), so that
a split is never recommended for what it saves on the forecast alone while a little more demand
would double its bill (one box and on-demand peaks against the machines the fleet runs)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from planner.allocation import RUNNING_FLEET, AllocationPolicy, unbought
from planner.cost import LOCATIONS, Offer


def binding_bounds(policy: AllocationPolicy, offers: dict[str, Offer]) -> str:
    """Why a split cannot be all private, in words: the lower bounds that keep load off it
    (where there is an offer to put it on), and the locations without an offer."""
    parts = [f"at least {lo:.0%} on {loc}" for loc, (lo, _) in policy.bounds.items()
             if loc != "private" and lo > 0 and loc in offers]
    hi = policy.bounds["private"][1]
    if hi < 1:
        parts.append(f"at most {hi:.0%} on private")
    why = "the allocation bounds keep " + ", ".join(parts) if parts else ""
    missing = [loc for loc in LOCATIONS if loc not in offers and policy.bounds[loc][0] > 0]
    if missing:
        why += ("; " if why else "") + " and ".join(missing) + " has no offer that fits the pool"
    return why or "the split's fixed capacity is sized for its peak share"


def _usd(value: float) -> str:
    return f"${abs(value):,.0f}"


def _shares(row: dict) -> str:
    return f"{float(row['private']):.0%}/{float(row['public']):.0%}/{float(row['edge']):.0%}"


def _carried_note(row: dict) -> str:
    """Where whole machines move a split's unit-hours off its shares by more than 5 points,
    what each location really carries."""
    carried = {loc: row.get(f"carried_{loc}") for loc in LOCATIONS}
    if any(v is None or not np.isfinite(float(v)) for v in carried.values()) or sum(carried.values()) <= 0:
        return ""  # (no demand: nothing is carried anywhere)
    if max(abs(float(carried[loc]) - float(row[loc])) for loc in LOCATIONS) <= 0.05:
        return ""
    return (" (as bought, private carries {:.0%}, public {:.0%}, edge {:.0%} of the unit-hours)"
            .format(*(float(carried[loc]) for loc in LOCATIONS)))


def _scenario_gap(a: dict, b: dict) -> float | None:
    """How much more ``a`` costs than ``b`` on average over the demand scenarios (None: one of
    them has no scenario figure)."""
    ea, eb = a.get("expected_savings"), b.get("expected_savings")
    if ea is None or eb is None or not (np.isfinite(float(ea)) and np.isfinite(float(eb))):
        return None
    return float(eb) - float(ea)


def scenarios_text(policy: AllocationPolicy) -> str:
    """The demand scenarios in words: "demand at x0.85 to x1.3 of the forecast"."""
    return f"demand at x{min(policy.scenarios):g} to x{max(policy.scenarios):g} of the forecast"


def headline(best: dict, rows: list[dict], why: str, scenarios: str | None = None) -> str:
    """One pool's allocation in a sentence: the recommended plan, the others against it (a split
    dearer than the running fleet says why first), and what re-tuning saved out of sample. With
    ``scenarios`` (the plans were ranked on their mean over them), a plan cheaper on the
    forecast alone but dearer over them says both."""
    by = {r["plan"]: r for r in rows}
    tuned, fleet = by.get("tuned"), by.get(RUNNING_FLEET)
    if best["plan"] == RUNNING_FLEET:
        text = f"keep the running fleet, {_usd(best['monthly_cost'])}/month for this demand"
        point = float(tuned["monthly_cost"]) - float(best["monthly_cost"]) if tuned is not None else 0.0
        gap = _scenario_gap(tuned, best) if tuned is not None and scenarios else None
        more = point if gap is None else gap
        # (with what it really carries as bought, where whole machines move that off its shares)
        if tuned is not None and round(more) == 0:  # a tie: nothing keeps the split dearer
            text += f"; the tuned split {_shares(tuned)}{_carried_note(tuned)} would cost the same"
        elif tuned is not None and gap is not None and round(point) < 0:  # cheaper only on the forecast
            text += (f"; the tuned split {_shares(tuned)}{_carried_note(tuned)} would cost {_usd(gap)}/month more on "
                     f"average over {scenarios}, though {_usd(point)}/month less if demand comes in exactly as "
                     "forecast: it leaves more of a rise to on-demand")
        elif tuned is not None:
            text += (f"; the tuned split {_shares(tuned)}{_carried_note(tuned)} would cost {_usd(more)}/month more"
                     f"{f' on average over {scenarios}' if gap is not None else ''}, as {why}")
    else:
        name = f"the split {_shares(best)}"
        if best["plan"] == "default_3_5_2":  # the config's default may be another split than 3-5-2
            name = "the default 3-5-2 split" if _shares(best) == "30%/50%/20%" else f"the default split {_shares(best)}"
        text = f"{name}, {_usd(best['monthly_cost'])}/month{_carried_note(best)}"
        below = float(fleet["monthly_cost"]) - float(best["monthly_cost"]) if fleet is not None else 0.0
        gap = _scenario_gap(fleet, best) if fleet is not None and scenarios else None
        if fleet is not None and gap is not None and round(below) < 0:  # dearer only on the forecast
            text += (f", {_usd(below)}/month above the running fleet if demand comes in exactly as forecast but "
                     f"{_usd(gap)}/month below it on average over {scenarios}")
        elif fleet is not None:
            text += (", the same as the running fleet" if round(below) == 0
                     else f", {_usd(below)}/month below the running fleet")
    oos = None if tuned is None else tuned.get("out_of_sample_savings")
    # (re-tuning that neither saved nor cost anything, in or out of sample, is not worth a clause)
    if (oos is not None and np.isfinite(oos)
            and (round(oos) != 0 or round(float(tuned.get("in_sample_savings", 0.0))) != 0)):
        days = float(tuned["backtest_hours"]) / 24
        ins = float(tuned["in_sample_savings"])
        # the backtest tunes its own split on older demand: name it, and the default it is priced against
        split = "/".join(f"{10 * float(x):g}%" for x in str(tuned["backtest_split"]).split("-"))
        base = by.get("default_3_5_2", {})
        unbuyable = not base.get("buyable", True)
        text += (f"; out of sample, re-tuning {'saved' if round(oos) >= 0 else 'cost'} {_usd(oos)}/month: the split "
                 f"{split} tuned on {days:.0f} days, against the default "
                 f"{_shares(base) if base else 'split'}{' (which cannot be bought as it reads)' if unbuyable else ''} "
                 f"on the {days:.0f} days after them (in sample it {'saved' if round(ins) >= 0 else 'cost'} "
                 f"{_usd(ins)})")
    return text


def recommend(alloc: pd.DataFrame, policy: AllocationPolicy, offers: dict[str, Offer]) -> pd.DataFrame:
    """``alloc`` (the rows of :func:`tune_split`, and a ``running_fleet`` row when the running
    fleet is priced) with ``recommended`` on the cheapest one (on average over the demand
    scenarios where every row has that figure), ``reason`` on every row and ``headline`` on the
    recommended: a split dearer than the fleet as it runs is never the headline (moving costs
    money for nothing)."""
    out = alloc.copy()
    cost = pd.to_numeric(out["monthly_cost"], errors="coerce")
    # ranked on the mean over the demand scenarios, as the split is tuned (expected_savings: the
    # default's mean minus the row's), where every row has one; else on the forecast's demand
    expected = pd.to_numeric(out.get("expected_savings", pd.Series(np.nan, index=out.index)), errors="coerce")
    on_scenarios = bool(expected.notna().all())
    rank = -expected if on_scenarios else cost
    scenarios = scenarios_text(policy) if on_scenarios else None
    # ties go to what runs now, then to the tuned split (the order of preference)
    order = out["plan"].map({RUNNING_FLEET: 0, "tuned": 1, "default_3_5_2": 2}).fillna(3)
    # a split with a share where no offer fits the pool (the default, or this month's kept split
    # once an offer went) is priced with that share spilled to public: not a plan anyone can buy
    # as it reads, so never the recommendation
    missing = [[] if r["plan"] == RUNNING_FLEET else unbought(r, offers) for r in out.to_dict("records")]
    unbuyable = [bool(m) for m in missing]
    ranked = out.assign(_u=unbuyable, _c=rank.round(6), _o=order).sort_values(["_u", "_c", "_o"])
    best = ranked.index[0]
    out["recommended"] = out.index == best
    chosen = out.loc[best]
    why = binding_bounds(policy, offers)
    reasons = []
    on = f"over {scenarios}" if scenarios else "on this demand"
    for i, r, lacks in zip(out.index, out.itertuples(index=False), missing, strict=True):
        if r.plan == chosen["plan"]:
            reasons.append(f"the cheapest of the plans that can be bought {on}" if any(unbuyable) else
                           f"the cheapest of the running fleet, the default 3-5-2 split and the tuned split {on}")
        elif lacks:
            reasons.append(f"cannot be bought as it reads: its {' and '.join(lacks)} share has no offer that fits the pool "
                           "(priced with that share on the other locations' machines and public)")
        else:
            point = float(r.monthly_cost) - float(chosen["monthly_cost"])
            more = float(rank[i] - rank[best])
            name = str(chosen["plan"]).replace("_", " ")
            if round(more) == 0:  # as _usd rounds it: never "$0/month more", nor a reason for it
                reasons.append(f"costs the same as the {name}{f' on average over {scenarios}' if scenarios else ''}")
                continue
            if scenarios and round(point) < 0:  # cheaper on the forecast alone
                reasons.append(f"costs {_usd(more)}/month more than the {name} on average over {scenarios}, though "
                               f"{_usd(point)}/month less if demand comes in exactly as forecast")
                continue
            tail = f": {why}" if chosen["plan"] == RUNNING_FLEET else ""
            reasons.append(f"costs {_usd(more)}/month more than the {name}"
                           f"{f' on average over {scenarios}' if scenarios else ''}{tail}")
    out["reason"] = reasons
    out["buyable"] = [not m for m in missing]  # every share has an offer that fits the pool
    out["headline"] = [headline(chosen.to_dict(), out.to_dict("records"), why, scenarios) if i == best else ""
                       for i in out.index]
    return out
