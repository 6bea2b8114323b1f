"""The cost model and cost-aware instance selection.

    cost = instance price x (1 + storage surcharge) x network amplification + idle penalty

per location class (private, public, edge). The idle penalty is charged per idle
unit-hour (provisioned but unused), as a share of the unit's effective price: power,
cooling and the opportunity cost of a machine that could have run something else.

Demand is counted in the units of the fleet's own machines (GPUs of one model, vCPUs).
Offers of another GPU model are converted through their TFLOPS per unit, so that an
L4 at the edge and an H100 in the private cloud can be compared per unit of work.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from planner.validation import require_columns

LOCATIONS = ("private", "public", "edge")
CATALOG_COLUMNS = ["provider", "region", "instance_type", "location", "resource", "units", "on_demand_price"]


@dataclass(frozen=True)
class LocationCost:
    """Cost factors of one location class."""

    storage_surcharge: float = 0.0  # share added to the instance price for attached storage
    network_amplification: float = 1.0  # >= 1: egress and cross-site traffic per unit of compute
    idle_penalty: float = 0.0  # per idle unit-hour, as a share of the unit's effective price

    def __post_init__(self) -> None:
        if self.storage_surcharge < 0 or self.idle_penalty < 0:
            raise ValueError("storage_surcharge and idle_penalty must be >= 0")
        if self.network_amplification < 1:
            raise ValueError("network_amplification must be >= 1")

    def effective(self, price: float | np.ndarray) -> float | np.ndarray:
        """Price x (1 + storage surcharge) x network amplification."""
        return price * (1.0 + self.storage_surcharge) * self.network_amplification


@dataclass(frozen=True)
class CostPolicy:
    """Cost factors per location; defaults are typical, documented in the README."""

    private: LocationCost = field(default_factory=lambda: LocationCost(0.05, 1.0, 0.30))
    public: LocationCost = field(default_factory=lambda: LocationCost(0.12, 1.10, 0.0))
    edge: LocationCost = field(default_factory=lambda: LocationCost(0.08, 1.25, 0.15))
    hours_per_month: float = 730.0

    def __post_init__(self) -> None:
        if self.hours_per_month <= 0:
            raise ValueError("hours_per_month must be > 0")

    def at(self, location: str) -> LocationCost:
        """The factors of ``location`` (private, public or edge)."""
        if location not in LOCATIONS:
            raise ValueError(f"unknown location {location!r}; choose from {', '.join(LOCATIONS)}")
        return getattr(self, location)


@dataclass(frozen=True)
class OfferPolicy:
    """Which catalog offers can run a pool's work (see :func:`select_offers`)."""

    min_tflops_ratio: float = 1.0  # another GPU model needs this share of the pool GPU's TFLOPS
    min_memory_ratio: float = 1.0  # a CPU offer needs this share of the pool machine's GiB per vCPU
    # public offers (and spot markets) only in these; None: on the continent of the fleet's own
    # machines (their catalog regions), anywhere when that is unknown or with any_region
    regions: tuple[str, ...] | None = None
    any_region: bool = False
    # an offer whose instance holds more than this times the pool's peak demand is not chosen for
    # it (4 busy cores do not go on a 224-vCPU machine); None: any size
    max_size_ratio: float | None = 1.0

    def __post_init__(self) -> None:
        if self.min_tflops_ratio < 0 or self.min_memory_ratio < 0:
            raise ValueError("min_tflops_ratio and min_memory_ratio must be >= 0")
        if self.max_size_ratio is not None and not self.max_size_ratio > 0:
            raise ValueError("max_size_ratio must be > 0")
        if self.regions is not None and not self.regions:
            raise ValueError("regions, when given, must name at least one region")


@dataclass(frozen=True)
class Offer:
    """The cheapest way to buy one unit of a pool's work in one location."""

    location: str
    provider: str
    region: str
    instance_type: str
    units: float  # pool units one instance provides (after the TFLOPS conversion)
    price: float  # on-demand (or amortised, for private) price per instance-hour
    reserved_1y: float | None = None
    reserved_3y: float | None = None

    @property
    def unit_price(self) -> float:
        return self.price / self.units


