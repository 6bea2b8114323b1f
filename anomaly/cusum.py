"""Two-sided Page CUSUM burst detector on robust, seasonally adjusted residuals.

``fit`` learns, per series, the residual scale (MAD) and the slack ``k`` and threshold
``h`` that give the target in-control average run length (ARL) on the series' own
history, then keeps a :class:`CusumState` per series. ``detect`` continues from those
states and returns burst events plus the new states, which serialise to plain dicts so
the ``detect`` flow can resume exactly where it stopped.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator

from anomaly.base import check_fitted, infer_freq, require_columns
from anomaly.calibration import H_GRID, calibrate_cusum
from anomaly.seasonal import robust_scale, seasonal_baseline, to_grid

log = logging.getLogger(__name__)

MIN_RESIDUALS = 24  # fewer residuals than this cannot say what "in control" looks like
TIME_FIELDS = ("last_ts", "pos_start", "neg_start", "active_onset", "active_detected", "last_event", "calibrated_at")
# what a recalibration carries over: the running statistics and the burst in progress
RUNNING_FIELDS = (
    "memory", "last_ts", "s_pos", "s_neg", "pos_start", "neg_start", "pos_peak", "neg_peak", "pos_peak_resid",
    "neg_peak_resid", "active", "active_onset", "active_detected", "active_peak", "active_level", "last_event",
    "pos_run", "neg_run",
)

EVENT_COLUMNS = [
    "unique_id", "direction", "onset", "detected_at", "peak_z", "peak_residual", "detector",
]


@dataclass(frozen=True)
class CusumPolicy:
    """How the detector is calibrated. ``k``/``h`` of None are calibrated from ``target_arl``."""

    season_length: int = 24
    n_seasons: int = 4
    target_arl: str = "7D"  # one false alarm per series-week while in control
    shift_sigma: float = 3.0  # the shift (robust sigmas) the slack k is tuned to catch fastest
    k: float | None = None
    h: float | None = None
    k_grid: tuple[float, ...] = (0.25, 0.5, 1.0, 1.5)
    clip_sigma: float = 10.0  # one wild point adds at most this much evidence
    # A fast path beside the CUSUM (Shewhart-style): one point further from the baseline than
    # any residual of the calibration span (and at least ``fast_floor`` sigmas) alarms at once,
    # where the clipped CUSUM would need several; None turns it off
    fast_floor: float | None = 6.0
    clear_sigma: float = 1.0  # an alarmed burst ends once its residual level falls below this
    # The level is an EWMA of the residuals spanning this long (one point on hourly data): on
    # 5-minute data a single quiet point would end a burst still going, and its next alarm be a
    # second alert for one incident; requiring every point of the span to be quiet instead would
    # keep a burst open for hours of plain noise (84% of points are under 1 sigma).
    clear_after: str = "1h"
    # A CUSUM alarm is reported only once the residuals have stayed beyond ``clear_sigma`` in
    # its direction for this long (the fast path does not wait): on 5-minute data a few spikes
    # of one point each are not a burst to scale for. "0h": no such wait
    confirm_for: str = "0h"
    direction: str = "both"  # both | up | down
    cooldown: str = "6h"  # a new alarm this soon after the last event is the same incident
    # Scale, k and h are refitted this often on the last ``calibration_span`` of the series
    # (None: calibrated once). A first calibration on a day or two of history misjudges the
    # tails of the weeks after it; the running statistics carry on across a refit.
    recalibrate_every: str | None = "1D"
    calibration_span: str = "28D"
    block_length: int | None = None  # bootstrap block; default half a season (>= 4)
    bootstrap_arls: float = 20.0  # bootstrap length in multiples of the target ARL
    seed: int = 0

    def __post_init__(self) -> None:
        if self.season_length < 1 or self.n_seasons < 1:
            raise ValueError("season_length and n_seasons must be >= 1")
        if self.direction not in ("both", "up", "down"):
            raise ValueError(f"direction must be both, up or down, got {self.direction!r}")
        if pd.Timedelta(self.target_arl) <= pd.Timedelta(0):
            raise ValueError("target_arl must be a positive duration")
        if pd.Timedelta(self.clear_after) < pd.Timedelta(0):
            raise ValueError("clear_after must be a duration >= 0")
        if pd.Timedelta(self.confirm_for) < pd.Timedelta(0):
            raise ValueError("confirm_for must be a duration >= 0")
        if self.recalibrate_every is not None and not pd.Timedelta(self.recalibrate_every) > pd.Timedelta(0):
            raise ValueError(f"recalibrate_every must be a positive duration or None, got {self.recalibrate_every!r}")
        if not pd.Timedelta(self.calibration_span) > pd.Timedelta(0):
            raise ValueError(f"calibration_span must be a positive duration, got {self.calibration_span!r}")

    def clear_points(self, freq: pd.Timedelta) -> int:
        """Span, in points at grid step ``freq``, of the level that ends an alarmed burst."""
        return max(1, math.ceil(pd.Timedelta(self.clear_after) / freq))

    def confirm_points(self, freq: pd.Timedelta) -> int:
        """Points at grid step ``freq`` a CUSUM alarm's residuals must stay out for (0: none)."""
        return math.ceil(pd.Timedelta(self.confirm_for) / freq)


