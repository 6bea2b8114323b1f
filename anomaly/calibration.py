"""Calibrating CUSUM's slack k and threshold h to a target in-control ARL.

The textbook h = 5 assumes i.i.d. Gaussian residuals; real utilisation residuals are
heavy-tailed and autocorrelated, so that h fires far too often. Instead we resample the
series' own standardised residuals with a stationary block bootstrap (which keeps the
autocorrelation), count two-sided alarms for a grid of (k, h), and take for each k the
smallest h whose alarm rate meets the target ARL. Among the k values, we keep the one
with the shortest approximate delay to the reference shift, (h + 1.166) / (shift - k).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from anomaly.cusum import CusumPolicy

log = logging.getLogger(__name__)

H_GRID = np.geomspace(0.5, 400.0, 72)
MIN_BOOTSTRAP = 20_000
MAX_BOOTSTRAP = 200_000
REPLICATE_POINTS = 5_000


def stationary_bootstrap(z: np.ndarray, length: int, block: float, rng: np.random.Generator) -> np.ndarray:
    """Politis-Romano stationary bootstrap: random blocks of geometric length, wrapping."""
    n = len(z)
    n_blocks = int(length / block) + 2
    starts = rng.integers(0, n, size=n_blocks)
    lengths = rng.geometric(1.0 / block, size=n_blocks)
    ends = np.cumsum(lengths)
    total = int(ends[-1])
    while total < length:  # rare: extend with more blocks
        more = rng.geometric(1.0 / block, size=n_blocks)
        starts = np.concatenate([starts, rng.integers(0, n, size=n_blocks)])
        lengths = np.concatenate([lengths, more])
        ends = np.cumsum(lengths)
        total = int(ends[-1])
    block_of = np.repeat(np.arange(len(lengths)), lengths)[:length]
    offset = np.arange(length) - (ends - lengths)[block_of]
    return z[(starts[block_of] + offset) % n]


def alarm_counts(
    z: np.ndarray, ks: np.ndarray, hs: np.ndarray, direction: str, clear: float,
    cooldown: int = 0, clear_points: int = 1, confirm: int = 0,
) -> np.ndarray:
    """Reported-burst counts of the CUSUM for every (k, h) pair, over ``z`` (one series) or
    the rows of a 2-D ``z`` (replicates run side by side, each from a fresh start; counts summed).

    Mirrors the detector exactly: reset on every alarm, but an alarm in the direction of
    a burst still in progress (its residual level, an EWMA spanning ``clear_points``, not yet
    back under ``clear``), or within ``cooldown`` points of the last event, is not a new event;
    with ``confirm``, a CUSUM above ``h`` alarms only when the last ``confirm`` points all lay
    beyond ``clear`` in its direction, and is reset to 0 when they do not.
    """
    rows = np.atleast_2d(np.asarray(z, dtype=float))
    shape = (rows.shape[0], len(ks), len(hs))
    kk = np.broadcast_to(ks[None, :, None], shape)
    hh = np.broadcast_to(hs[None, None, :], shape)
    sp = np.zeros(shape)
    sn = np.zeros(shape)
    active = np.zeros(shape)
    counts = np.zeros(shape, dtype=np.int64)
    since = np.full(shape, np.iinfo(np.int64).max // 2, dtype=np.int64)
    up, down = direction in ("both", "up"), direction in ("both", "down")
    level = np.zeros(shape)
    lam = 2.0 / (clear_points + 1)
    run_p = np.zeros(rows.shape[0], dtype=np.int64)
    run_n = np.zeros(rows.shape[0], dtype=np.int64)
    for col in rows.T:
        zi = np.broadcast_to(col[:, None, None], shape)
        run_p = np.where(col > clear, run_p + 1, 0)
        run_n = np.where(col < -clear, run_n + 1, 0)
        level += lam * (zi - level)
        ended = active * level < clear
        active[ended] = 0.0
        level[ended] = 0.0
        since += 1
        if up:
            sp += zi
            sp -= kk
            np.maximum(sp, 0.0, out=sp)
        if down:
            sn -= zi
            sn -= kk
            np.maximum(sn, 0.0, out=sn)
        pos, neg = sp > hh, sn > hh
        if confirm:  # a crossing without its run is dropped, as the detector drops it
            ok_p, ok_n = (run_p >= confirm)[:, None, None], (run_n >= confirm)[:, None, None]
            sp[pos & ~ok_p] = 0.0
            sn[neg & ~ok_n] = 0.0
            pos, neg = pos & ok_p, neg & ok_n
        if pos.any() or neg.any():
            fired = np.where(pos, 1.0, np.where(neg, -1.0, 0.0))
            hit = fired != 0.0
            new = hit & (fired != active) & (since > cooldown)
            counts += new
            since[new] = 0
            active[new] = fired[new]
            level[new] = zi[new]
            sp[hit] = 0.0
            sn[hit] = 0.0
    return counts.sum(axis=0)


def calibrate_cusum(
    z: np.ndarray, arl_points: float, policy: CusumPolicy, cooldown_points: int = 0, clear_points: int = 1,
    confirm_points: int = 0,
) -> tuple[float, float]:
    """(k, h) for the policy's target ARL on the in-control residuals ``z``."""
    if len(z) < 10:
        log.warning("only %d residuals to calibrate on; using k=0.5, h=8", len(z))
        return (policy.k if policy.k is not None else 0.5), (policy.h if policy.h is not None else 8.0)
    rng = np.random.default_rng(policy.seed)
    block = float(policy.block_length or max(4, policy.season_length // 2))
    length = int(np.clip(policy.bootstrap_arls * arl_points, MIN_BOOTSTRAP, MAX_BOOTSTRAP))
    # run as side-by-side replicates (each from a fresh start, as after every alarm's reset):
    # the Python loop steps through REPLICATE_POINTS, not the whole bootstrap length
    replicates = max(1, length // REPLICATE_POINTS)
    length = replicates * (length // replicates)
    sample = stationary_bootstrap(z, length, block, rng).reshape(replicates, -1)
    ks = np.asarray([policy.k] if policy.k is not None else policy.k_grid, dtype=float)
    hs = np.asarray([policy.h]) if policy.h is not None else H_GRID
    counts = alarm_counts(
        sample, ks, hs, policy.direction, policy.clear_sigma, cooldown_points, clear_points, confirm_points
    )
    allowed = length / arl_points
    best: tuple[float, float, float] | None = None
    for i, k in enumerate(ks):
        h = _threshold_for(counts[i], hs, allowed)
        delay = (h + 1.166) / max(policy.shift_sigma - k, 1e-6)
        if best is None or delay < best[0]:
            best = (delay, float(k), h)
    assert best is not None
    return best[1], best[2]


def _threshold_for(counts: np.ndarray, hs: np.ndarray, allowed: float) -> float:
    """Smallest h (log-interpolated on the grid) whose alarm count is within ``allowed``."""
    if len(hs) == 1:
        return float(hs[0])
    ok = np.nonzero(counts <= allowed)[0]
    if ok.size == 0:
        log.debug("even h=%.0f exceeds the target false-alarm rate; using it", hs[-1])
        return float(hs[-1])
    j = int(ok[0])
    if j == 0:
        return float(hs[0])
    c_hi, c_lo = float(counts[j - 1]), float(counts[j])  # counts fall as h grows
    frac = (c_hi - allowed) / max(c_hi - c_lo, 1e-9)
    return float(np.exp(np.log(hs[j - 1]) + frac * (np.log(hs[j]) - np.log(hs[j - 1]))))