# region name -> continent: the first word of AWS/GCP names (us-east-1, europe-west4), else a word
# inside Azure's (westeurope, australiaeast); checked in this order ("australia" holds "us")
_CONTINENT_HEADS = {
    "us": "north-america", "ca": "north-america", "mx": "north-america", "northamerica": "north-america",
    "sa": "south-america", "southamerica": "south-america", "eu": "europe", "europe": "europe", "uk": "europe",
    "ap": "asia-pacific", "asia": "asia-pacific", "australia": "asia-pacific", "jp": "asia-pacific",
    "me": "middle-east", "il": "middle-east", "af": "africa", "africa": "africa",
}
_CONTINENT_WORDS = (
    ("europe", "europe"), ("uk", "europe"), ("france", "europe"), ("germany", "europe"), ("switzerland", "europe"),
    ("norway", "europe"), ("sweden", "europe"), ("poland", "europe"), ("italy", "europe"), ("spain", "europe"),
    ("australia", "asia-pacific"), ("asia", "asia-pacific"), ("japan", "asia-pacific"), ("korea", "asia-pacific"),
    ("india", "asia-pacific"), ("brazil", "south-america"), ("africa", "africa"), ("uae", "middle-east"),
    ("qatar", "middle-east"), ("israel", "middle-east"), ("canada", "north-america"), ("mexico", "north-america"),
    ("us", "north-america"),
)


def continent(region: object) -> str | None:
    """The continent of a cloud region name (AWS, GCP, Azure styles), None when not known."""
    name = str(region).strip().lower()
    head = name.replace("_", "-").split("-", 1)[0]
    if head in _CONTINENT_HEADS:
        return _CONTINENT_HEADS[head]
    if "-" in name:  # a hyphenated name of another style (dc-west, edge-fra): not guessed from its words
        return None
    return next((c for word, c in _CONTINENT_WORDS if word in name), None)


def _per_unit_tflops(catalog: pd.DataFrame) -> pd.Series:
    tflops = catalog["tflops"] if "tflops" in catalog else pd.Series(np.nan, index=catalog.index)
    return tflops / catalog["units"]


def named_for(instance_type: object, pool: str) -> bool:
    """Whether an instance type is the pool's own machine by name (``h100`` -> ``h100-4x``)."""
    return str(instance_type).lower().startswith(pool.lower())


def _machines(catalog: pd.DataFrame, resource: str) -> pd.DataFrame:
    """The catalog rows of ``resource`` that are machines a pool's work can run on: some units,
    and for CPUs at least a whole vCPU (a fraction is a shared core: GCP's e2-micro, 0.25)."""
    units = catalog["units"]
    return catalog[(catalog["resource"] == resource) & (units > 0) & ((resource != "cpu") | (units >= 1 - 1e-9))]


def reference_offer(catalog: pd.DataFrame, resource: str, pool: str) -> pd.Series | None:
    """The machine a pool runs on: the private offer of ``resource`` whose instance type
    starts with the pool name (``h100`` -> ``h100-4x``; a priced one before an unpriced
    one, then the cheapest per unit); else the cheapest priced private offer of
    ``resource``; else, for CPUs, the cheapest priced offer anywhere. A GPU pool with no
    private machine has none: its GPU model is unknown, and a public L4 taken as its machine
    would size an H100 pool's work in L4s."""
    require_columns(catalog, CATALOG_COLUMNS, "instance catalog")
    mine = _machines(catalog, resource)
    own = mine[mine["location"] == "private"]
    named = own[own["instance_type"].map(lambda t: named_for(t, pool)).astype(bool)]
    if not named.empty:
        priced = named[named["on_demand_price"] > 0]
        if priced.empty:
            return named.iloc[0]
        return priced.loc[(priced["on_demand_price"] / priced["units"]).idxmin()]
    for pick in (own, mine if resource != "gpu" else own):
        pick = pick[pick["on_demand_price"] > 0]
        if not pick.empty:
            return pick.loc[(pick["on_demand_price"] / pick["units"]).idxmin()]
    return None