@dataclass(frozen=True)
class CusumState:
    """Everything needed to continue one series: calibration, baseline memory, statistics."""

    unique_id: str
    freq_s: float
    k: float
    h: float
    scale: float
    season_length: int
    n_seasons: int
    clip_sigma: float
    clear_sigma: float
    direction: str
    memory: tuple[float, ...]
    cooldown_s: float = 0.0
    fast_h: float = 0.0  # |residual| / scale that alarms on one point (0: no fast path)
    last_event: pd.Timestamp | None = None
    last_ts: pd.Timestamp | None = None
    s_pos: float = 0.0
    s_neg: float = 0.0
    pos_start: pd.Timestamp | None = None
    neg_start: pd.Timestamp | None = None
    pos_peak: float = 0.0
    neg_peak: float = 0.0
    pos_peak_resid: float = 0.0
    neg_peak_resid: float = 0.0
    active: int = 0  # +1 / -1 while an alarmed burst lasts, else 0
    active_onset: pd.Timestamp | None = None
    active_detected: pd.Timestamp | None = None
    active_peak: float = 0.0  # the largest |z| of the alarmed burst so far (its severity)
    clear_points: int = 1  # span (points) of the EWMA level that ends an alarmed burst
    active_level: float = 0.0  # that EWMA of the alarmed burst's residuals
    calibrated_at: pd.Timestamp | None = None  # the last point the scale, k and h were fitted on
    calibration_points: int = 0  # how many grid points that fit read
    confirm_points: int = 0  # points a CUSUM alarm's residuals must stay beyond clear_sigma (0: none)
    pos_run: int = 0  # consecutive points above +clear_sigma (below -clear_sigma) so far
    neg_run: int = 0

    def to_dict(self) -> dict[str, object]:
        """JSON-safe dict (timestamps as ISO strings, NaN memory as None)."""
        out = asdict(self)
        out["memory"] = [None if not math.isfinite(v) else float(v) for v in self.memory]
        for key in TIME_FIELDS:
            out[key] = None if out[key] is None else pd.Timestamp(out[key]).isoformat()
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> CusumState:
        """Inverse of :meth:`to_dict`; a ValueError for fields this version does not know (a
        newer headroom's state)."""
        values = dict(data)
        unknown = sorted(set(values) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"CUSUM state with fields this version does not know: {', '.join(unknown)}")
        memory = values["memory"]
        values["memory"] = tuple(np.nan if v is None else float(v) for v in memory)  # type: ignore[union-attr]
        for key in TIME_FIELDS:
            values[key] = None if values.get(key) is None else pd.Timestamp(values[key])  # type: ignore[arg-type]
        return cls(**values)  # type: ignore[arg-type]


