"""The fault predictor's one feature builder (used by fit and predict) and its labels.

Telemetry is the long contract ``ts, device_id, node_id, metric, value`` at any
frequency; windows are durations, so the same policy works for 1-minute DCGM data and
hourly PdM data. Everything at time t uses only rows at or before t, and of the
telemetry only those in the last ``FaultPolicy.memory`` (the longest window, or a longer
``event_memory``): "hours since the last event" of a telemetry counter is capped there.
So a row's features are the same whether they are built from all of the history
(training) or from the ``feature_span`` before it plus each metric's reading just before
that, if within another span (scoring in the detect flow, per device; a counter polled
less often than that loses its first change in the span). Event tables passed whole (error logs,
maintenance) are not capped.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from anomaly.base import require_columns, short_duration
from anomaly.event_sets import SET, SET_HOURS, newest_sets
from anomaly.fault_dcgm import dcgm_features, dcgm_signals, peer_deviation

NEVER_HOURS = 24.0 * 365  # "time since last event" of an event table when there was none


@dataclass(frozen=True)
class FaultPolicy:
    """Labelling, features and alert-threshold policy of the fault predictor."""

    lead: str = "30min"  # an alert must come at least this long before the failure
    horizon: str = "24h"  # ... and at most this long before it
    windows: tuple[str, ...] = ("3h", "24h")
    # how far "hours since the last event" of a telemetry counter looks back (None: the longest
    # window); longer means more telemetry read at each scoring
    event_memory: str | None = None
    event_patterns: tuple[str, ...] = ("ecc", "xid", "error")  # metrics whose changes are events
    target_precision: float | None = 0.8  # alert threshold: most recall at this alert precision
    cost_ratio: float | None = None  # or: cost of a missed failure / cost of a false alert
    # Small trees: failures are rare and deep trees memorise them (on PdM 4 leaves catch 3/4,
    # 15 leaves 2/4); 200 of them, as fewer stop short at this rate (on PdM's 9 splits 150-300 catch 22 of 24).
    n_estimators: int = 200
    learning_rate: float = 0.05
    num_leaves: int = 4
    min_child_samples: int = 10
    # Other (num_leaves, n_estimators, min_child_samples) settings tried beside the ones above:
    # each is scored by the same inner out-of-fold threshold choice, inside the training span
    # only (nested: a split's scored span and devices never see it), and the best is kept
    # (``FaultPredictor.params_``). Empty: the settings above, no search.
    search: tuple[tuple[int, int, int], ...] = ((8, 200, 20), (4, 400, 10))
    # The alert threshold is chosen on out-of-fold scores. "time": the training span cut into
    # ``folds`` blocks, each scored by a model of the others (rows whose labels reach into the
    # block, or whose features reach back into it, left out): the same fleet, later. "device":
    # folds of devices, devices never seen (a model scores those higher, so this threshold
    # comes out higher). "auto": each as its task asks, a time-fold predictor for the devices
    # the fit saw and a device-fold one for devices new to it (twice the fits).
    threshold_folds: str = "auto"
    folds: int = 5
    # What scores after the fit: "folds", the mean of the chosen setting's out-of-fold models,
    # whose scores set the threshold; "refit", that setting trained on all rows, which scores
    # on a scale of its own (unseen synthetic GPUs, seeds 1-3, before the ECC share features:
    # alerts 0.68 precise, the fold mean's 0.77, at the same threshold rule).
    final_model: str = "folds"
    seed: int = 0
    # Training builds at most this many feature rows (every k-th reading of each device beyond
    # it), so the daily retraining's memory stops growing with the telemetry kept; None: all.
    max_train_rows: int | None = 1_000_000

    def __post_init__(self) -> None:
        if pd.Timedelta(self.lead) < pd.Timedelta(0):
            raise ValueError("lead must be >= 0")
        if pd.Timedelta(self.horizon) <= pd.Timedelta(self.lead):
            raise ValueError(f"horizon ({short_duration(self.horizon)}) must be longer than lead "
                             f"({short_duration(self.lead)})")
        if self.target_precision is None and self.cost_ratio is None:
            raise ValueError("set target_precision or cost_ratio to choose the alert threshold")
        if not self.windows or min(pd.Timedelta(w) for w in self.windows) <= pd.Timedelta(0):
            raise ValueError(f"feature windows must be positive durations, got {self.windows}")
        if self.threshold_folds not in ("auto", "time", "device"):
            raise ValueError(f"threshold_folds must be 'auto', 'time' or 'device', got {self.threshold_folds!r}")
        if self.final_model not in ("folds", "refit"):
            raise ValueError(f"final_model must be 'folds' or 'refit', got {self.final_model!r}")
        if self.folds < 2:
            raise ValueError(f"folds must be >= 2 (the out-of-fold threshold), got {self.folds}")
        if self.max_train_rows is not None and self.max_train_rows < 1:
            raise ValueError(f"max_train_rows must be a positive number of rows or None, got {self.max_train_rows}")
        for setting in self.search:
            if len(setting) != 3 or min(setting) < 1:
                raise ValueError(f"search settings are positive (num_leaves, n_estimators, min_child_samples), "
                                 f"got {setting}")
        if self.event_memory is not None and not pd.Timedelta(self.event_memory) > pd.Timedelta(0):
            raise ValueError(f"event_memory must be a positive duration, got {self.event_memory!r}")

    def settings(self) -> list[dict[str, int]]:
        """The tree settings the fit chooses among: the policy's own first (it wins ties)."""
        own = (self.num_leaves, self.n_estimators, self.min_child_samples)
        out = [own] + [tuple(s) for s in self.search if tuple(s) != own]
        return [dict(zip(("num_leaves", "n_estimators", "min_child_samples"), s)) for s in out]

    @property
    def memory(self) -> pd.Timedelta:
        """How far back any telemetry feature of a row looks."""
        spans = [pd.Timedelta(w) for w in self.windows]
        if self.event_memory is not None:
            spans.append(pd.Timedelta(self.event_memory))
        return max(spans)


