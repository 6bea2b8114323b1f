"""Spot-price spikes: the regular grid, the labels and the one feature builder.

Prices are change events (a price holds until the next row of its series). Each series
``(provider, zone, instance_type, product)`` is put on a regular grid by carrying the
last price forward. At grid time t the series is *spiking* when its price is at least
``k`` times its trailing median (up to t - 1) or at least its on-demand price; the label
is "spiking at some point in (t, t + horizon]".
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from anomaly.base import require_columns, short_duration

SERIES_KEY = ["provider", "zone", "instance_type", "product"]
NEVER_HOURS = 24.0 * 90


@dataclass(frozen=True)
class SpikePolicy:
    """Grid, spike definition, features and model size of the spike predictor."""

    freq: str = "1h"
    horizon: str = "6h"
    k: float = 2.0
    median_window: str = "7D"
    windows: tuple[str, ...] = ("6h", "24h", "72h")
    n_estimators: int = 300
    learning_rate: float = 0.05
    num_leaves: int = 31
    min_child_samples: int = 50
    # The alert threshold: the most recall among thresholds whose precision reaches this on
    # out-of-fold scores of the training span (``folds`` purged time blocks, each scored by a
    # model of the others); when none does, or with None, the threshold with the best F1 there.
    target_precision: float | None = 0.8
    folds: int = 5
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.k > 1:  # also refuses NaN
            raise ValueError(f"k must be > 1, got {self.k}")
        step, horizon = pd.Timedelta(self.freq), pd.Timedelta(self.horizon)
        if pd.isna(step) or step <= pd.Timedelta(0):
            raise ValueError(f"the grid step must be positive, got {self.freq!r}")
        if pd.isna(horizon) or horizon < step:
            shown = repr(self.horizon) if pd.isna(horizon) else short_duration(horizon)
            raise ValueError(f"horizon {shown} must be at least one grid step ({short_duration(step)})")
        if self.target_precision is not None and not 0 < self.target_precision <= 1:
            raise ValueError(f"target_precision must be in (0, 1], got {self.target_precision}")
        if self.folds < 2:
            raise ValueError(f"folds must be >= 2 (the out-of-fold threshold), got {self.folds}")
        if horizon % step != pd.Timedelta(0):
            raise ValueError(f"horizon {short_duration(horizon)} is not a whole number of grid steps "
                             f"({short_duration(step)})")


MAX_GRID_ROWS = 5_000_000  # about 1 GB of features; beyond it, a coarser grid is the answer


class SpikeGridTooLarge(ValueError):
    """The regular grid of the spot prices would not fit in memory at this frequency."""


class NoGridStep(ValueError):
    """No spot-price series reaches one step of the grid (a feed's first half-hour)."""


def _short(step: pd.Timedelta) -> str:
    """``1h``, ``1d`` or ``15min`` for a grid step."""
    for unit, size in (("d", pd.Timedelta(days=1)), ("h", pd.Timedelta(hours=1)), ("min", pd.Timedelta(minutes=1))):
        if step >= size and step % size == pd.Timedelta(0):
            return f"{step // size}{unit}"
    return str(step)


def resample_prices(prices: pd.DataFrame, freq: str, end: pd.Timestamp | None = None) -> pd.DataFrame:
    """Series key, ``region``, ``ts``, ``price`` on a regular grid (last price carried forward).

    Every series' grid runs from its first change (rounded up) to ``end`` (default: the
    last change of any series, rounded down), so the series line up. Raises
    :class:`SpikeGridTooLarge` when that grid would exceed ``MAX_GRID_ROWS`` rows.
    """
    require_columns(prices, [*SERIES_KEY, "ts", "price"], "spot prices")
    step = pd.Timedelta(freq)
    stop = (end if end is not None else prices["ts"].max()).floor(step)
    first = prices.groupby(SERIES_KEY, sort=False)["ts"].min()
    rows = int(np.clip((stop - first.dt.ceil(step)) // step + 1, 0, None).sum())
    if rows > MAX_GRID_ROWS:
        span = (stop - first.min()) / pd.Timedelta(days=1)
        raise SpikeGridTooLarge(
            f"spot prices: {len(first)} series over {span:.0f} days on a {_short(step)} grid is {rows:,} rows "
            f"(limit {MAX_GRID_ROWS:,}); use a coarser grid (spikes evaluate --freq 1d, for weekly price "
            "lists) or fewer series (the detect flow rates hourly: ingest only the markets you buy in)"
        )
    parts = []
    for key, g in prices.sort_values("ts").groupby(SERIES_KEY, sort=True):
        s = g.drop_duplicates("ts", keep="last").set_index("ts")["price"]
        grid = pd.date_range(s.index.min().ceil(step), stop, freq=step)
        if len(grid) == 0:
            continue
        part = pd.DataFrame({"ts": grid, "price": s.reindex(grid, method="ffill").to_numpy()})
        for col, value in zip(SERIES_KEY, key):
            part[col] = value
        part["region"] = g["region"].iloc[-1] if "region" in g.columns else ""
        parts.append(part)
    if not parts:
        raise NoGridStep("no spot-price series long enough for one grid step")
    out = pd.concat(parts, ignore_index=True)
    return out[[*SERIES_KEY, "region", "ts", "price"]]


def _trailing(s: pd.Series, window: str, how: str) -> pd.Series:
    return getattr(s.rolling(window, min_periods=1), how)()


def build_spike_frame(
    prices: pd.DataFrame, policy: SpikePolicy, on_demand: pd.DataFrame | None = None,
    end: pd.Timestamp | None = None,
) -> pd.DataFrame:
    """The grid with features, ``spiking`` (now) and ``label`` (NaN where the horizon
    runs past the data)."""
    grid = resample_prices(prices, policy.freq, end)
    if on_demand is not None:
        require_columns(on_demand, ["provider", "region", "instance_type", "on_demand_price"], "on-demand prices")
        od = on_demand[["provider", "region", "instance_type", "on_demand_price"]].drop_duplicates(
            ["provider", "region", "instance_type"], keep="last")
        grid = grid.merge(od, on=["provider", "region", "instance_type"], how="left")
    else:
        grid = grid.assign(on_demand_price=np.nan)
    steps = int(pd.Timedelta(policy.horizon) / pd.Timedelta(policy.freq))
    parts = []
    for _key, g in grid.groupby(SERIES_KEY, sort=True):
        g = g.set_index("ts").copy()
        price = g["price"]
        med = price.rolling(policy.median_window, min_periods=1).median().shift(1).fillna(price)
        ratio = price / med.where(med > 0)
        od_ratio = price / g["on_demand_price"].where(g["on_demand_price"] > 0)  # 0: unknown, not free
        spiking = ((ratio >= policy.k) | (od_ratio >= 1.0)).astype(float)
        g["ratio"] = ratio
        g["od_ratio"] = od_ratio
        g["spiking"] = spiking
        logret = np.log(price.where(price > 0)).diff().fillna(0.0)
        changed = (price.diff().fillna(0.0) != 0).astype(float)
        for w in policy.windows:
            g[f"vol_{w}"] = _trailing(logret, w, "std")
            g[f"changes_{w}"] = _trailing(changed, w, "sum")
            g[f"max_ratio_{w}"] = _trailing(ratio, w, "max")
            g[f"spike_frac_{w}"] = _trailing(spiking, w, "mean")
        g["ratio_change_1"] = ratio.diff().fillna(0.0)
        last_spike = pd.Series(np.where(spiking > 0, g.index.to_numpy(), np.datetime64("NaT")),
                               index=g.index).ffill()
        hours = (g.index.to_series() - last_spike) / pd.Timedelta(hours=1)
        g["hours_since_spike"] = hours.fillna(NEVER_HOURS).clip(upper=NEVER_HOURS)
        future = spiking[::-1].rolling(steps, min_periods=steps).max()[::-1].shift(-1)
        g["label"] = future
        parts.append(g.reset_index())
    out = pd.concat(parts, ignore_index=True)
    out["hour"] = out["ts"].dt.hour
    out["weekday"] = out["ts"].dt.weekday
    # The same instance type in the other zones: how many are spiking, and how hard.
    peers = ["provider", "instance_type", "product", "ts"]
    grp = out.groupby(peers)
    n = grp["spiking"].transform("size")
    others = (n - 1).where(n > 1)
    out["peer_spiking_frac"] = ((grp["spiking"].transform("sum") - out["spiking"]) / others).fillna(0.0)
    out["peer_mean_ratio"] = ((grp["ratio"].transform("sum") - out["ratio"]) / others)
    out["peer_max_ratio"] = grp["ratio"].transform("max")
    return out.sort_values([*SERIES_KEY, "ts"]).reset_index(drop=True)


def spike_feature_span(policy: SpikePolicy) -> pd.Timedelta:
    """How far back a row's features read: the longest trailing window."""
    return max(pd.Timedelta(w) for w in (policy.median_window, *policy.windows))


def spike_feature_columns(frame: pd.DataFrame) -> list[str]:
    """The model's inputs."""
    skip = {*SERIES_KEY, "region", "ts", "price", "on_demand_price", "label"}
    return [c for c in frame.columns if c not in skip]
