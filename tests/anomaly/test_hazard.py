"""The fleet failure hazard on simulated Weibull lifetimes with censoring and truncation."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from anomaly.hazard import FleetHazard, HazardPolicy, censor_at, in_service, lives_to_ages, poisson_binomial_interval

T0 = pd.Timestamp("2020-01-01")


def weibull_lives(n: int = 3000, shape: float = 2.5, scale_days: float = 900.0, seed: int = 0) -> pd.DataFrame:
    """Devices installed over two years, observed until 2023-01-01 (right censoring);
    half of them moved once at a random time (a second life entering at an age > 0)."""
    rng = np.random.default_rng(seed)
    install = T0 + pd.to_timedelta(rng.uniform(0, 730, n), unit="D")
    life = scale_days * rng.weibull(shape, n)
    fail_at = install + pd.to_timedelta(life, unit="D")
    end = pd.Timestamp("2023-01-01")
    remove = fail_at.where(fail_at < end, end)
    failed = np.asarray(fail_at < end)
    kind = np.where(rng.random(n) < 0.7, "DBE", "OTB")
    rows = []
    split = rng.random(n) < 0.5
    for i in range(n):
        ident = f"gpu{i:05d}"
        if split[i] and (remove[i] - install[i]).days > 2:
            mid = install[i] + (remove[i] - install[i]) * rng.uniform(0.2, 0.8)
            rows.append((ident, install[i], mid, False, ""))
            rows.append((ident, mid, remove[i], failed[i], kind[i] if failed[i] else ""))
        else:
            rows.append((ident, install[i], remove[i], failed[i], kind[i] if failed[i] else ""))
    return pd.DataFrame(rows, columns=["device_id", "install", "remove", "failed", "failure_type"])


def test_second_life_enters_at_the_service_of_the_first():
    lives = pd.DataFrame({"device_id": ["a", "a"], "install": pd.to_datetime(["2020-01-01", "2020-03-01"]),
                          "remove": pd.to_datetime(["2020-01-11", "2020-03-06"]), "failed": [False, True],
                          "failure_type": ["", "DBE"]})
    f = lives_to_ages(lives)
    assert f["entry"].tolist() == [0.0, 10.0] and f["exit"].tolist() == [10.0, 15.0]


def test_weibull_shape_and_scale_are_recovered():
    model = FleetHazard().fit(weibull_lives())
    w = model.weibull_.set_index("mode")
    assert w.loc["any", "shape_lo"] < 2.5 < w.loc["any", "shape_hi"]
    assert abs(w.loc["any", "shape"] - 2.5) < 0.2
    assert abs(w.loc["any", "scale_days"] / 900.0 - 1) < 0.05
    # the modes are 70/30 of the same clock: the same shape, each its own scale
    assert abs(w.loc["DBE", "shape"] - 2.5) < 0.3 and w.loc["OTB", "scale_days"] > w.loc["DBE", "scale_days"]
    assert set(model.modes_) == {"any", "DBE", "OTB"}


def test_piecewise_rates_follow_the_true_hazard():
    model = FleetHazard(HazardPolicy(prior_device_years=0.0)).fit(weibull_lives())
    any_ = model.bands_[model.bands_["mode"] == "any"].set_index("age_lo_days")
    for lo, hi in [(365.0, 730.0), (730.0, 1095.0)]:
        # the band's mean hazard; the estimate weighs its younger ages more (more exposure there)
        true = ((hi / 900) ** 2.5 - (lo / 900) ** 2.5) / (hi - lo) * 365.25
        assert abs(any_.loc[lo, "afr"] / true - 1) < 0.25
    # the wear-out shows: each band's rate above the one before
    assert np.all(np.diff(any_["afr"].to_numpy()[:4]) > 0)


def test_expected_failures_match_a_simulation():
    model = FleetHazard().fit(weibull_lives())
    rng = np.random.default_rng(1)
    ages = rng.uniform(0, 1000, 2000)
    f = model.expected_failures(ages, 90.0, model="weibull", level=0.9)
    w = model.weibull_.set_index("mode").loc["any"]
    k, s = w["shape"], w["scale_days"]
    # simulate survivors to a: residual life by inverse transform of the conditional Weibull
    sims = []
    for _ in range(400):
        u = rng.random(ages.size)
        t = s * ((ages / s) ** k - np.log(u)) ** (1 / k)
        sims.append(int((t <= ages + 90.0).sum()))
    sims = np.array(sims)
    assert abs(f.expected - sims.mean()) < 3 * sims.std() / np.sqrt(sims.size) + 1
    assert abs(f.lo - np.quantile(sims, 0.05)) <= 4 and abs(f.hi - np.quantile(sims, 0.95)) <= 4
    assert f.devices == 2000 and f.lo <= f.expected <= f.hi


def test_poisson_binomial_interval_of_equal_chances_is_the_binomial():
    from scipy import stats

    lo, hi = poisson_binomial_interval(np.full(500, 0.04), 0.9)
    assert (lo, hi) == (int(stats.binom.ppf(0.05, 500, 0.04)), int(stats.binom.ppf(0.95, 500, 0.04)))
    assert poisson_binomial_interval(np.zeros(3), 0.9) == (0, 0)


def test_a_band_not_reached_takes_the_rate_below_not_zero():
    lives = weibull_lives(n=800)
    model = FleetHazard().fit(censor_at(lives, pd.Timestamp("2021-06-01")))  # oldest device ~1.4 years
    any_ = model.bands_[model.bands_["mode"] == "any"]
    assert any_["afr"].iloc[-1] > 0 and np.isnan(any_["afr_raw"].iloc[-1])


def test_censor_at_and_in_service():
    lives = weibull_lives(n=300)
    cut = pd.Timestamp("2021-01-01")
    c = censor_at(lives, cut)
    assert c["remove"].max() <= cut and not c.loc[c["remove"] == cut, "failed"].any()
    fleet = in_service(lives, cut)
    assert fleet["device_id"].is_unique and (fleet["age_days"] >= 0).all()
    assert fleet["age_days"].max() <= 366


def test_misuse_is_refused():
    with pytest.raises(RuntimeError, match="not fitted"):
        FleetHazard().hazard([1.0])
    model = FleetHazard().fit(weibull_lives(n=200))
    with pytest.raises(ValueError, match="unknown failure mode"):
        model.hazard([1.0], mode="XID")
    with pytest.raises(ValueError, match="horizon"):
        model.expected_failures([1.0], 0.0)
    with pytest.raises(ValueError, match="band edges"):
        FleetHazard(HazardPolicy(band_edges_days=(10.0, 5.0))).fit(weibull_lives(n=50))


def test_a_small_fleets_own_failures_are_not_swamped_by_the_prior():
    # six devices from one day, four failed at 400-550 days: the survivors at 731 days were
    # forecast 0.08 failures a year with 100 prior device-years at the failure-free band below
    lives = pd.DataFrame({
        "device_id": [f"d{i}" for i in range(6)], "install": [T0] * 6,
        "remove": [T0 + pd.Timedelta(days=400 + 50 * i) for i in range(4)] + [pd.Timestamp("2022-01-01")] * 2,
        "failed": [True] * 4 + [False] * 2, "failure_type": ["DBE"] * 4 + [""] * 2})
    model = FleetHazard().fit(lives)
    band = model.bands_.set_index(["mode", "age_lo_days"]).loc[("any", 365.0)]
    assert band["afr_raw"] > 1.0 and band["afr"] > 0.25  # the prior weighs no more than the fleet's 9 years
    survivors = in_service(lives)
    assert model.expected_failures(survivors["age_days"], 365).expected > 0.4


@pytest.mark.parametrize("model", ["piecewise", "weibull"])
def test_failure_types_add_up_to_any_over_any_horizon(model):
    lives = weibull_lives(n=600)
    fitted = FleetHazard().fit(lives)
    ages = in_service(lives)["age_days"].to_numpy()
    for days in (30.0, 3650.0):  # over ten years each type alone came near every device
        whole = fitted.expected_failures(ages, days, "any", model).expected
        parts = [fitted.expected_failures(ages, days, m, model).expected for m in ("DBE", "OTB")]
        assert sum(parts) == pytest.approx(whole, rel=1e-9) and min(parts) > 0
        assert parts[0] > parts[1]  # 70/30 of the failures


def test_types_share_any_where_only_any_has_a_weibull_fit() -> None:
    # one failure of each type: neither has a Weibull fit (piecewise: no hazard under a year),
    # while any has one that rises from day 100 on; the types split any's by their failures
    lives = pd.DataFrame({
        "device_id": [f"d{i}" for i in range(50)], "install": [T0] * 50,
        "remove": [T0 + pd.Timedelta(days=500), T0 + pd.Timedelta(days=600)] + [T0 + pd.Timedelta(days=800)] * 48,
        "failed": [True, True] + [False] * 48, "failure_type": ["A", "B"] + [""] * 48})
    fitted = FleetHazard().fit(lives)
    ages = np.linspace(100, 299, 200)
    whole = fitted.expected_failures(ages, 30, "any", "weibull").expected
    parts = [fitted.expected_failures(ages, 30, m, "weibull").expected for m in ("A", "B")]
    assert whole > 0 and parts[0] == pytest.approx(whole / 2) and sum(parts) == pytest.approx(whole)