def feature_span(policy: FaultPolicy) -> pd.Timedelta:
    """Telemetry a row's features need: its memory and an hour more, so the sample before
    the memory starts is there to tell whether the first one in it changed a counter."""
    return policy.memory + pd.Timedelta(hours=1)


def _is_event_metric(metric: str, patterns: tuple[str, ...]) -> bool:
    name = metric.lower()
    return any(p in name for p in patterns)


def _families(names: list[str]) -> dict[str, list[str]]:
    """Event kinds that share a family, by the letters their name starts with (``error1`` ..
    ``error5`` -> ``error``, ``xid_48`` and ``xid_79`` -> ``xid``, ``maint_comp1`` -> ``maint``):
    only families of two or more kinds. Each kind alone may be too rare to learn from (PdM's
    error5 comes a few times a quarter), while "some error in the last day" is common enough,
    and precedes every PdM failure."""
    out: dict[str, list[str]] = {}
    for name in names:
        head = re.match(r"[A-Za-z]*", name).group(0).lower()
        if head:
            out.setdefault(head, []).append(name)
    return {f: members for f, members in out.items() if len(members) >= 2}


def _event_features(times: np.ndarray, event_times: np.ndarray, windows: list[pd.Timedelta],
                    prefix: str, memory: pd.Timedelta | None) -> dict[str, np.ndarray]:
    """Counts of events in each trailing window and hours since the last one (at most
    ``memory``, also when there was none; ``NEVER_HOURS`` without a memory), at ``times``."""
    out: dict[str, np.ndarray] = {}
    event_times = np.sort(event_times)
    upto = np.searchsorted(event_times, times, side="right")
    for w in windows:
        since = np.searchsorted(event_times, times - np.timedelta64(w), side="right")
        out[f"{prefix}_count_{_tag(w)}"] = (upto - since).astype(float)
    cap = NEVER_HOURS if memory is None else memory / pd.Timedelta(hours=1)
    if event_times.size == 0:
        out[f"{prefix}_hours_since"] = np.full(len(times), cap)
        return out
    last = event_times[np.maximum(upto - 1, 0)]
    hours = (times - last) / np.timedelta64(1, "h")
    out[f"{prefix}_hours_since"] = np.minimum(np.where(upto > 0, hours, cap), cap)
    return out


