"""Spot capacity for the interruptible part of the public load.

Spot instances cost a fraction of on-demand, but their price can spike past on-demand
and the capacity can be taken back. Only work that tolerates that (checkpointed
training, batch inference) belongs there: the user says how much of a pool's public
load is interruptible (``interruptible_share``). For that share the planner picks the
spot market (provider, zone, instance type) with the least *expected* price per pool
unit: the mean of its hourly price over the lookback window, spikes included, so a
market that spikes often is not chosen for its calm hours. Markets that the spike
predictor expects to spike within its horizon are skipped; when nothing is left, or
spot saves less than ``min_discount``, the share stays on on-demand.

Pure: it takes spot price change events, the latest spike probabilities and the
qualifying public offers, and returns one recommendation per pool.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from anomaly.spike_features import SERIES_KEY, NoGridStep, resample_prices
from planner.cost import CostPolicy, Offer
from planner.validation import require_columns

SPOT_COLUMNS = [
    "unique_id", "resource", "action", "provider", "region", "zone", "instance_type", "product",
    "pool_units", "interruptible_share", "spot_load_mean", "spot_instances", "on_demand_unit_price",
    "spot_price_now", "spot_price_expected", "spot_unit_price", "discount", "hours_above_on_demand",
    "p_spike", "expected_monthly_saving", "price_lookback", "reason",
]


@dataclass(frozen=True)
class SpotPolicy:
    """How much of the public load may run on spot, and when not to."""

    interruptible_share: float = 0.25  # share of the public load that tolerates interruption
    lookback: str = "7D"  # window of the expected spot price (spikes included)
    max_spike_probability: float = 0.5  # skip markets the spike predictor rates at or above this
    min_discount: float = 0.10  # spot must be at least this much cheaper per unit than on-demand

    def __post_init__(self) -> None:
        if not 0 <= self.interruptible_share <= 1:
            raise ValueError("interruptible_share must be in [0, 1]")
        if not 0 < self.max_spike_probability <= 1:
            raise ValueError("max_spike_probability must be in (0, 1]")
        if not 0 <= self.min_discount < 1:
            raise ValueError("min_discount must be in [0, 1)")
        if pd.Timedelta(self.lookback) <= pd.Timedelta(0):
            raise ValueError("lookback must be a positive duration")


MARKET_COLUMNS = [*SERIES_KEY, "region", "price_now", "price_expected", "price_max", "hours",
                  "hours_above_on_demand", "days_since_change"]
# a price log never says a market closed: its last price just stops changing. A market whose
# price has not changed for this long is taken as gone (GCP's change at most monthly)
MAX_PRICE_AGE = pd.Timedelta("365D")


def market_stats(prices: pd.DataFrame, lookback: str, on_demand: pd.DataFrame | None = None,
                 end: pd.Timestamp | None = None) -> pd.DataFrame:
    """Per spot market (``SERIES_KEY`` and ``region``) over the ``lookback`` before ``end``
    (default: the latest change), on an hourly grid: the latest price, the mean and max
    price, the hours observed, the days since its price last changed and, with ``on_demand``
    (``provider, region, instance_type, on_demand_price``), the hours priced at or above
    on-demand."""
    require_columns(prices, [*SERIES_KEY, "region", "ts", "price"], "spot prices")
    prices = prices[prices["price"] > 0]  # a price of 0 is a placeholder: the last real one holds
    if prices.empty:
        return pd.DataFrame(columns=MARKET_COLUMNS)
    stop = (end if end is not None else prices["ts"].max()).floor("1h")
    start = stop - pd.Timedelta(lookback)
    # only the window matters: its changes, and the price each series held as it opened
    before = prices[prices["ts"] <= start].sort_values("ts").groupby(SERIES_KEY, sort=False).tail(1)
    window = pd.concat([before.assign(ts=start), prices[(prices["ts"] > start) & (prices["ts"] <= stop)]])
    try:
        grid = resample_prices(window, "1h", stop)
    except NoGridStep:  # no market priced at a whole hour of the window yet
        return pd.DataFrame(columns=MARKET_COLUMNS)
    recent = grid[grid["ts"] > start]
    if on_demand is not None and not on_demand.empty:
        on_demand = on_demand[on_demand["on_demand_price"] > 0]
        od = on_demand.drop_duplicates(["provider", "region", "instance_type"], keep="last")
        recent = recent.merge(od[["provider", "region", "instance_type", "on_demand_price"]],
                              on=["provider", "region", "instance_type"], how="left")
        above = (recent["price"] >= recent["on_demand_price"]).astype(float)
        recent = recent.assign(above=above.where(recent["on_demand_price"].notna()))
    else:
        recent = recent.assign(above=np.nan)
    last = prices[prices["ts"] <= stop].groupby(SERIES_KEY)["ts"].max()
    recent = recent.merge(((stop - last) / pd.Timedelta(days=1)).rename("days_since_change").reset_index(),
                          on=SERIES_KEY, how="left")
    out = recent.groupby([*SERIES_KEY, "region"], sort=True).agg(
        price_now=("price", "last"), price_expected=("price", "mean"), price_max=("price", "max"),
        hours=("price", "size"), hours_above_on_demand=("above", lambda a: a.sum(min_count=1)),
        days_since_change=("days_since_change", "first"),
    ).reset_index()
    return out[MARKET_COLUMNS]


def _instance_cost(load: np.ndarray, units: float, price: float) -> float:
    """What carrying ``load`` (pool units per hour) costs in whole instances."""
    return float((np.ceil(load / units - 1e-9) * price).sum())


def _spot_machines(load: np.ndarray, share: float, units: float) -> np.ndarray:
    """Spot machines per hour: as many as the interruptible load fills completely (a
    machine half full of interruptible work is cheaper left on on-demand)."""
    return np.floor(share * load / units + 1e-9)


def on_demand_rest(load: np.ndarray, share: float, units: float) -> np.ndarray:
    """The hourly load left on on-demand when the whole spot machines of ``units`` carry what
    they can of the interruptible ``share``."""
    load = np.asarray(load, dtype=float)
    return load - _spot_machines(load, share, units) * units


def _split_cost(load: np.ndarray, share: float, units: float, price: float, on_demand: Offer) -> float:
    """Spot machines for the interruptible load they fill, on-demand machines for the rest."""
    machines = _spot_machines(load, share, units)
    return float((machines * price).sum()) + _instance_cost(load - machines * units, on_demand.units, on_demand.price)


def recommend_spot(
    uid: str,
    resource: str,
    public_load: np.ndarray,
    public_offers: pd.DataFrame,
    markets: pd.DataFrame,
    probabilities: pd.DataFrame | None,
    costs: CostPolicy,
    policy: SpotPolicy,
    on_demand: Offer,
) -> dict[str, object]:
    """The spot recommendation of one pool (a row of ``SPOT_COLUMNS``).

    ``public_load`` is the hourly load public carries (pool units); ``public_offers`` the
    qualifying public catalog rows with ``pool_units``; ``markets`` from
    :func:`market_stats`; ``probabilities`` the latest ``p_spike`` per market
    (``SERIES_KEY`` columns, and the spike model's alert ``threshold`` when known), or None
    without a spike model; ``on_demand`` the public offer the load runs on otherwise.

    Both ways are priced in whole instances, hour by hour, as the allocation is: spot
    takes as many machines as the interruptible load fills completely, on-demand the rest,
    and that must cost less than all on-demand (a share smaller than one spot machine
    saves nothing), at least ``min_discount`` less per unit of work.
    """
    row: dict[str, object] = {c: None for c in SPOT_COLUMNS}
    load = np.clip(np.asarray(public_load, dtype=float), 0.0, None)
    share = policy.interruptible_share
    od_unit = on_demand.unit_price if on_demand.units > 0 else float("nan")
    row.update(unique_id=uid, resource=resource, interruptible_share=share, price_lookback=policy.lookback,
               spot_load_mean=float(share * load.mean()) if load.size else 0.0,
               on_demand_unit_price=od_unit, action="on_demand", expected_monthly_saving=0.0)
    if share == 0:
        row["reason"] = "spot is off (interruptible_share 0)"
        return row
    if not load.size or float(load.mean()) <= 0:
        row["reason"] = "no interruptible public load (the recommended plan runs nothing on public)"
        return row
    if not od_unit > 0:
        row["reason"] = "no on-demand price to compare spot with"
        return row
    offers = public_offers[["provider", "region", "instance_type", "pool_units"]]
    cand = markets.merge(offers, on=["provider", "region", "instance_type"], how="inner")
    min_hours = pd.Timedelta(policy.lookback) / pd.Timedelta(hours=1) / 2
    cand = cand[(cand["price_expected"] > 0) & (cand["hours"] >= min_hours)]
    if "days_since_change" in cand:  # a market silent for a year is gone, not calm
        cand = cand[~(cand["days_since_change"] > MAX_PRICE_AGE / pd.Timedelta(days=1))]
    if cand.empty:
        row["reason"] = (f"no spot price history (at least half of the last {policy.lookback}, changed within "
                         f"{MAX_PRICE_AGE.days} days) for a public instance type that fits this pool")
        return row
    if probabilities is not None and not probabilities.empty:
        keep = [*SERIES_KEY, "p_spike"] + (["threshold"] if "threshold" in probabilities else [])
        cand = cand.merge(probabilities[keep], on=SERIES_KEY, how="left")
    else:
        cand = cand.assign(p_spike=np.nan)
    # skip what the spike model rates at the policy's limit, or at its own alert threshold
    limit = np.minimum(policy.max_spike_probability, cand["threshold"]) if "threshold" in cand \
        else pd.Series(policy.max_spike_probability, index=cand.index)
    cand = cand.assign(spot_unit_price=cand["price_expected"] / cand["pool_units"], limit=limit.fillna(
        policy.max_spike_probability))
    baseline = _instance_cost(load, on_demand.units, on_demand.price)
    cand["saving"] = [baseline - _split_cost(load, share, u, p, on_demand)
                      for u, p in zip(cand["pool_units"], cand["price_expected"])]
    cand = cand.sort_values(["saving", "spot_unit_price", *SERIES_KEY],
                            ascending=[False, True] + [True] * len(SERIES_KEY)).reset_index(drop=True)
    calm = cand[~(cand["p_spike"] >= cand["limit"])]
    # the best market that qualifies; only when none does, the best calm one, to say why not
    # (a market under the discount floor must not hide one above it that saves less)
    good = calm[(1.0 - calm["spot_unit_price"] / od_unit >= policy.min_discount) & (calm["saving"] > 0)]
    best = (good if not good.empty else calm if not calm.empty else cand).iloc[0]
    monthly = costs.hours_per_month / len(load)
    factors = costs.at("public")
    row.update({
        "provider": best["provider"], "region": best["region"], "zone": best["zone"],
        "instance_type": best["instance_type"], "product": best["product"],
        "pool_units": float(best["pool_units"]), "spot_price_now": float(best["price_now"]),
        "spot_price_expected": float(best["price_expected"]), "spot_unit_price": float(best["spot_unit_price"]),
        "discount": 1.0 - float(best["spot_unit_price"]) / od_unit,
        "p_spike": None if pd.isna(best["p_spike"]) else float(best["p_spike"]),
        "spot_instances": float(_spot_machines(load, share, float(best["pool_units"])).mean()),
        "hours_above_on_demand": None if pd.isna(best["hours_above_on_demand"])
        else int(best["hours_above_on_demand"]),
    })
    saving = float(factors.effective(float(best["saving"]))) * monthly
    market = f"{best['zone']} {best['instance_type']}"
    if calm.empty:
        row["reason"] = (f"every fitting spot market is expected to spike (p at or above the limit); "
                         f"least bad {market} p={best['p_spike']:.2f}")
        return row
    if row["discount"] < policy.min_discount:
        row["reason"] = (f"spot {market} saves only {row['discount']:.0%} per unit over the last "
                         f"{policy.lookback} (needs {policy.min_discount:.0%})")
        return row
    if not saving > 0:  # NaN (a cost that could not be priced) saves nothing either
        how = (f"the interruptible load ({row['spot_load_mean']:.1f} units) never fills one "
               f"{best['pool_units']:g}-unit machine" if row["spot_instances"] == 0
               else f"in whole instances it would cost {-saving:,.0f}/month more")
        row["reason"] = f"spot {market} is {row['discount']:.0%} cheaper per unit, but {how}"
        return row
    row["action"] = "use_spot"
    row["expected_monthly_saving"] = saving
    skipped = len(cand) - len(calm)
    p_text = "not rated by the spike model" if row["p_spike"] is None else f"p(spike) {row['p_spike']:.2f}"
    row["reason"] = (f"{share:.0%} of public load on spot in {market}: {row['discount']:.0%} below on-demand "
                     f"per unit over the last {policy.lookback}, {p_text}"
                     + (f"; {skipped} market(s) skipped for a predicted spike" if skipped else ""))
    return row
