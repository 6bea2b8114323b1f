"""Event sets: which kinds of event a device logged together, and how often a failure followed
that set on other devices.

An error log says more by what comes together than by each kind alone: in the Azure PdM
tables (machines 1-10, 2015) ``error2`` logged alone was followed by a failure within a day
0 times in 69, ``error2`` with ``error3`` in the same hour 29 times in 29. Trees on counts per
kind must learn such a conjunction from a handful of failures. Here the feature builder gives
each row the newest set (the kinds logged in one clock hour, up to the row's time) within the
features' memory and its age; the predictor encodes the set as the share of such sets on its
training devices that a failure followed within ``[lead, horizon]`` (the label of the first
row that saw the set), pulled toward the base rate by ``PRIOR_WEIGHT`` sets, from the sets
whose outcome was known by the row's time (ordered target statistics): a row's own outcome
never reaches its feature, and rows scored later are encoded as the training rows were.
Encoded from all outcomes at once, a training row's feature would betray its label: two
devices with the same telemetry, one failing, would each be told the other's outcome.
Pure: arrays in, arrays out.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

SET = "event_set"  # the set's key, kinds joined by '+' (text: not a model input)
SET_HOURS = "event_set_hours"  # hours since the set's newest event
HAZARD = "event_set_hazard"  # the encoded set (a model input)
PRIOR_WEIGHT = 1.0  # the base rate counts as this many sets of each kind


def newest_sets(at: np.ndarray, logged: list[tuple[np.ndarray, object]],
                memory: pd.Timedelta) -> tuple[np.ndarray, np.ndarray]:
    """At each time of ``at``: the kinds logged in the clock hour of the newest event at or
    before it (only those at or before it), joined by '+', and the hours since that event;
    None and NaN where no event lies within ``memory`` before it. ``logged``: (event times,
    their kind or kinds) pairs."""
    at = np.asarray(at, dtype="datetime64[ns]")
    stamps = np.concatenate([np.asarray(s, dtype="datetime64[ns]") for s, _ in logged]) if logged else np.array(
        [], dtype="datetime64[ns]")
    kinds = np.concatenate([np.broadcast_to(np.asarray(k, dtype=object), (len(s),)) for s, k in logged]) if logged \
        else np.array([], dtype=object)
    keys, ages = np.full(len(at), None, dtype=object), np.full(len(at), np.nan)
    if len(stamps) == 0 or len(at) == 0:
        return keys, ages
    order = np.argsort(stamps, kind="stable")
    t = np.asarray(stamps, dtype="datetime64[ns]")[order]
    k = np.asarray(kinds).astype(str)[order]
    hour = t.astype("datetime64[h]")
    # the set up to each event: the kinds of its clock hour so far (events in an hour are few)
    running, seen, current = [], set(), None
    for h, kind in zip(hour, k):
        if h != current:
            seen, current = set(), h
        seen = seen | {kind}
        running.append("+".join(sorted(seen)))
    j = np.searchsorted(t, at, side="right") - 1
    ok = j >= 0
    age = np.where(ok, (at - t[np.maximum(j, 0)]) / np.timedelta64(1, "h"), np.nan)
    ok &= age <= memory / pd.Timedelta(hours=1)
    keys[ok] = np.asarray(running, dtype=object)[j[ok]]
    ages[ok] = age[ok]
    return keys, ages


@dataclass
class SetHazard:
    """The encoding learnt from training rows: each set seen, when its outcome became known
    (a horizon after it) and whether a failure followed it."""

    sets: pd.DataFrame = field(default_factory=lambda: pd.DataFrame({"k": [], "known": [], "y": []}))

    def fit(self, devices: np.ndarray, ts: pd.Series, keys: np.ndarray, hours: np.ndarray, y: np.ndarray,
            horizon: pd.Timedelta) -> SetHazard:
        """Learn from labelled training rows: a set's outcome is the label of the first row that
        saw it, known a horizon after the set (sets whose outcome is not known by the last row
        are left out)."""
        keys = np.asarray(keys, dtype=object)
        has = pd.notna(keys)
        t = pd.to_datetime(ts).to_numpy(dtype="datetime64[ns]")
        when = t - (np.nan_to_num(np.asarray(hours, dtype=float)) * 3.6e12).astype("timedelta64[ns]")
        frame = pd.DataFrame({"d": np.asarray(devices).astype(str), "k": keys, "w": when.astype("datetime64[m]"),
                              "h": hours})[has]
        first = frame.groupby(["d", "k", "w"], sort=False)["h"].idxmin().to_numpy()
        known = t[first] + np.timedelta64(horizon)
        keep = known <= t.max()
        self.sets = pd.DataFrame({"k": keys[first][keep].astype(str), "known": known[keep],
                                  "y": np.asarray(y)[first][keep].astype(float)}).sort_values("known", kind="stable")
        return self

    def encode(self, keys: np.ndarray, ts: pd.Series) -> np.ndarray:
        """Each row's set encoded from the sets whose outcome was known by the row's time (on
        any training device, its own past included): the share of them a failure followed,
        pulled toward the base rate known then by ``PRIOR_WEIGHT`` sets. A row's own outcome
        lies after it and never enters its feature; training rows and rows scored later are
        encoded alike (a live score, at the newest time, reads every set). NaN: no set."""
        keys = np.asarray(keys, dtype=object)
        has = pd.notna(keys)
        out = np.full(len(keys), np.nan)
        if not has.any():
            return out
        at = pd.to_datetime(ts).to_numpy(dtype="datetime64[ns]")[has]
        known, ys = self.sets["known"].to_numpy(dtype="datetime64[ns]"), self.sets["y"].to_numpy(dtype=float)
        n_all = np.searchsorted(known, at, side="right")
        base = np.divide(np.concatenate([[0.0], np.cumsum(ys)])[n_all], n_all, out=np.zeros(len(at)), where=n_all > 0)
        n, hits = np.zeros(len(at)), np.zeros(len(at))
        row_keys = keys[has].astype(str)
        for k, g in self.sets.groupby("k", sort=False):
            mine = row_keys == k
            c = np.searchsorted(g["known"].to_numpy(dtype="datetime64[ns]"), at[mine], side="right")
            n[mine], hits[mine] = c, np.concatenate([[0.0], np.cumsum(g["y"].to_numpy(dtype=float))])[c]
        out[has] = (hits + PRIOR_WEIGHT * base) / (n + PRIOR_WEIGHT)
        return out