def _text_codes(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes of ``values`` by their text (so ``1`` and ``"1"`` are one, ``1`` and
    ``1.0`` two), -1 where missing, and the texts in sorted order: code ``i`` is the
    ``i``-th text."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        # the categories' texts (those in use), not a text per row: the warehouse reads names
        # as categories, and 40M rows of Python strings cost gigabytes
        codes = values.cat.codes.to_numpy().astype(np.int64)
        used = np.flatnonzero(np.bincount(codes[codes >= 0], minlength=len(values.cat.categories)))
        names, inverse = np.unique(np.array([str(c) for c in values.cat.categories[used]], dtype=object),
                                   return_inverse=True)
        lookup = np.full(len(values.cat.categories) + 1, -1, dtype=np.int64)  # the last: missing
        lookup[used] = inverse
        return lookup[codes], names
    if values.dtype == object:
        # mixed types: the text decides; missing stays missing (pandas 2's astype(str) would
        # name it 'None' or 'nan', pandas 3's keeps it missing: do not rely on either)
        values = values.astype(object).map(str, na_action="ignore")
    codes, uniques = pd.factorize(values)
    names, inverse = np.unique(np.array([str(u) for u in uniques], dtype=object), return_inverse=True)
    return np.where(codes >= 0, inverse[np.maximum(codes, 0)] if len(inverse) else 0, -1), names


def _pivot(dev: np.ndarray, ts: np.ndarray, metric: np.ndarray, value: np.ndarray, n_metrics: int
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Long readings -> (device code, time, values[row, metric]) per device and time, sorted
    by device then time: the mean of the readings of a metric at that time, NaN if none, and
    no row where no metric has a value (as ``pivot_table`` gives, in numpy)."""
    # a reading without a time, device or metric belongs to no row (pivot_table drops it too)
    known = ~np.isnat(ts) & (dev >= 0) & (metric >= 0)
    dev, ts, metric, value = dev[known], ts[known], metric[known], value[known]
    t = ts.astype(np.int64)
    order = np.lexsort((t, dev))
    dev, t, metric, value = dev[order], t[order], metric[order], value[order]
    new_row = np.r_[True, (dev[1:] != dev[:-1]) | (t[1:] != t[:-1])]
    row = np.cumsum(new_row) - 1
    n_rows = int(row[-1]) + 1 if len(row) else 0
    ok = ~np.isnan(value)
    cell = row[ok] * n_metrics + metric[ok]
    sums = np.bincount(cell, weights=value[ok], minlength=n_rows * n_metrics).reshape(n_rows, n_metrics)
    counts = np.bincount(cell, minlength=n_rows * n_metrics).reshape(n_rows, n_metrics)
    with np.errstate(invalid="ignore", divide="ignore"):
        values = np.where(counts > 0, sums / counts, np.nan)
    keep = counts.sum(axis=1) > 0
    starts = np.flatnonzero(new_row)
    return dev[starts][keep], t[starts][keep].astype("datetime64[ns]"), values[keep]


PIVOT_BLOCK = 1 << 22  # readings: the long table is pivoted a block of whole devices at a time


def _pivot_blocks(dev: np.ndarray, ts: np.ndarray, metric: np.ndarray, value: np.ndarray, n_metrics: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_pivot`, a block of whole devices of about ``PIVOT_BLOCK`` readings at a time:
    the same rows (each device's readings keep their order), with its sort's temporaries a
    block's size rather than the whole history's."""
    if len(dev) <= PIVOT_BLOCK or not (dev >= 0).any():
        return _pivot(dev, ts, metric, value, n_metrics)
    order = np.argsort(dev, kind="stable")
    skip = int((dev < 0).sum())  # readings of no device sort first (and belong to no row)
    ends = skip + np.cumsum(np.bincount(dev[dev >= 0]))  # each device's end in ``order``
    parts, lo = [], skip
    while lo < len(dev):
        # whole devices of up to PIVOT_BLOCK readings; a device longer than that alone
        last = max(int(np.searchsorted(ends, lo + PIVOT_BLOCK, side="right")) - 1,
                   int(np.searchsorted(ends, lo, side="right")))
        take = order[lo:int(ends[last])]
        parts.append(_pivot(dev[take], ts[take], metric[take], value[take], n_metrics))
        lo = int(ends[last])
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))


def _naive_utc(ts: pd.Series) -> pd.Series:
    return ts.dt.tz_convert("UTC").dt.tz_localize(None) if ts.dt.tz is not None else ts