def select_offers(catalog: pd.DataFrame, resource: str, pool: str, min_tflops_ratio: float = 1.0,
                  min_memory_ratio: float = 1.0, regions: tuple[str, ...] | None = None,
                  memory_per_unit: float | None = None, any_region: bool = True,
                  max_units: float | None = None) -> dict[str, Offer]:
    """Per location, the offer with the least price per pool unit of work; in the private
    cloud, the pool's own machine (:func:`reference_offer`).

    GPU offers are converted to the pool's GPU through TFLOPS per unit (when the
    catalog has them), and only GPUs with at least ``min_tflops_ratio`` of the pool's
    TFLOPS per unit qualify: a job sized for an H100 does not fit on an L4 however cheap
    (0 lets any GPU stand in, by TFLOPS). A GPU offer without TFLOPS (or a pool whose own
    machine has none) cannot be compared, so only the pool's own machine qualifies. Offers
    without a price, or priced at 0, are ignored. CPU offers count vCPUs as they are, and
    qualify only with at least ``min_memory_ratio`` of the pool machine's memory per vCPU
    (when the catalog gives the pool machine's memory): a 1-vCPU, 0.6 GB shared-core
    machine is cheap per vCPU but cannot run the work of 64-core, 256 GB nodes; nor can one
    of less than a whole vCPU (e2-micro's 0.25), whatever its memory per vCPU.
    ``memory_per_unit`` (GiB per vCPU the pool's own nodes have, from their reported
    capacity) takes the place of the pool machine's when given: it is what the work needs,
    also when the catalog lists no machine of the pool's own. With ``regions``, public
    offers outside them do not qualify (data residency, latency); without them and without
    ``any_region``, public offers on another continent than the fleet's own machines do not.
    With ``max_units``, a public or edge instance holding more pool units than that is left out
    where its location has one that does not (else only that location's smallest stays).
    """
    ref = reference_offer(catalog, resource, pool)
    if ref is None:
        return {}
    cat = qualifying_offers(catalog, resource, pool, min_tflops_ratio, min_memory_ratio, regions, memory_per_unit,
                            any_region, max_units)
    out: dict[str, Offer] = {}
    for loc, g in cat.groupby("location"):
        if loc not in LOCATIONS:
            continue
        if loc == "private" and ref["location"] == "private":
            if ref.name not in g.index:  # the pool's own machine has no price: nothing to size
                continue
            best = g.loc[ref.name]  # the private cloud is the fleet's own machines
        else:
            best = g.loc[(g["on_demand_price"] / g["pool_units"]).idxmin()]
        out[str(loc)] = _offer(best)
    return out


def _offer(row: pd.Series) -> Offer:
    """A :func:`qualifying_offers` row as an :class:`Offer`."""
    return Offer(
        location=str(row["location"]), provider=str(row["provider"]), region=str(row["region"]),
        instance_type=str(row["instance_type"]), units=float(row["pool_units"]), price=float(row["on_demand_price"]),
        reserved_1y=_maybe(row.get("reserved_1y_price")), reserved_3y=_maybe(row.get("reserved_3y_price")),
    )


def public_choices(qualifying: pd.DataFrame) -> list[Offer]:
    """The public rows of ``qualifying`` (:func:`qualifying_offers`) a load can run on: of each
    instance size, the cheapest per unit. Which is cheapest for a load depends on the load: in
    whole instances, a big machine bought for a small load is mostly idle."""
    pub = qualifying[qualifying["location"] == "public"]
    pub = pub.assign(_unit=pub["on_demand_price"] / pub["pool_units"])
    pub = pub.sort_values(["_unit", "provider", "region", "instance_type"], kind="stable")
    return [_offer(r) for _, r in pub.drop_duplicates("pool_units").iterrows()]


