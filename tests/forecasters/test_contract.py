"""One contract test suite, parametrized over every registered forecaster."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import forecasters
from forecasters import FORECAST_COLUMNS, NotFittedError, base, cross_validation, dumps, loads

from .conftest import H, make_model, make_panel, model_params

pytestmark = pytest.mark.timeout(300)


def test_registry_has_every_model() -> None:
    assert set(forecasters.available()) >= {"seasonal_naive", "ets", "prophet", "lgbm", "prophet_lgbm", "lstm"}
    with pytest.raises(KeyError, match="unknown forecaster"):
        forecasters.get("nope")


@pytest.mark.parametrize("name", model_params())
def test_contract(name: str, panel: pd.DataFrame) -> None:
    model = make_model(name)
    params = model.get_params()
    with pytest.raises(NotFittedError, match="fit"):
        model.predict()
    before = panel.copy(deep=True)
    assert model.fit(panel) is model
    pd.testing.assert_frame_equal(panel, before)  # the caller's frame is untouched
    assert model.get_params() == params  # fit does not touch parameters

    fc = model.predict()
    assert list(fc.columns) == FORECAST_COLUMNS
    assert len(fc) == panel["unique_id"].nunique() * H
    assert (fc["model"] == name).all()
    assert np.isfinite(fc[FORECAST_COLUMNS[3:]].to_numpy()).all()
    assert (fc["lo_95"] <= fc["lo_80"]).all() and (fc["lo_80"] <= fc["mean"]).all()
    assert (fc["mean"] <= fc["hi_80"]).all() and (fc["hi_80"] <= fc["hi_95"]).all()
    for uid, g in fc.groupby("unique_id"):
        last = panel.loc[panel["unique_id"] == uid, "ds"].max()
        assert list(g["ds"]) == list(pd.date_range(last, periods=H + 1, freq="h")[1:])
    assert len(model.predict(h=3)) == panel["unique_id"].nunique() * 3
    with pytest.raises(ValueError, match="h must be"):
        model.predict(h=H + 1)

    # save/load gives identical predictions
    clone = loads(dumps(model))
    pd.testing.assert_frame_equal(clone.predict(), fc)

    # fitting again replaces the learned state
    other = make_panel(n_series=3, seed=5, prefix="t")
    refit = model.fit(other).predict()
    assert set(refit["unique_id"]) == {"t0", "t1", "t2"}
    fresh_model = make_model(name).fit(other)
    pd.testing.assert_frame_equal(refit, fresh_model.predict())
    # ... and the same fit is the same artifact, so re-running train leaves the registry's row alone
    assert dumps(fresh_model) == dumps(model)


@pytest.mark.parametrize("name", model_params())
def test_no_leakage(name: str, panel: pd.DataFrame) -> None:
    """Changing every value after the cutoff changes nothing in the forecast."""
    cv = cross_validation(make_model(name), panel, h=H, n_windows=1)
    cutoff = cv["cutoff"].min()
    tampered = panel.copy()
    after = tampered["ds"] > cutoff
    tampered.loc[after, "y"] = tampered.loc[after, "y"] * 5 + 1000
    cv2 = cross_validation(make_model(name), tampered, h=H, n_windows=1)
    cols = ["mean", "lo_80", "hi_80", "lo_95", "hi_95"]
    np.testing.assert_array_equal(cv[cols].to_numpy(), cv2[cols].to_numpy())
    assert not np.array_equal(cv["y"].to_numpy(), cv2["y"].to_numpy())


@pytest.mark.parametrize("name", ["seasonal_naive", "lgbm"])
def test_integer_steps(name: str) -> None:
    """freq=None: integer ds, as in M4."""
    data = make_panel(freq=None)
    fc = make_model(name, freq=None).fit(data).predict()
    assert fc["ds"].dtype.kind == "i"
    assert fc.groupby("unique_id")["ds"].min().eq(24 * 10).all()


def test_five_minute_frequency() -> None:
    data = make_panel(freq="5min", length=12 * 24)
    fc = make_model("lgbm", freq="5min", season_length=12).fit(data).predict()
    assert (fc.groupby("unique_id")["ds"].diff().dropna() == pd.Timedelta("5min")).all()


@pytest.mark.parametrize("name", ["seasonal_naive", "lgbm", "ets"])
def test_too_short_is_a_clear_error(name: str) -> None:
    short = make_panel(length=30)
    with pytest.raises(forecasters.HistoryError, match="too short|at least"):
        make_model(name).fit(short)


def test_cross_validation_windows(panel: pd.DataFrame) -> None:
    cv = cross_validation(make_model("seasonal_naive"), panel, h=H, n_windows=3, step=6)
    assert cv.groupby("unique_id")["cutoff"].nunique().eq(3).all()
    assert len(cv) == 2 * 3 * H
    last = cv.groupby("unique_id")["ds"].max()
    assert (last == panel.groupby("unique_id")["ds"].max()).all()
    assert (cv["ds"] > cv["cutoff"]).all()
    # seasonal naive from each cutoff repeats the day before it
    row = cv.iloc[0]
    series = panel[panel["unique_id"] == row["unique_id"]].set_index("ds")["y"]
    assert row["mean"] == pytest.approx(series[row["ds"] - pd.Timedelta(hours=24)])
    assert cv.attrs["seconds"] >= 0
    n = panel.groupby("unique_id").size().min()
    with pytest.raises(forecasters.HistoryError, match=r"hold out the last .*use fewer windows"):
        cross_validation(make_model("seasonal_naive"), panel, h=H, n_windows=n // H + 1)
    # origins far apart: the step is named as the way out (a shorter horizon alone would not do)
    with pytest.raises(forecasters.HistoryError, match=r"use fewer windows, origins closer together \(--step\)"):
        cross_validation(make_model("seasonal_naive"), panel, h=H, n_windows=2, step=n)


@pytest.mark.slow
def test_lstm_is_seeded(panel: pd.DataFrame) -> None:
    a = make_model("lstm").fit(panel).predict()
    b = make_model("lstm").fit(panel).predict()
    pd.testing.assert_frame_equal(a, b)


@pytest.mark.slow
def test_lstm_forecast_is_the_mean_of_its_networks(panel: pd.DataFrame) -> None:
    """n_networks=2 forecasts the mean of the networks seeded 0 and 1, each trained as it
    would be alone; an artifact of one network (its weights alone, as saved before
    n_networks) still predicts."""
    from forecasters.base import Context, series_arrays, windows_at

    def points(model: forecasters.BaseForecaster) -> np.ndarray:
        uids, ys, starts = series_arrays(model.history_)
        ctx = Context(uids, np.vstack([windows_at(y, model._context_length(), [len(y)]) for y in ys]),
                      np.array([s + len(y) - 1 for y, s in zip(ys, starts)]))
        return model._predict_points(ctx, H)

    def lstm(**params: object) -> forecasters.BaseForecaster:
        base = make_model("lstm")
        return type(base)(**{**base.get_params(), **params}).fit(panel)

    both, first, second = lstm(n_networks=2), lstm(n_networks=1), lstm(n_networks=1, seed=1)
    np.testing.assert_allclose(points(both), (points(first) + points(second)) / 2, rtol=1e-5, atol=1e-6)
    assert len(both.weights_) == 2 and len(both.epochs_) == 2
    old = lstm(n_networks=1)
    old.weights_ = old.weights_[0]
    del old.n_networks  # as pickled before n_networks existed
    old = loads(dumps(old))
    assert old.get_params()["n_networks"] == 1 and "n_networks=1" in repr(old.clone())
    np.testing.assert_allclose(points(old), points(first))
    with pytest.raises(ValueError, match="n_networks"):
        lstm(n_networks=0)


def test_lstm_trains_when_the_validation_stretch_is_longer_than_max_train_points() -> None:
    """A long season makes the validation stretch (7 seasons) long; max_train_points then
    counts training targets before it, not the whole tail (that would leave none to train on)."""
    from tests.forecasters.conftest import make_panel

    panel = make_panel(n_series=1, length=600)
    model = forecasters.get("lstm")(horizon=12, freq="h", season_length=48, max_train_points=100, max_epochs=1,
                                    hidden_size=8, samples_per_epoch=64, input_length=24, calibration_origins=4)
    assert len(model.fit(panel).predict()) == 12


def test_conformal_coverage_near_nominal() -> None:
    """On a stationary noisy panel the 80/95 intervals cover close to nominal."""
    rng = np.random.default_rng(3)
    t = np.arange(24 * 40)
    frames = [
        pd.DataFrame({"unique_id": f"c{i}", "ds": pd.date_range("2024-01-01", periods=len(t), freq="h"),
                      "y": 50 + 10 * np.sin(2 * np.pi * t / 24) + rng.normal(0, 1 + i, len(t))})
        for i in range(4)
    ]
    data = pd.concat(frames, ignore_index=True)
    model = forecasters.create("seasonal_naive", horizon=24)
    cv = cross_validation(model, data, h=24, n_windows=6)
    scores = forecasters.evaluate(cv, data, 24).iloc[0]
    assert abs(scores["coverage_80"] - 0.80) < 0.07
    assert abs(scores["coverage_95"] - 0.95) < 0.05


def test_intervals_follow_the_volatility_at_the_origin() -> None:
    """Calm, then turbulent, then calm again: the bands widen and narrow with the series,
    and a regime change in the calibration stretch does not leave them too wide or too narrow."""
    rng = np.random.default_rng(5)
    t = np.arange(24 * 42)
    sd = np.where((t >= 24 * 14) & (t < 24 * 28), 6.0, 1.0)  # two turbulent weeks in the middle
    y = 50 + 10 * np.sin(2 * np.pi * t / 24) + rng.normal(0, 1, len(t)) * sd
    data = pd.DataFrame({"unique_id": "v", "ds": pd.date_range("2024-01-01", periods=len(t), freq="h"), "y": y})
    model = forecasters.create("seasonal_naive", horizon=24)
    width = {}
    for name, end in (("turbulent", 24 * 28), ("calm", 24 * 42)):
        fc = model.fit(data.iloc[:end]).predict()
        width[name] = float((fc["hi_80"] - fc["lo_80"]).mean())
    assert width["turbulent"] > 3 * width["calm"]
    # the last two calm weeks, forecast after a calibration stretch that spans the turbulence
    cv = cross_validation(model, data, h=24, n_windows=12)
    scores = forecasters.evaluate(cv, data, 24).iloc[0]
    assert abs(scores["coverage_80"] - 0.80) < 0.08
    assert scores["coverage_95"] > 0.88


def test_recent_calibration_origins_weigh_more(caplog) -> None:
    """An origin's weight halves every quarter of the calibration stretch (400 origins: the
    newest weighs 1, the oldest about 1/16), or every MIN_HALF_LIFE steps for a short stretch,
    and the quantile is weighted: when only the newest 15 origins erred widely, the 80%
    half-width is that wide error (equal weights, the split-conformal rank, give the calm one).
    A stretch too short for any error to reach the 95% level is said in the log."""
    t = np.arange(24 * 40)
    data = pd.DataFrame({"unique_id": "v", "ds": pd.date_range("2024-01-01", periods=len(t), freq="h"),
                         "y": 50 + 10 * np.sin(2 * np.pi * t / 24) + np.random.default_rng(1).normal(0, 1, len(t))})
    model = forecasters.get("seasonal_naive")(horizon=6, calibration_origins=400).fit(data)
    w = model.conformal_weights_
    assert w.shape == (base.MAX_CAL_ORIGINS,) and w.max() == 1 and w.min() == pytest.approx(0.5 ** (399 / 100))
    n = len(w)
    newest = np.argsort(-w)[:15]
    model.conformal_scores_ = np.ones((n, 6))
    model.conformal_scores_[newest] = 2.0
    assert (model.conformal_quantile(80) == 2).all()
    model.conformal_weights_ = np.ones(n)
    assert (model.conformal_quantile(80) == 1).all()  # rank ceil(169 * 0.8) = 136 of 153 calm errors
    assert (model.conformal_quantile(95) == 2).all()
    model.conformal_scores_ = np.tile(np.linspace(0.5, 1.1, n)[:, None], (1, 6))  # a light tail
    assert model.conformal_quantile(95) == pytest.approx(model._weighted_quantile(80) * 1.959964 / 1.281552)
    assert (model._weighted_quantile(95) < model.conformal_quantile(95)).all()  # the floor binds
    short = forecasters.get("seasonal_naive")(horizon=6, calibration_origins=100).fit(data)
    assert short.conformal_weights_.min() == pytest.approx(0.5 ** (99 / base.MIN_HALF_LIFE))
    with caplog.at_level("WARNING"):
        forecasters.get("seasonal_naive")(horizon=6).fit(data.iloc[:24 * 2])
    assert "intervals at 95% are the widest calibration error" in caplog.text


def test_predict_from_new_history_uses_only_that_history(panel: pd.DataFrame) -> None:
    """predict(history=...) forecasts after the given history with the learned model."""
    model = make_model("lgbm").fit(panel)
    cut = panel.groupby("unique_id").head(24 * 8)
    fc = model.predict(history=cut)
    assert (fc.groupby("unique_id")["ds"].min() == cut.groupby("unique_id")["ds"].max() + pd.Timedelta(hours=1)).all()
    later = panel.groupby("unique_id").head(24 * 9)
    assert not np.allclose(model.predict(history=later)["mean"], fc["mean"])
    with pytest.raises(forecasters.HistoryError, match="not seen"):
        model.predict(history=make_panel(prefix="zz"))


@pytest.mark.slow
def test_hybrid_residual_variant(panel: pd.DataFrame) -> None:
    base = make_model("prophet_lgbm")
    model = type(base)(**{**base.get_params(), "boost_target": "residual"})
    fc = model.fit(panel).predict()
    assert np.isfinite(fc["mean"]).all() and len(fc) == 2 * 12
    with pytest.raises(ValueError, match="boost_target"):
        type(base)(**{**base.get_params(), "boost_target": "nope"}).fit(panel)


def test_an_idle_series_is_forecast_idle(panel: pd.DataFrame) -> None:
    """A machine idle at exactly 0 gets 0, not a correction learned in scaled units (which
    would make sMAPE 200 on every idle point)."""
    idle = panel[panel["unique_id"] == panel["unique_id"].iloc[0]].assign(unique_id="idle", y=0.0)
    model = make_model("lgbm").fit(pd.concat([panel, idle], ignore_index=True))
    out = model.predict()
    assert (out.loc[out["unique_id"] == "idle", "mean"] == 0.0).all()
    assert (out.loc[out["unique_id"] != "idle", "mean"] > 0).all()


def test_too_few_calibration_origins_are_said(caplog) -> None:
    from tests.forecasters.conftest import make_panel

    model = forecasters.get("seasonal_naive")(horizon=24, freq="h", season_length=24)
    with caplog.at_level("WARNING"):
        model.fit(make_panel(n_series=1, length=24 + 24 + 3))
    assert "only 4 calibration origin(s)" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        model.fit(make_panel(n_series=1, length=24 * 10))
    assert "calibration origin" not in caplog.text


def test_lstm_epoch_is_samples_per_epoch_draws_however_few_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    """One short series has fewer training windows than samples_per_epoch: an epoch still
    draws samples_per_epoch of them (with replacement), so early stopping's patience, in
    epochs, gives the network as many steps as on a panel."""
    import torch

    from tests.forecasters.conftest import make_panel

    steps = []
    real_step = torch.optim.Adam.step
    monkeypatch.setattr(torch.optim.Adam, "step", lambda self, *a, **k: (steps.append(1), real_step(self, *a, **k))[1])
    panel = make_panel(n_series=1, length=200)
    model = forecasters.get("lstm")(horizon=12, freq="h", season_length=24, max_epochs=2, patience=10,
                                    hidden_size=8, samples_per_epoch=512, batch_size=64, input_length=24,
                                    val_points=24, n_networks=1, calibration_origins=4)
    model._fit_points(model._validate(panel, 1))
    assert model.epochs_ == [2]
    assert len(steps) == 2 * 512 // 64


def test_lstm_calibration_copy_trains_the_epochs_the_fitted_networks_kept() -> None:
    """The intervals come from a copy fit on less data; it trains exactly as many epochs as
    each fitted network kept (0: the untrained anchor), not early-stopped on its own shorter
    validation, which would keep the anchor while the fitted networks train."""
    from tests.forecasters.conftest import make_panel

    panel = make_panel(n_series=2, length=240)
    model = forecasters.get("lstm")(horizon=12, freq="h", season_length=24, max_epochs=3, patience=10,
                                    min_improvement=0.0, hidden_size=8, samples_per_epoch=256, batch_size=64,
                                    input_length=24, val_points=24, n_networks=2, calibration_origins=24)
    model.fit(panel)
    assert len(model.best_epochs_) == 2 and all(0 <= b <= e for b, e in zip(model.best_epochs_, model.epochs_))
    frame = model._validate(panel, 1)
    for kept in ([2, 3], [0, 1]):
        model.best_epochs_ = kept
        copy = model._calibration_copy()
        copy._fit_points(frame)
        assert copy.epochs_ == kept and copy.best_epochs_ == kept
    # no epoch: the untrained network, whose last layer starts at zero (the anchor)
    assert not copy.weights_[0]["head.2.weight"].any()
    assert copy.weights_[1]["head.2.weight"].any()


def test_calibration_refits_fit_each_block_of_origins_on_the_data_before_it() -> None:
    """A model whose forecast does not read the data after its fit (as Prophet's) is
    calibrated by copies fit before each block of origins, so a calibration error's lead
    stays near its step instead of growing over the whole calibration stretch."""
    from forecasters.base import BaseForecaster

    class LastFitValue(BaseForecaster):
        """Forecasts the last value it was fit on, whatever the origin."""

        name = "last_fit_value"

        def __init__(self, horizon: int = 6, freq: str | None = "h", season_length: int = 4,
                     calibration_origins: int = 40) -> None:
            self.horizon, self.freq = horizon, freq
            self.season_length, self.calibration_origins = season_length, calibration_origins

        def _fit_points(self, frame: pd.DataFrame) -> None:
            self.fits_ = getattr(self, "fits_", []) + [len(frame)]
            self.last_ = frame.groupby("unique_id")["y"].last().to_dict()

        def _predict_points(self, ctx, h: int) -> np.ndarray:
            return np.array([[self.last_[u]] * h for u in ctx.uids], dtype=float)

    n = 120
    data = pd.DataFrame({"unique_id": "up", "ds": pd.date_range("2024-01-01", periods=n, freq="h"),
                         "y": np.arange(n, dtype=float)})  # a ramp: the error is the lead
    span = 6 + 40 - 1
    for refits, worst_lead in ((1, 40 + 6 - 1), (4, 10 + 6 - 1)):
        LastFitValue.calibration_refits = refits
        copies: list[BaseForecaster] = []
        LastFitValue._calibration_copy = lambda self, made=copies: made.append(self.clone()) or made[-1]
        model = LastFitValue().fit(data)
        assert [c.fits_ for c in copies] == [[n - span + k * 40 // refits] for k in range(refits)]
        # the ramp's seasonal difference is the season length: scores are leads / 4
        assert model.conformal_scores_.max() * 4 == pytest.approx(worst_lead)
        assert model.conformal_scores_.min() * 4 == pytest.approx(1)


def test_without_a_season_ets_is_a_damped_trend_and_short_data_fit() -> None:
    """season_length 1 (no season): ets follows a trend instead of falling back to fixed
    smoothing, and the boosted and Prophet models fit the small copies calibration makes."""
    rng = np.random.default_rng(0)
    t = np.arange(120)
    data = pd.DataFrame({"unique_id": "a", "ds": t, "y": 5 + 0.5 * t + rng.normal(0, 1, len(t))})
    for name in ("ets", "lgbm", "prophet_lgbm"):
        model = forecasters.create(name, horizon=6, freq=None, season_length=1)
        cv = cross_validation(model, data, h=6, n_windows=3)
        assert forecasters.evaluate(cv, data, 1).iloc[0]["mase"] < 2.5, name


def test_bad_parameters_are_clear_errors(panel: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match="season_length must be >= 1"):
        forecasters.create("seasonal_naive", horizon=H, season_length=0).fit(panel)
    model = forecasters.create("seasonal_naive", horizon=H).fit(panel)
    with pytest.raises(ValueError, match="between 0 and 100"):
        model.predict(level=(0,))
    with pytest.raises(ValueError, match="whole number"):
        cross_validation(model, panel, h=H, n_windows=2, step=2.5)
    with pytest.raises(forecasters.HistoryError, match="unique_id has 1 missing"):
        model.fit(panel.astype({"unique_id": object}).assign(unique_id=lambda f: f["unique_id"].where(f.index > 0)))


def test_prophet_refits_give_the_same_artifact(panel: pd.DataFrame) -> None:
    """The registry keeps a model's row when a refit gives the same bytes: Prophet's
    changepoints must not drag a frame's leftovers (different each fit) into its pickle."""
    small = panel[panel["unique_id"] == panel["unique_id"].iloc[0]]
    first = dumps(forecasters.create("prophet", horizon=H).fit(small))
    assert dumps(forecasters.create("prophet", horizon=H).fit(small)) == first


@pytest.mark.slow
def test_hybrid_booster_learns_from_out_of_sample_prophet(panel: pd.DataFrame, monkeypatch: pytest.MonkeyPatch) -> None:
    """The booster's Prophet features come from a fit that did not see their targets: each
    fit (the model's, then its calibration copy's) first fits Prophet without the last
    ``feature_holdout`` points, then on all of its history to serve."""
    from forecasters.prophet_model import ProphetCore

    seen: list[int] = []
    fit = ProphetCore.fit

    def recording(self: ProphetCore, frame: pd.DataFrame) -> dict[str, object]:
        seen.append(int(frame.groupby("unique_id").size().max()))
        return fit(self, frame)

    monkeypatch.setattr(ProphetCore, "fit", recording)
    model = make_model("prophet_lgbm").set_params(feature_holdout=100)
    model.fit(panel)
    span = model._calibration_span_
    assert seen == [len(panel) // 2 - 100, len(panel) // 2, len(panel) // 2 - span - 100, len(panel) // 2 - span]
    seen.clear()
    make_model("prophet_lgbm").set_params(feature_holdout=0).fit(panel)  # in-sample, as before
    assert seen == [len(panel) // 2, len(panel) // 2 - span]


@pytest.mark.slow
def test_hybrid_mixes_its_booster_with_lgbm_itself(panel: pd.DataFrame) -> None:
    """The forecast is ``plain_share`` of lgbm, trained as the lgbm model trains, and the rest
    of the Prophet-fed booster; at 0 it is the Prophet-fed booster alone."""
    from forecasters.base import Context, series_arrays, windows_at

    model = make_model("prophet_lgbm").set_params(plain_share=0.25).fit(panel)
    assert model.plain_.booster_.num_feature() < model.booster_.num_feature()  # no Prophet columns
    frame = model._validate(panel, model.min_points())
    uids, ys, starts = series_arrays(frame)
    width = model._context_length()
    ctx = Context(uids, np.vstack([windows_at(y, width, [len(y)]) for y in ys]),
                  np.array([s + len(y) - 1 for y, s in zip(ys, starts)]))
    mixed = model._predict_points(ctx, H)
    fed = model.set_params(plain_share=0.0)._predict_points(ctx, H)
    plain = model.plain_._predict_points(ctx, H)
    np.testing.assert_allclose(mixed, 0.75 * fed + 0.25 * plain, rtol=1e-9)
    assert not np.allclose(fed, plain)
    # the same forecasts, and the same intervals' errors, as the lgbm model's
    lgbm = make_model("lgbm").fit(panel)
    np.testing.assert_allclose(plain, lgbm._predict_points(ctx, H), rtol=1e-12)
    assert model.plain_.probe_ is None and lgbm.probe_ is None  # each probe served as its calibration copy
    model.plain_ = model.plain_.booster_  # an artifact from before: the plain booster bare
    np.testing.assert_allclose(model.set_params(plain_share=0.25)._predict_points(ctx, H), mixed, rtol=1e-12)
    with pytest.raises(ValueError, match="plain_share must be in"):
        make_model("prophet_lgbm").set_params(plain_share=1.0).fit(panel)


def test_an_artifact_cut_short_or_altered_is_refused_in_one_line(panel: pd.DataFrame) -> None:
    """Checked before unpickling: a flipped byte in a booster's text loaded as wrong forecasts
    or aborted the process inside LightGBM; a cut one was a raw pickle error."""
    import pickle

    from forecasters import serialize

    good = forecasters.dumps(forecasters.create("lgbm").fit(panel))
    at = good.find(b"tree_sizes=")
    for bad in (good[:-100], good[:at] + b"tree_sizes=x" + good[at + 12:], good[:40]):
        with pytest.raises(ValueError, match="corrupt or truncated forecaster artifact"):
            forecasters.loads(bad)
    legacy = serialize.MAGIC_V1 + good[len(serialize.MAGIC) + serialize.DIGEST_LEN + 1:]  # before the digest
    pd.testing.assert_frame_equal(forecasters.loads(legacy).predict(), forecasters.loads(good).predict())
    gone = pickle.dumps(forecasters.create("lgbm")).replace(b"forecasters.lgbm", b"forecasters.gone")
    with pytest.raises(ValueError, match="a model this headroom does not have"):
        forecasters.loads(serialize.MAGIC_V1 + gone)


@pytest.mark.slow
def test_lstm_fits_on_threads_at_once_equal_each_alone() -> None:
    """The train flow fits groups at once on threads; torch's generator and thread count are
    the process's: a fit seeded while another built its network drew that one's weights, so
    re-running train changed the LSTM's backtests (by up to 1.85 units on a level of 300)."""
    from concurrent.futures import ThreadPoolExecutor

    panels = [make_panel(n_series=2, length=24 * 10, seed=s) for s in range(4)]
    alone = [make_model("lstm").fit(p).predict() for p in panels]
    for _ in range(2):
        with ThreadPoolExecutor(4) as pool:
            together = list(pool.map(lambda p: make_model("lstm").fit(p).predict(), panels))
        for a, b in zip(alone, together):
            pd.testing.assert_frame_equal(a, b)