def _tag(w: pd.Timedelta) -> str:
    hours = w / pd.Timedelta(hours=1)
    return f"{hours:g}h"


def _rolling(flat: pd.DataFrame, dev: np.ndarray, hours: pd.Series, w: pd.Timedelta) -> dict[str, np.ndarray]:
    """Rolling mean, std, max and slope (per hour) of each metric over a trailing time
    window, per device: ``flat`` (a column per metric) is indexed by ts, its rows sorted
    by ``dev`` (integer device codes) then ts; ``hours`` is each row's hours since its
    device's first row. One grouped rolling call per statistic for all devices (each
    device's windows start at its own first row, as a rolling call per device would)."""
    tag = _tag(w)
    metrics = list(flat.columns)
    r = flat.groupby(dev, sort=False).rolling(w, min_periods=1)
    mean, std, top = r.mean().to_numpy(), r.std().to_numpy(), r.max().to_numpy()
    r_t = hours.groupby(dev, sort=False).rolling(w, min_periods=2)
    mean_t, var_t = r_t.mean().to_numpy(), r_t.var(ddof=0).to_numpy()
    xh = flat.mul(hours.to_numpy(), axis=0)
    mean_xh = xh.groupby(dev, sort=False).rolling(w, min_periods=2).mean().to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = (mean_xh - mean * mean_t[:, None]) / np.where(var_t > 0, var_t, np.nan)[:, None]
    # one contiguous row per metric (columns of a row-major array are strided: slow to frame)
    mean, std, top, slope = (np.ascontiguousarray(a.T) for a in (mean, std, top, slope))
    out: dict[str, np.ndarray] = {}
    for j, col in enumerate(metrics):
        out[f"{col}_mean_{tag}"] = mean[j]
        out[f"{col}_std_{tag}"] = std[j]
        out[f"{col}_max_{tag}"] = top[j]
        out[f"{col}_slope_{tag}"] = slope[j]
    return out


ROLLING_BLOCK = 1 << 19  # feature rows: rolling statistics go a block of devices at a time


def _rolling_blocks(flat: pd.DataFrame, dev: np.ndarray, hours: pd.Series, windows: list[pd.Timedelta],
                    starts: np.ndarray, ends: np.ndarray, rows: np.ndarray) -> dict[str, np.ndarray]:
    """:func:`_rolling` over each window at ``rows`` (sorted), a block of whole devices of
    about ``ROLLING_BLOCK`` rows at a time: each device's statistics are its own, so the
    blocks give what one pass over all devices gives, with its temporaries a block's size."""
    parts: list[dict[str, np.ndarray]] = []
    for lo, hi, take in _device_blocks(starts, ends, rows):
        part: dict[str, np.ndarray] = {}
        for w in windows:
            part.update({k: v[take] for k, v in _rolling(flat.iloc[lo:hi], dev[lo:hi], hours.iloc[lo:hi], w).items()})
        parts.append(part)
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _device_blocks(starts: np.ndarray, ends: np.ndarray, rows: np.ndarray):
    """(lo, hi, take): blocks ``[lo, hi)`` of whole devices of about ``ROLLING_BLOCK`` rows
    (a device longer than that alone), and the ``rows`` inside each, relative to ``lo``."""
    first = 0
    while first < len(starts):
        last = max(int(np.searchsorted(ends, ends[first] - 1 + ROLLING_BLOCK, side="right")), first + 1)
        lo, hi = int(starts[first]), int(ends[last - 1])
        yield lo, hi, rows[np.searchsorted(rows, lo):np.searchsorted(rows, hi)] - lo
        first = last


def _dcgm_blocks(metrics: list[str], values: np.ndarray, dev: np.ndarray, times: np.ndarray, node: np.ndarray,
                 windows: list[pd.Timedelta], starts: np.ndarray, ends: np.ndarray,
                 rows: np.ndarray) -> dict[str, np.ndarray]:
    """:func:`dcgm_features` at ``rows``, a block of whole devices at a time; the one feature
    that looks across devices (temperature against the node's other GPUs) is built whole."""
    found = dcgm_signals(metrics)
    peers = peer_deviation(values[:, found["temp"]], node, times) if "temp" in found else None
    parts = [{k: v[take] for k, v in dcgm_features(metrics, values[lo:hi], dev[lo:hi], times[lo:hi], node[lo:hi],
                                                    windows, None if peers is None else peers[lo:hi]).items()}
             for lo, hi, take in _device_blocks(starts, ends, rows)]
    return {k: np.concatenate([p[k] for p in parts]) for k in (parts[0] if parts else {})}