def _run_cusum(state: CusumState, index: pd.DatetimeIndex, z: np.ndarray, resid: np.ndarray
               ) -> tuple[list[dict[str, object]], dict[str, object]]:
    """The Page recursion over one batch; returns events and the updated scalar state."""
    k, h, clear = state.k, state.h, state.clear_sigma
    up, down = state.direction in ("both", "up"), state.direction in ("both", "down")
    sp, sn = state.s_pos, state.s_neg
    ps, ns = state.pos_start, state.neg_start
    pp, np_, ppr, npr = state.pos_peak, state.neg_peak, state.pos_peak_resid, state.neg_peak_resid
    active, a_onset, a_det = state.active, state.active_onset, state.active_detected
    a_peak, level = state.active_peak, state.active_level
    lam = 2.0 / (state.clear_points + 1)  # EWMA weight of a span of clear_points (1: the point itself)
    a_event: dict[str, object] | None = None  # this batch's event of the burst still alarmed
    last_event = state.last_event
    cooldown = pd.Timedelta(seconds=state.cooldown_s)
    events: list[dict[str, object]] = []
    times = list(index)
    fast_h = state.fast_h if state.fast_h > 0 else math.inf
    confirm = state.confirm_points
    pr, nr = state.pos_run, state.neg_run
    raw = (resid / state.scale).tolist()
    for i, zi in enumerate(z.tolist()):
        if zi != zi:  # NaN: no evidence either way
            continue
        ts = times[i]
        pr = pr + 1 if zi > clear else 0  # the runs of points beyond clear_sigma, each way
        nr = nr + 1 if zi < -clear else 0
        if active:
            level += lam * (zi - level)
            if active * level < clear:
                active, a_onset, a_det, a_peak, a_event, level = 0, None, None, 0.0, None, 0.0
            elif active * zi > a_peak:
                # the burst grows after its alarm: its peak (and severity) follow it
                a_peak = active * zi
                if a_event is not None:
                    a_event["peak_z"], a_event["peak_residual"] = a_peak, float(resid[i])
        if up:
            sp = max(0.0, sp + zi - k)
            if sp == 0.0:
                ps, pp, ppr = None, 0.0, 0.0
            else:
                if ps is None:
                    ps = ts
                if zi > pp:
                    pp, ppr = zi, float(resid[i])
        if down:
            sn = max(0.0, sn - zi - k)
            if sn == 0.0:
                ns, np_, npr = None, 0.0, 0.0
            else:
                if ns is None:
                    ns = ts
                if -zi > np_:
                    np_, npr = -zi, float(resid[i])
        # the CUSUM alarms once its run of out-of-control points is long enough; a crossing
        # without one (spikes that add up) is dropped, so it cannot linger and alarm later. The
        # fast path, for a jump beyond anything calibrated, alarms at once
        ok_p, ok_n = pr >= confirm, nr >= confirm
        if sp > h and not ok_p:
            sp, ps, pp, ppr = 0.0, None, 0.0, 0.0
        if sn > h and not ok_n:
            sn, ns, np_, npr = 0.0, None, 0.0, 0.0
        fast = 1 if up and raw[i] > fast_h else (-1 if down and -raw[i] > fast_h else 0)
        fired = 1 if sp > h and ok_p else (-1 if sn > h and ok_n else fast)
        if fired and (fired == active or (last_event is not None and ts - last_event <= cooldown)):
            # Still the burst we already reported: reset, but do not report it twice.
            sp = sn = 0.0
            ps = ns = None
            pp = np_ = ppr = npr = 0.0
        elif fired:
            onset, peak, peak_r = (ps, pp, ppr) if fired > 0 else (ns, np_, npr)
            if onset is None:  # the fast path fired on a point the CUSUM has not accumulated
                onset, peak, peak_r = ts, abs(zi), float(resid[i])
            a_event = {
                "unique_id": state.unique_id, "direction": "up" if fired > 0 else "down",
                "onset": onset, "detected_at": ts, "peak_z": peak, "peak_residual": peak_r,
                "detector": "cusum",
            }
            events.append(a_event)
            active, a_onset, a_det, a_peak, level = fired, onset, ts, peak, zi
            last_event = ts
            sp = sn = 0.0  # reset after an alarm
            ps = ns = None
            pp = np_ = ppr = npr = 0.0
    scalars = dict(s_pos=sp, s_neg=sn, pos_start=ps, neg_start=ns, pos_peak=pp, neg_peak=np_,
                   pos_peak_resid=ppr, neg_peak_resid=npr, active=active,
                   active_onset=a_onset, active_detected=a_det, active_peak=a_peak, active_level=level,
                   last_event=last_event, pos_run=pr, neg_run=nr)
    return events, scalars


def residuals(state: CusumState, ds: pd.Series, y: pd.Series
              ) -> tuple[pd.DatetimeIndex, np.ndarray, np.ndarray, np.ndarray, tuple[float, ...]]:
    """Grid, values, residuals, clipped z-scores and the new baseline memory for one batch."""
    freq = pd.Timedelta(seconds=state.freq_s)
    index, values = to_grid(ds, y, freq, after=state.last_ts)
    memory = np.asarray(state.memory, dtype=float)
    base = seasonal_baseline(memory, values, state.season_length, state.n_seasons)
    resid = values - base
    z = np.clip(resid / state.scale, -state.clip_sigma, state.clip_sigma)
    new_memory = tuple(np.concatenate([memory, values])[-len(memory):].tolist())
    return index, values, resid, z, new_memory