def qualifying_offers(catalog: pd.DataFrame, resource: str, pool: str, min_tflops_ratio: float = 1.0,
                      min_memory_ratio: float = 1.0, regions: tuple[str, ...] | None = None,
                      memory_per_unit: float | None = None, any_region: bool = True,
                      max_units: float | None = None) -> pd.DataFrame:
    """The priced catalog rows that can do a pool's work (see :func:`select_offers`), with
    ``pool_units``: the pool units one instance provides."""
    ref = reference_offer(catalog, resource, pool)
    # a price of 0 (or none) is not a free machine but an unknown price: not an offer
    cat = _machines(catalog, resource)
    cat = cat[cat["on_demand_price"] > 0].copy()
    if ref is None:
        return cat.iloc[0:0].assign(pool_units=pd.Series(dtype=float))
    ratio = pd.Series(1.0, index=cat.index)
    if resource == "gpu":
        # without TFLOPS on both sides a GPU cannot be compared: only the pool's own machine counts
        ref_tflops = float(ref.get("tflops", np.nan)) / float(ref["units"])
        ratio = _per_unit_tflops(cat) / ref_tflops if np.isfinite(ref_tflops) and ref_tflops > 0 \
            else pd.Series(np.nan, index=cat.index)
        ratio[cat.index == ref.name] = 1.0
    keep = (ratio >= min_tflops_ratio - 1e-9).fillna(False).astype(bool)
    if resource == "cpu" and "memory_gb" in cat:
        ref_memory = pd.to_numeric(pd.Series([ref.get("memory_gb")]), errors="coerce").iloc[0] / float(ref["units"])
        if memory_per_unit is not None and np.isfinite(memory_per_unit) and memory_per_unit > 0:
            ref_memory = float(memory_per_unit)
        if np.isfinite(ref_memory) and ref_memory > 0:
            # an offer whose memory is unknown cannot be shown to fit: left out, as a GPU without TFLOPS
            memory = pd.to_numeric(cat["memory_gb"], errors="coerce") / cat["units"]
            fits = (memory >= min_memory_ratio * ref_memory - 1e-9).fillna(False).astype(bool)
            # the pool's own machine runs its work by definition; a stand-in reference does not
            keep &= fits | ((cat.index == ref.name) & (ref["location"] == "private"))
    public = cat["location"] == "public"
    if regions is not None:
        keep &= ~public | cat["region"].astype(str).isin(list(regions))
    elif not any_region:
        own = catalog.loc[(catalog["location"] == "private") & (catalog["resource"] == resource), "region"]
        home = {c for c in map(continent, own) if c is not None}
        if home:  # a public region of unknown continent is not known to be far: kept
            where = cat["region"].map(continent)
            keep &= ~public | where.isna() | where.isin(home)
    cat, ratio = cat[keep], ratio[keep]
    cat = cat.assign(pool_units=cat["units"] * ratio)
    if max_units is not None and np.isfinite(max_units) and max_units > 0:
        bought = cat["location"] != "private"
        small = cat["pool_units"] <= max_units + 1e-9
        has_small = small.groupby(cat["location"]).transform("any")
        smallest = cat["pool_units"] == cat.groupby("location")["pool_units"].transform("min")
        cat = cat[~bought | small | (~has_small & smallest)]
    return cat


def _maybe(value: object) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def provisioned_cost(
    instances: np.ndarray, used_units: np.ndarray, offer: Offer, factors: LocationCost
) -> dict[str, float]:
    """Cost of running ``instances`` per hour that carry ``used_units`` per hour."""
    capacity = np.asarray(instances, dtype=float) * offer.units
    unit_price = float(factors.effective(offer.unit_price))
    compute = float((capacity * unit_price).sum())
    idle = np.clip(capacity - np.asarray(used_units, dtype=float), 0.0, None)
    return {"compute": compute, "idle_penalty": float((idle * unit_price * factors.idle_penalty).sum())}