def _latest(flat: pd.DataFrame, dev: np.ndarray, hours: pd.Series, times: np.ndarray, until: np.ndarray,
            w: pd.Timedelta) -> dict[str, np.ndarray]:
    """What :func:`_rolling` gives at each device's latest row only (``until``: that row's
    time, on every row of the device), from one grouped aggregation of the rows in the
    window (T - w, T] of each device: no rolling pass over the rest."""
    tag = _tag(w)
    inside = times > until - np.timedelta64(w)
    code, h = dev[inside], hours.to_numpy()[inside]
    sub = flat[inside]
    sub = sub.where(np.isfinite(sub.to_numpy()))  # rolling skips an infinite reading too
    g = sub.groupby(code, sort=True)  # every device's latest row is inside: one row per device
    valid = g.count().to_numpy()
    mean, std, top = g.mean().to_numpy(), g.std().to_numpy(), g.max().to_numpy()
    ht = pd.Series(h).groupby(code, sort=True)
    rows = ht.size().to_numpy()
    _, at = np.unique(code, return_inverse=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        mh = ht.mean().to_numpy()
        var_t = np.where(rows >= 2, ht.var(ddof=0).to_numpy(), np.nan)
        # rolling's mean(x h) - mean(x) mean(h) (x over its readings, h over all rows), centred
        # so that a metric of 1e9 loses no digits: mean((x - mx)(h - mh)) + mx (mh_x - mh)
        x = sub.to_numpy()
        dh = h - mh[at]
        xs = pd.DataFrame((x - mean[at]) * dh[:, None]).groupby(code, sort=True).sum().to_numpy()
        h_x = pd.DataFrame(np.where(np.isnan(x), np.nan, h[:, None])).groupby(code, sort=True).mean().to_numpy()
        cov = xs / valid + np.where(valid == rows[:, None], 0.0, mean * (h_x - mh[:, None]))
        cov = np.where(valid >= 2, cov, np.nan)
        slope = cov / np.where(var_t > 0, var_t, np.nan)[:, None]
    out: dict[str, np.ndarray] = {}
    for j, col in enumerate(flat.columns):
        out[f"{col}_mean_{tag}"] = mean[:, j].copy()
        out[f"{col}_std_{tag}"] = std[:, j].copy()
        out[f"{col}_max_{tag}"] = top[:, j].copy()
        out[f"{col}_slope_{tag}"] = slope[:, j].copy()
    return out


def build_fault_features(
    telemetry: pd.DataFrame,
    policy: FaultPolicy,
    events: pd.DataFrame | None = None,
    devices: pd.DataFrame | None = None,
    latest_only: bool = False,
    max_rows: int | None = None,
) -> pd.DataFrame:
    """One row per (device_id, ts) of telemetry with the model's features.

    ``events`` (optional) is ``ts, device_id, event_type`` (e.g. error logs, past
    maintenance); ``devices`` (optional) is ``device_id, age_days``. With
    ``latest_only`` only each device's latest row is built (what scoring needs), with the
    same features, without a rolling pass over the device's other rows. With ``max_rows``,
    a history of more rows than that builds every k-th row of each device (k the smallest
    that fits), each with the features it has built whole: a training set whose memory stops
    growing with the history.
    """
    require_columns(telemetry, ["ts", "device_id", "metric", "value"], "telemetry")
    if telemetry.empty:
        raise ValueError("telemetry is empty: no device to build features for")
    windows = [pd.Timedelta(w) for w in policy.windows]
    stamps = pd.Series(pd.to_datetime(telemetry["ts"]))  # zone-aware times come back in their zone
    dev_of_row, dev_names = _text_codes(telemetry["device_id"])
    metric_of_row, metric_names = _text_codes(telemetry["metric"])
    metrics = [str(m) for m in metric_names]
    event_metrics = [m for m in metrics if _is_event_metric(m, policy.event_patterns)]
    if events is not None:
        require_columns(events, ["ts", "device_id", "event_type"], "events")
        ev_types = sorted(events["event_type"].astype(str).unique())
        ev_by_dev = {str(d): g for d, g in events.groupby(events["device_id"].astype(str))}
    else:
        ev_types, ev_by_dev = [], {}
    ages = (  # a device listed twice keeps its first age
        devices.assign(device_id=devices["device_id"].astype(str)).drop_duplicates("device_id")
        .set_index("device_id")["age_days"]
        if devices is not None else None
    )
    # each device's node: its earliest reading that names one (the first of those in the
    # frame's order at equal times), whatever order the readings come in
    node_of_dev = np.full(len(dev_names), None, dtype=object)
    stamp_ns = _naive_utc(stamps).to_numpy(dtype="datetime64[ns]")
    if "node_id" in telemetry.columns:
        named = np.flatnonzero(telemetry["node_id"].notna().to_numpy() & (dev_of_row >= 0) & ~np.isnat(stamp_ns))
        at = stamp_ns[named].astype(np.int64)
        soonest = pd.Series(at).groupby(dev_of_row[named]).min()  # no sort of the whole history
        named = named[at == soonest.reindex(dev_of_row[named]).to_numpy()]
        seen, first = np.unique(dev_of_row[named], return_index=True)
        node_of_dev[seen] = telemetry["node_id"].iloc[named[first]].to_numpy(dtype=object)
    # one row per device and time, sorted by device then time, a column per metric
    dev_code, times, values = _pivot_blocks(dev_of_row, stamp_ns,
                                     metric_of_row, pd.to_numeric(telemetry["value"]).to_numpy(dtype=float),
                                     len(metrics))
    if not len(dev_code):
        raise ValueError("telemetry has no reading with a value: no feature row to build")
    dev_ids = dev_names[dev_code]
    flat = pd.DataFrame(values, index=pd.DatetimeIndex(times, name="ts"), columns=metrics)
    # each device's rows are one span [start, end): its first and latest times are at the ends
    starts = np.flatnonzero(np.r_[True, dev_code[1:] != dev_code[:-1]])
    ends = np.r_[starts[1:], len(dev_ids)]
    sizes = ends - starts
    hours = pd.Series((times - np.repeat(times[starts], sizes)) / np.timedelta64(1, "h"), index=flat.index)
    # the rows built: each device's latest, every row, or every k-th of each device's rows so
    # that at most ``max_rows`` are built (a training set that stops growing with the history)
    if latest_only:
        rows = ends - 1
    elif max_rows is not None and len(dev_ids) > max_rows:
        every = -(-len(dev_ids) // max_rows)
        rows = np.flatnonzero((np.arange(len(dev_ids)) - np.repeat(starts, sizes)) % every == 0)
    else:
        rows = np.arange(len(dev_ids))
    feats: dict[str, np.ndarray] = {c: np.ascontiguousarray(values[rows, j]) for j, c in enumerate(metrics)}
    if latest_only:
        for w in windows:
            feats.update(_latest(flat, dev_code, hours, times, np.repeat(times[ends - 1], sizes), w))
        # GPU signals as DCGM exposes them (Xid classes, ECC increments, temperature against the
        # device's own baseline and its node's peers, power jitter), from the same table
        feats.update({k: np.ascontiguousarray(v[rows])
                      for k, v in dcgm_features(metrics, values, dev_code, times, node_of_dev[dev_code], windows).items()})
    else:
        feats.update(_rolling_blocks(flat, dev_code, hours, windows, starts, ends, rows))
        feats.update(_dcgm_blocks(metrics, values, dev_code, times, node_of_dev[dev_code], windows, starts, ends, rows))
    # an event is a reading that differs from the one before it on its device (a counter
    # going up, a new Xid code); a device's first reading has nothing to differ from, so it
    # is none, which is also what a scoring window that starts mid-history sees
    happened = {}
    for m in event_metrics:
        x = pd.Series(values[:, metrics.index(m)])
        before = x.groupby(dev_code, sort=False).ffill().groupby(dev_code, sort=False).shift(1)
        happened[m] = (x.notna() & (x > 0) & before.notna() & (x != before)).to_numpy()
    # the event features count within each device's own rows: numpy over each device's span;
    # per kind, and per family of kinds (any error, any Xid)
    metric_families, type_families = _families(event_metrics), _families(ev_types)
    per_device: list[dict[str, np.ndarray]] = []
    set_keys: list[np.ndarray] = []
    for a, b in zip(starts, ends):
        t, dev = times[a:b], str(dev_ids[a])
        at = times[rows[np.searchsorted(rows, a):np.searchsorted(rows, b)]]
        part: dict[str, np.ndarray] = {}
        for m in event_metrics:
            part.update(_event_features(at, t[happened[m][a:b]], windows, f"ev_{m}", policy.memory))
        dev_events = ev_by_dev.get(dev)
        kinds = dev_events["event_type"].astype(str).to_numpy() if dev_events is not None else np.array([])
        stamps_of = dev_events["ts"].to_numpy(dtype="datetime64[ns]") if dev_events is not None else None
        kind_times = {et: stamps_of[kinds == et] if stamps_of is not None else np.array([], dtype="datetime64[ns]")
                      for et in ev_types}
        for et in ev_types:
            part.update(_event_features(at, kind_times[et], windows, f"event_{et}", None))
        for fam, members in metric_families.items():
            mask = np.zeros(b - a, dtype=bool)
            for m in members:
                mask |= happened[m][a:b]
            part.update(_event_features(at, t[mask], windows, f"ev_{fam}_all", policy.memory))
        for fam, members in type_families.items():
            fam_times = np.concatenate([kind_times[et] for et in members])
            part.update(_event_features(at, fam_times, windows, f"event_{fam}_all", None))
        if event_metrics or ev_types:  # the newest set of kinds logged together (counters and table alike)
            logged = [(t[happened[m][a:b]], m) for m in event_metrics] + [(stamps_of, kinds)] * (stamps_of is not None)
            keys, part[SET_HOURS] = newest_sets(at, logged, policy.memory)
            set_keys.append(keys)
        per_device.append(part)
    for key in (per_device[0] if per_device else {}):
        feats[key] = np.concatenate([part[key] for part in per_device]).astype(float)
    if set_keys:
        feats[SET] = np.concatenate(set_keys)
    dev_ids, times, dev_code = dev_ids[rows], times[rows], dev_code[rows]
    feats["age_days"] = (pd.Series(dev_ids).map(ages).to_numpy(dtype=float) if ages is not None
                         else np.full(len(dev_ids), np.nan))
    ids = {"ts": times if stamps.dt.tz is None else pd.DatetimeIndex(times).tz_localize("UTC").tz_convert(stamps.dt.tz),
           "device_id": dev_ids, "node_id": node_of_dev[dev_code]}
    # built at once, a block per column (stacking 100s of MB is slow); inserting the ids after
    # would warn of a fragmented frame once there are 100 feature columns
    return pd.DataFrame({**ids, **feats}, copy=False)


def label_failures(features: pd.DataFrame, failures: pd.DataFrame, policy: FaultPolicy) -> np.ndarray:
    """1 where the device fails within [ts + lead, ts + horizon], else 0."""
    require_columns(failures, ["ts", "device_id"], "failures")
    lead, horizon = pd.Timedelta(policy.lead), pd.Timedelta(policy.horizon)
    y = np.zeros(len(features), dtype=int)
    by_dev = {str(d): np.sort(g["ts"].to_numpy(dtype="datetime64[ns]"))
              for d, g in failures.groupby(failures["device_id"].astype(str))}
    for dev, idx in features.groupby("device_id", sort=False).indices.items():
        f = by_dev.get(str(dev))
        if f is None or f.size == 0:
            continue
        t = features["ts"].to_numpy(dtype="datetime64[ns]")[idx]
        j = np.searchsorted(f, t + np.timedelta64(lead), side="left")
        nxt = np.where(j < f.size, f[np.minimum(j, f.size - 1)], np.datetime64("NaT"))
        y[idx] = ((j < f.size) & (nxt <= t + np.timedelta64(horizon))).astype(int)
    return y


def feature_columns(features: pd.DataFrame) -> list[str]:
    """The model's inputs: everything but the identifiers and the event set's key."""
    return [c for c in features.columns if c not in ("device_id", "node_id", "ts", SET)]