def step(state: CusumState, ds: pd.Series, y: pd.Series) -> tuple[list[dict[str, object]], CusumState]:
    """Advance one series' state over a batch of new points; return (events, new state)."""
    index, _values, resid, z, memory = residuals(state, ds, y)
    if len(index) == 0:
        return [], state
    events, scalars = _run_cusum(state, index, z, resid)
    return events, replace(state, memory=memory, last_ts=index[-1], **scalars)


class CusumDetector(BaseEstimator):
    """Burst detector: seasonal baseline, MAD-standardised residuals, two-sided CUSUM.

    Input frames are long ``unique_id, ds, y``. After ``fit``, ``states_`` maps each
    series to its :class:`CusumState` at the end of the history.
    """

    def __init__(self, policy: CusumPolicy | None = None) -> None:
        self.policy = policy

    def fit(self, history: pd.DataFrame) -> CusumDetector:
        """Calibrate scale, k and h per series on ``history`` and set the states after it."""
        require_columns(history, ["unique_id", "ds", "y"], "burst history")
        policy = self.policy or CusumPolicy()
        states: dict[str, CusumState] = {}
        for uid, g in history.sort_values(["unique_id", "ds"]).groupby("unique_id", sort=True):
            states[str(uid)] = fit_state(str(uid), g["ds"], g["y"], policy)
        self.states_ = states
        return self

    def detect(self, frame: pd.DataFrame, states: Mapping[str, CusumState] | None = None
               ) -> tuple[pd.DataFrame, dict[str, CusumState]]:
        """Continue from ``states`` (default: the fitted ones) over ``frame``.

        Returns the burst events and the new states; the detector itself is unchanged.
        Series without a state are skipped (fit them first). Points a state has already
        seen are skipped too, so ``frame`` may hold the series' history, which the
        periodic recalibration (``CusumPolicy.recalibrate_every``) reads: give it the
        history and the result is the same however the points are batched.
        """
        if states is None:
            check_fitted(self, "states_")
            states = self.states_
        require_columns(frame, ["unique_id", "ds", "y"], "burst frame")
        policy = self.policy or CusumPolicy()
        new_states = dict(states)
        events: list[dict[str, object]] = []
        for uid, g in frame.sort_values(["unique_id", "ds"]).groupby("unique_id", sort=True):
            st = states.get(str(uid))
            if st is None:
                continue
            ev, new_states[str(uid)] = advance(st, g["ds"], g["y"], policy)
            events.extend(ev)
        return events_frame(events), new_states

    def predict(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Burst events in ``frame``, starting from the fitted states."""
        check_fitted(self, "states_")
        return self.detect(frame)[0]


def fit_state(uid: str, ds: pd.Series, y: pd.Series, policy: CusumPolicy, warn: bool = True) -> CusumState:
    """Calibrate one series on its history and return the state at its end (``warn``: say
    so when even the largest threshold misses the target ARL; the daily refits log it at debug level)."""
    freq = infer_freq(ds)
    span = policy.season_length * policy.n_seasons
    blank = CusumState(
        unique_id=uid, freq_s=freq.total_seconds(), k=0.0, h=0.0, scale=1.0,
        season_length=policy.season_length, n_seasons=policy.n_seasons,
        clip_sigma=policy.clip_sigma, clear_sigma=policy.clear_sigma,
        direction=policy.direction, memory=tuple([np.nan] * span),
        cooldown_s=pd.Timedelta(policy.cooldown).total_seconds(), clear_points=policy.clear_points(freq),
        confirm_points=policy.confirm_points(freq),
    )
    index, values, resid, _z, memory = residuals(blank, ds, y)
    known = int(np.isfinite(resid).sum())
    if known < MIN_RESIDUALS:
        raise ValueError(
            f"series {uid!r}: {known} residuals after the first season; calibration needs at least "
            f"{MIN_RESIDUALS} (give it more than {policy.season_length} + {MIN_RESIDUALS} points of history)"
        )
    scale = robust_scale(resid, values)
    z = np.clip(resid / scale, -policy.clip_sigma, policy.clip_sigma)
    arl_points = pd.Timedelta(policy.target_arl) / freq
    fast_h = 0.0
    if policy.fast_floor is not None:
        seen = np.abs(resid[np.isfinite(resid)]) / scale
        fast_h = float(max(policy.fast_floor, seen.max() if seen.size else 0.0))
    k, h = policy.k, policy.h
    if k is None or h is None:
        cooldown_points = int(pd.Timedelta(policy.cooldown) / freq)
        k, h = calibrate_cusum(z[np.isfinite(z)], arl_points, policy, cooldown_points, blank.clear_points,
                               blank.confirm_points)
        if policy.h is None and h >= H_GRID[-1]:
            (log.warning if warn else log.debug)("%s: even h=%.0f misses the target ARL %s on its history (heavy tails?)",
                        uid, h, policy.target_arl)
    return replace(blank, k=float(k), h=float(h), scale=float(scale), memory=memory, fast_h=fast_h,
                   last_ts=index[-1] if len(index) else None,
                   calibrated_at=index[-1] if len(index) else None, calibration_points=len(index))


def advance(state: CusumState, ds: pd.Series, y: pd.Series, policy: CusumPolicy
            ) -> tuple[list[dict[str, object]], CusumState]:
    """:func:`step`, refitting scale, k and h every ``policy.recalibrate_every`` after the
    state's last calibration, on the ``policy.calibration_span`` of ``ds, y`` up to that time
    (the points the state has seen are skipped by the detection, not by the refit)."""
    if policy.recalibrate_every is None or state.last_ts is None:
        return step(state, ds, y)
    times = pd.DatetimeIndex(ds)
    values = np.asarray(y, dtype=float)
    events: list[dict[str, object]] = []
    if len(times):
        anchor = state.calibrated_at if state.calibrated_at is not None else state.last_ts
        for at in refit_times(anchor, times.max(), policy):
            upto = times <= at
            ev, state = step(state, pd.Series(times[upto]), pd.Series(values[upto]))
            events.extend(ev)
            state = recalibrate(state, times[upto], values[upto], at, policy)
    ev, state = step(state, pd.Series(times), pd.Series(values))
    return events + ev, state


def refit_times(calibrated_at: pd.Timestamp, until: pd.Timestamp, policy: CusumPolicy) -> list[pd.Timestamp]:
    """When a series calibrated at ``calibrated_at`` and seen up to ``until`` is refitted:
    every ``policy.recalibrate_every`` after it, strictly before ``until`` (none without one)."""
    if policy.recalibrate_every is None:
        return []
    every = pd.Timedelta(policy.recalibrate_every)
    count = max(0, math.ceil((until - calibrated_at) / every) - 1)
    return [calibrated_at + every * (i + 1) for i in range(count)]


def refit_window(times: pd.DatetimeIndex | pd.Series, at: pd.Timestamp, policy: CusumPolicy) -> np.ndarray:
    """Which of ``times`` a refit at ``at`` reads: the ``policy.calibration_span`` up to it."""
    t = pd.DatetimeIndex(times)
    return np.asarray((t <= at) & (t > at - pd.Timedelta(policy.calibration_span)))


def recalibrate(state: CusumState, times: pd.DatetimeIndex, values: np.ndarray, at: pd.Timestamp,
                policy: CusumPolicy) -> CusumState:
    """``state`` with scale, k and h fitted on the ``calibration_span`` of the points up to
    ``at``, its running statistics kept. A window with fewer points than the last fit read
    (a caller that passed only new points) keeps the old calibration."""
    inside = refit_window(times, at, policy)
    span_points = int(pd.Timedelta(policy.calibration_span) / pd.Timedelta(seconds=state.freq_s))
    kept = replace(state, calibrated_at=at)
    if int(inside.sum()) < min(state.calibration_points, span_points):
        return kept
    try:
        fresh = fit_state(state.unique_id, pd.Series(times[inside]), pd.Series(values[inside]), policy, warn=False)
    except ValueError as exc:  # too few residuals in the window: keep what we had
        log.debug("%s: not recalibrated at %s: %s", state.unique_id, at, exc)
        return kept
    if fresh.freq_s != state.freq_s:  # a gappy window reads another step: its memory would not fit
        log.debug("%s: not recalibrated at %s: the window's step differs", state.unique_id, at)
        return kept
    return replace(fresh, calibrated_at=at, **{f: getattr(state, f) for f in RUNNING_FIELDS})


def events_frame(events: list[dict[str, object]]) -> pd.DataFrame:
    """Events as a frame with the fixed column order (empty frames keep the columns)."""
    out = pd.DataFrame(events, columns=EVENT_COLUMNS)
    for col in ("onset", "detected_at"):
        out[col] = pd.to_datetime(out[col])
    return out
