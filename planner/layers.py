"""The layered fill of a split: private, then edge, carry the bottom of the demand curve,
each in whole machines sized to carry its share of the unit-hours, and public on-demand the
rest (the peaks). See :mod:`planner.allocation`."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from planner.cost import Offer


def layer_top(demand: np.ndarray, volume: float) -> float:
    """The least capacity ``c`` whose bottom layer of ``demand``, ``min(demand, c)``, carries
    ``volume`` unit-hours (the whole peak when ``volume`` is all of it)."""
    d = np.sort(np.asarray(demand, dtype=float))
    if volume <= 0 or d.size == 0:
        return 0.0
    # sum(min(d, c)) = sum of the values below c + c x the count at or above it
    below = np.concatenate([[0.0], np.cumsum(d)])
    above = d.size - np.arange(d.size + 1)
    carried = below[:-1] + d * above[:-1]  # at c = d[k]
    k = int(np.searchsorted(carried, volume))
    if k >= d.size:  # all of it (the sums can differ in the last bits): the peak
        return float(d[-1])
    return float((volume - below[k]) / above[k])


def layered(demand: np.ndarray, shares: Mapping[str, float], offers: dict[str, Offer]
            ) -> tuple[dict[str, tuple[float, np.ndarray]], np.ndarray]:
    """Private, then edge, on the bottom of the demand curve, each in whole machines sized to
    carry its share of the unit-hours. A location with no offer buys nothing: its share goes
    to public (``spill``, that share of every hour), and the other layer sits at the bottom."""
    fixed: dict[str, tuple[float, np.ndarray]] = {}
    spill = np.zeros_like(demand)
    total, floor, share = float(demand.sum()), 0.0, 0.0
    for loc in ("private", "edge"):
        if float(shares[loc]) == 0:
            continue
        offer = offers.get(loc)
        if offer is None:
            spill += demand * float(shares[loc])
            continue
        share += float(shares[loc])
        top = max(layer_top(demand, share * total), floor)
        instances = max(float(np.ceil((top - floor) / offer.units - 1e-9)), 0.0)
        served = np.clip(demand - floor, 0.0, instances * offer.units)
        fixed[loc] = (instances, served)
        floor += instances * offer.units
    return fixed, spill
