"""Fleet failure hazard by device age, from lifetimes with right censoring and left truncation.

A *life* is one stretch a device spent in service: ``device_id, install, remove, failed,
failure_type``. A device can have several (moved, repaired, re-installed); its age is its
time in service, so a later life enters at the service time of the earlier ones (left
truncation: it was not at risk of being seen failing before that age). A life that ends
without a failure (removed, or still in service when the data stop) is right-censored.

:class:`FleetHazard` fits, per failure mode (each ``failure_type`` and ``any``):

* a piecewise-exponential hazard over age bands (events / device-time in each band: the
  maximum-likelihood estimate, exact under censoring and truncation), the nonparametric check;
* a Weibull hazard ``h(t) = k/s (t/s)^(k-1)`` by maximum likelihood (shape ``k > 1``: wear-out).

``expected_failures(ages, horizon)`` is the sum over devices of
``P(fail in (a, a+h] | survived to a) = 1 - exp(-(H(a+h) - H(a)))`` with a Poisson-binomial
interval for the count. A failure of one mode censors the others (cause-specific hazards);
a mode's probability is its share of the cumulative hazards over the horizon times ``any``'s,
so that the modes add up to ``any`` however long the horizon (each forecast as if it were
the only risk, they added up to more).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import optimize, stats

ANY = "any"
YEAR = 365.25
MODELS = ("piecewise", "weibull")


@dataclass(frozen=True)
class HazardPolicy:
    """Age band edges (days; the last band runs on), the level of the intervals, and
    ``prior_device_years``: each band's rate is shrunk towards the band below it as if that
    many device-years at the lower band's rate had been seen (never more than the fleet has
    seen in all, so that a small fleet's own failures are not swamped), so that a band the
    fleet has barely reached takes the rate below it instead of 0 (or of one early failure)."""

    band_edges_days: tuple[float, ...] = (0.0, 91.0, 365.0, 730.0, 1095.0, 1461.0, 1826.0)
    level: float = 0.9
    prior_device_years: float = 100.0


@dataclass(frozen=True)
class FailureForecast:
    """Expected failures of ``devices`` devices in ``horizon_days``, with a ``level`` interval."""

    mode: str
    model: str
    devices: int
    horizon_days: float
    expected: float
    lo: int
    hi: int
    level: float


def lives_to_ages(lives: pd.DataFrame) -> pd.DataFrame:
    """Add ``entry`` and ``exit`` (age in days of service at the life's start and end):
    a device's lives in install order, each entering at the summed service of those before."""
    f = lives.sort_values(["device_id", "install"], kind="stable").copy()
    days = (f["remove"] - f["install"]).dt.total_seconds().to_numpy() / 86400.0
    f["exit"] = pd.Series(days, index=f.index).groupby(f["device_id"]).cumsum()
    f["entry"] = f["exit"] - days
    return f


def censor_at(lives: pd.DataFrame, cutoff: pd.Timestamp) -> pd.DataFrame:
    """The lives as known at ``cutoff``: those installed before it, a later end cut to it
    (and then not a failure)."""
    f = lives[lives["install"] < cutoff].copy()
    late = f["remove"] > cutoff
    f.loc[late, "remove"] = cutoff
    f.loc[late, "failed"] = False
    f.loc[late, "failure_type"] = ""
    return f


def in_service(lives: pd.DataFrame, at: pd.Timestamp | None = None) -> pd.DataFrame:
    """``device_id, age_days`` of the devices in service at ``at`` (default: the last
    remove time, when the data stop; a life censored then is still in service)."""
    f = lives_to_ages(lives)
    at = f["remove"].max() if at is None else at
    live = (f["install"] <= at) & ((f["remove"] > at) | ((f["remove"] >= at) & ~f["failed"].astype(bool)))
    f = f[live]
    age = f["entry"] + (at - f["install"]).dt.total_seconds() / 86400.0
    return pd.DataFrame({"device_id": f["device_id"].to_numpy(), "age_days": age.to_numpy()})


def _garwood(k: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Exact Poisson interval for a count ``k``."""
    a = (1 - level) / 2
    lo = np.where(k > 0, stats.chi2.ppf(a, 2 * k) / 2, 0.0)
    hi = stats.chi2.ppf(1 - a, 2 * (k + 1)) / 2
    return lo, hi


def _band_exposure(entry: np.ndarray, exit_: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Device-days each life spends in each band, summed: ``len(edges)`` values."""
    hi_edges = np.append(edges[1:], np.inf)
    return np.array([np.clip(np.minimum(exit_, h) - np.maximum(entry, lo), 0, None).sum()
                     for lo, h in zip(edges, hi_edges)])


def _weibull_fit(entry: np.ndarray, exit_: np.ndarray, event: np.ndarray) -> dict:
    """Weibull MLE (ages in years inside, for the optimiser's sake) with a 95% Wald
    interval for the shape from the numerical Hessian of the log-likelihood."""
    e, t = entry / YEAR, np.maximum(exit_ / YEAR, 1e-9)
    d = event.astype(bool)
    logt = np.log(t[d])

    def nll(p: np.ndarray) -> float:
        k, s = np.exp(p)
        ll = d.sum() * (np.log(k) - k * np.log(s)) + (k - 1) * logt.sum()
        return -(ll - ((t / s) ** k - (e / s) ** k).sum())

    start = np.array([0.0, np.log(max((t - e).sum() / max(d.sum(), 1), 1e-3))])
    res = optimize.minimize(nll, start, method="Nelder-Mead", options={"xatol": 1e-7, "fatol": 1e-7, "maxiter": 4000})
    k, s = np.exp(res.x)
    se = np.nan
    try:  # observed information of log k by central differences
        hess = np.empty((2, 2))
        for i in range(2):
            for j in range(2):
                ei, ej = np.eye(2)[i] * 1e-4, np.eye(2)[j] * 1e-4
                hess[i, j] = (nll(res.x + ei + ej) - nll(res.x + ei - ej) - nll(res.x - ei + ej)
                              + nll(res.x - ei - ej)) / 4e-8
        se = float(np.sqrt(np.linalg.inv(hess)[0, 0]))
    except (np.linalg.LinAlgError, FloatingPointError, ValueError):
        pass
    return {"shape": float(k), "shape_lo": float(np.exp(res.x[0] - 1.96 * se)),
            "shape_hi": float(np.exp(res.x[0] + 1.96 * se)), "scale_days": float(s * YEAR),
            "loglik": float(-res.fun), "converged": bool(res.success)}


def poisson_binomial_interval(p: np.ndarray, level: float) -> tuple[int, int]:
    """Central ``level`` interval of the number of successes of independent Bernoulli(p)
    trials: the exact distribution by convolution, over the counts that can matter."""
    p = np.clip(np.asarray(p, dtype=float), 0.0, 1.0)
    p = p[p > 0]
    if p.size == 0:
        return 0, 0
    mean, sd = p.sum(), np.sqrt((p * (1 - p)).sum())
    cap = int(min(p.size, np.ceil(mean + 10 * sd + 10)))
    pmf = np.zeros(cap + 1)
    pmf[0] = 1.0
    for q in p:  # a count above cap carries < 1e-20 of the mass: dropped
        pmf[1:] = pmf[1:] * (1 - q) + pmf[:-1] * q
        pmf[0] *= 1 - q
    cdf = np.cumsum(pmf) / pmf.sum()
    a = (1 - level) / 2
    return int(np.searchsorted(cdf, a - 1e-12)), int(min(np.searchsorted(cdf, 1 - a - 1e-12), cap))


class FleetHazard:
    """Failure hazard by device age, fitted per failure mode; see the module docstring."""

    def __init__(self, policy: HazardPolicy | None = None) -> None:
        self.policy = policy

    def fit(self, lives: pd.DataFrame) -> FleetHazard:
        """``lives``: ``device_id, install, remove, failed, failure_type`` (see
        :func:`lives_to_ages`); fitting again replaces the old fit."""
        policy = self.policy or HazardPolicy()
        edges = np.asarray(policy.band_edges_days, dtype=float)
        if edges.size < 1 or edges[0] != 0 or np.any(np.diff(edges) <= 0):
            raise ValueError(f"band edges must start at 0 and increase, got {list(edges)}")
        if lives.empty:
            raise ValueError("no lifetimes to fit a hazard on")
        f = lives_to_ages(lives)
        entry, exit_ = f["entry"].to_numpy(float), f["exit"].to_numpy(float)
        failed = f["failed"].astype(bool).to_numpy()
        kind = np.where(failed, f["failure_type"].fillna("").astype(str).replace("", "failure"), "")
        modes = [ANY, *sorted(set(kind[failed]))]
        exposure = _band_exposure(entry, exit_, edges)
        hi_edges = np.append(edges[1:], np.inf)
        bands, weib, rates = [], [], {}
        for mode in modes:
            ev = failed if mode == ANY else kind == mode
            counts = np.array([(ev & (exit_ > lo) & (exit_ <= h)).sum() for lo, h in zip(edges, hi_edges)])
            rate = self._band_rates(counts, exposure, min(policy.prior_device_years * YEAR, exposure.sum()))
            rates[mode] = rate
            lo_r, hi_r = _garwood(counts, policy.level)
            # two failure ages at least: with one, the likelihood grows without end as the shape does
            w = _weibull_fit(entry, exit_, ev) if np.unique(exit_[ev]).size >= 2 else {
                "shape": np.nan, "shape_lo": np.nan, "shape_hi": np.nan, "scale_days": np.nan,
                "loglik": np.nan, "converged": False}
            weib.append({"mode": mode, **w, "events": int(ev.sum()), "device_years": float(exposure.sum() / YEAR)})
            wh = self._weibull_h(w["shape"], w["scale_days"])
            for i, (lo, h) in enumerate(zip(edges, hi_edges)):
                width = h - lo if np.isfinite(h) else max(exit_.max() - lo, YEAR)
                bands.append({
                    "mode": mode, "age_lo_days": lo, "age_hi_days": h, "events": int(counts[i]),
                    "device_years": exposure[i] / YEAR,
                    "afr_raw": counts[i] / exposure[i] * YEAR if exposure[i] > 0 else np.nan,
                    "afr": rate[i] * YEAR,
                    "afr_lo": lo_r[i] / exposure[i] * YEAR if exposure[i] > 0 else np.nan,
                    "afr_hi": hi_r[i] / exposure[i] * YEAR if exposure[i] > 0 else np.nan,
                    "weibull_afr": (wh(lo + width) - wh(lo)) / width * YEAR,
                })
        self.modes_ = tuple(modes)
        self.edges_ = edges
        self.rates_ = rates  # per device-day, per band
        self.bands_ = pd.DataFrame(bands)
        self.weibull_ = pd.DataFrame(weib)
        self.lives_ = int(len(f))
        self.devices_ = int(f["device_id"].nunique())
        self.max_age_days_ = float(exit_.max())
        return self

    @staticmethod
    def _band_rates(counts: np.ndarray, exposure: np.ndarray, prior_days: float) -> np.ndarray:
        """Per device-day, band by band from the youngest: (events + prior x rate below) /
        (exposure + prior); the youngest band's prior is its own raw rate (or the next
        band's with exposure)."""
        raw = np.divide(counts, exposure, out=np.full(counts.size, np.nan), where=exposure > 0)
        seen = raw[np.isfinite(raw)]
        below = seen[0] if seen.size else 0.0
        out = np.empty(counts.size)
        for i in range(counts.size):
            seen_days = exposure[i] + prior_days
            out[i] = (counts[i] + prior_days * below) / seen_days if seen_days > 0 else below
            below = out[i]
        return out

    @staticmethod
    def _weibull_h(k: float, s: float):
        return lambda t: (np.maximum(np.asarray(t, dtype=float), 0.0) / s) ** k

    def _check(self, mode: str, model: str) -> None:
        if not hasattr(self, "modes_"):
            raise RuntimeError("FleetHazard is not fitted: call fit() first")
        if mode not in self.modes_:
            raise ValueError(f"unknown failure mode {mode!r}; fitted: {', '.join(self.modes_)}")
        if model not in MODELS:
            raise ValueError(f"unknown hazard model {model!r}; one of {', '.join(MODELS)}")

    def cumulative_hazard(self, ages, mode: str = ANY, model: str = "piecewise") -> np.ndarray:
        """``H(age)``: expected failures of one device from age 0 to ``age`` (days)."""
        self._check(mode, model)
        a = np.maximum(np.asarray(ages, dtype=float), 0.0)
        if self.model_for(mode, model) == "weibull":
            w = self.weibull_.set_index("mode").loc[mode]
            return self._weibull_h(w["shape"], w["scale_days"])(a)
        widths = np.clip(a[..., None] - self.edges_, 0, np.append(np.diff(self.edges_), np.inf))
        return widths @ self.rates_[mode]

    def hazard(self, ages, mode: str = ANY, model: str = "piecewise") -> np.ndarray:
        """Failures per device-day at ``ages`` (days)."""
        self._check(mode, model)
        a = np.maximum(np.asarray(ages, dtype=float), 1e-9)
        if self.model_for(mode, model) == "weibull":
            w = self.weibull_.set_index("mode").loc[mode]
            k, s = w["shape"], w["scale_days"]
            return k / s * (a / s) ** (k - 1)
        return self.rates_[mode][np.searchsorted(self.edges_, a, side="right") - 1]

    def failure_probability(self, ages, horizon_days: float, mode: str = ANY,
                            model: str = "piecewise") -> np.ndarray:
        """``P(fail in (a, a + h] | in service at a)`` per device; for a failure type, of
        failing of that type first (its share of the types' hazards over the horizon)."""
        a = np.asarray(ages, dtype=float)

        def dh(m: str) -> np.ndarray:
            return np.maximum(self.cumulative_hazard(a + horizon_days, m, model)
                              - self.cumulative_hazard(a, m, model), 0.0)

        p_any = -np.expm1(-dh(ANY))
        if mode == ANY:
            return p_any
        types = [m for m in self.modes_ if m != ANY]
        total = sum(dh(m) for m in types)
        # where no type's hazard rises over the horizon but any's does (any has a Weibull fit, the
        # types too few failures for theirs), the types share any's by their failures
        events = self.weibull_.set_index("mode")["events"]
        share = events[mode] / max(sum(events[m] for m in types), 1)
        return np.where(total > 0, p_any * dh(mode) / np.where(total > 0, total, 1.0), p_any * share)

    def model_for(self, mode: str, model: str) -> str:
        """``model``, or ``piecewise`` for a mode without a Weibull fit (failures at fewer
        than two ages)."""
        self._check(mode, model)
        if model == "weibull" and not np.isfinite(self.weibull_.set_index("mode").loc[mode, "shape"]):
            return "piecewise"
        return model

    def expected_failures(self, ages, horizon_days: float, mode: str = ANY, model: str = "piecewise",
                          level: float | None = None) -> FailureForecast:
        """Expected failures of devices aged ``ages`` (days) over the next ``horizon_days``,
        with a central Poisson-binomial interval (the chance in the counts; not the error
        of the fitted hazard, nor changes of the fleet's rate with calendar time)."""
        if not horizon_days > 0:
            raise ValueError(f"the horizon must be positive, got {horizon_days} days")
        a = np.asarray(ages, dtype=float)
        if a.size and (not np.all(np.isfinite(a)) or a.min() < 0):
            raise ValueError("device ages must be finite and not negative")
        level = (self.policy or HazardPolicy()).level if level is None else level
        p = self.failure_probability(a, horizon_days, mode, model)
        lo, hi = poisson_binomial_interval(p, level)
        return FailureForecast(mode=mode, model=self.model_for(mode, model), devices=int(a.size),
                               horizon_days=float(horizon_days), expected=float(p.sum()), lo=lo, hi=hi, level=level)
