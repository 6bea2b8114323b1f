"""M4 Hourly on the held-out last 48 points of the training part, as the competition's entrants
developed (the official test part is kept for acceptance; given its file, ``--m4-test``, the
models fit the whole training part and are scored on it): sMAPE, MASE and OWA against Naive2,
headroom's models beside statsforecast and mlforecast in the same run.

Used by ``forecast_accuracy.py --suites m4``; the metrics follow the competition's definitions:
sMAPE = mean 200|y-f|/(|y|+|f|); MASE scales the MAE by the in-sample seasonal-naive (m=24) MAE;
OWA = (sMAPE/sMAPE_Naive2 + MASE/MASE_Naive2)/2, Naive2 being the naive forecast of the series
seasonally adjusted by classical multiplicative decomposition when its lag-24 autocorrelation
passes the 90% test (else plain naive).
"""
from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import pandas as pd

H, M = 48, 24
FILE = Path("m4-hourly-train") / "Hourly-train.csv.gz"
log = logging.getLogger("m4")


def _wide(path: Path) -> dict[str, np.ndarray]:
    """The series of an M4 wide file (id in the first column, values after, shorter series
    ending in empty cells), in file order. A file that cannot be read as one, or names a
    series twice, is a ValueError naming it."""
    try:
        wide = pd.read_csv(path)
        out: dict[str, np.ndarray] = {}
        for row in wide.itertuples(index=False):
            u = str(row[0])
            if u in out:
                raise ValueError(f"series {u} has two rows")
            try:
                y = np.asarray(row[1:], dtype=float)
            except ValueError as err:
                raise ValueError(f"series {u}: {err}") from None
            out[u] = y[~np.isnan(y)]
    except (ValueError, UnicodeDecodeError) as err:  # pandas' parser and empty-data errors are ValueErrors
        raise ValueError(f"{path}: {err}") from None
    return out


def load(root: Path, test_file: Path | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(train, test): each series of the wide file as ``unique_id, ds, y`` on an hourly grid from
    2000-01-01 (M4 gives no timestamps). Without ``test_file`` its last ``H`` points are held
    out; with it (the official ``Hourly-test.csv``, same layout) the whole training part is
    fit on and the file's ``H`` points of each series are the test."""
    series = _wide(root / FILE)
    frames = [pd.DataFrame({"unique_id": u, "ds": pd.date_range("2000-01-01", periods=len(y), freq="h"), "y": y})
              for u, y in series.items()]
    data = pd.concat(frames, ignore_index=True)
    if test_file is None:
        test = data.groupby("unique_id", sort=False).tail(H)
        return data.drop(test.index).reset_index(drop=True), test.reset_index(drop=True)
    official = _wide(test_file)
    for u in series:
        if u not in official:
            raise ValueError(f"{test_file}: series {u} of the training part has no row")
        if len(official[u]) != H:
            raise ValueError(f"{test_file}: series {u} has {len(official[u])} test values, not {H}")
    extra = sorted(set(official) - set(series))
    if extra:
        raise ValueError(f"{test_file}: series {extra[0]} is not in the training part ({len(extra)} such)")
    test = pd.concat([pd.DataFrame({"unique_id": u, "y": official[u],
                                    "ds": pd.date_range("2000-01-01", periods=len(y) + H, freq="h")[-H:]})
                      for u, y in series.items()], ignore_index=True)[["unique_id", "ds", "y"]]
    return data, test


def _acf(x: np.ndarray, k: int) -> float:
    x = x - x.mean()
    return float((x[:-k] * x[k:]).sum() / (x * x).sum())


def naive2(y: np.ndarray, h: int = H, m: int = M) -> np.ndarray:
    """The competition's Naive2 benchmark for one series."""
    n = len(y)
    r = np.array([_acf(y, k) for k in range(1, m + 1)])
    limit = 1.645 * np.sqrt((1 + 2 * np.sum(r[:-1] ** 2)) / n)
    if abs(r[-1]) <= limit:
        return np.full(h, y[-1])
    trend = pd.Series(y).rolling(m, center=True).mean().rolling(2, center=True).mean().shift(-1).to_numpy()
    phase = np.arange(n) % m
    index = np.array([np.nanmean((y / trend)[phase == i]) for i in range(m)])
    index /= index.mean()
    return (y / index[phase])[-1] * index[np.arange(n, n + h) % m]


def naive2_scores(train: pd.DataFrame, test: pd.DataFrame) -> pd.DataFrame:
    """Naive2's sMAPE and MASE per series: the base OWA divides by."""
    ys = {u: g["y"].to_numpy() for u, g in train.groupby("unique_id", sort=False)}
    return scores(train, test, _future(train, {u: naive2(y) for u, y in ys.items()}, "f"), "f")


def scores(train: pd.DataFrame, test: pd.DataFrame, forecast: pd.DataFrame, column: str) -> pd.DataFrame:
    """sMAPE and MASE per series of ``forecast[column]`` on the held-out points."""
    seen = {u: g["y"].to_numpy() for u, g in train.groupby("unique_id", sort=False)}
    fc = {u: g.sort_values("ds")[column].to_numpy(dtype=float) for u, g in forecast.groupby("unique_id")}
    rows = []
    for u, g in test.groupby("unique_id", sort=False):
        y, f, past = g["y"].to_numpy(), fc[u], seen[u]
        rows.append({"unique_id": u, "smape": float(np.mean(200 * np.abs(y - f) / (np.abs(y) + np.abs(f)))),
                     "mase": float(np.mean(np.abs(y - f)) / np.mean(np.abs(past[M:] - past[:-M])))})
    return pd.DataFrame(rows)


def coverage(test: pd.DataFrame, forecast: pd.DataFrame, lo: str, hi: str) -> dict[str, float]:
    """The share of held-out points inside the 80% and 95% intervals (columns ``lo``/``hi``
    formatted with the level)."""
    both = test.merge(forecast, on=["unique_id", "ds"], how="inner")
    return {f"coverage_{lv}": float(((both["y"] >= both[lo.format(lv)]) & (both["y"] <= both[hi.format(lv)])).mean())
            for lv in (80, 95) if lo.format(lv) in both}


def owa_gap(s: pd.DataFrame, ref: pd.DataFrame, base: pd.DataFrame, draws: int = 2000,
            seed: int = 0) -> tuple[float, float]:
    """90% interval of OWA(s) - OWA(ref) from a paired bootstrap over series: each draw takes
    the same series for both and for Naive2 (all three are ``scores`` frames)."""
    keys = s["unique_id"].to_numpy()
    cols = ["smape", "mase"]
    a, r, b = (f.set_index("unique_id").loc[keys, cols].to_numpy() for f in (s, ref, base))
    pick = np.random.default_rng(seed).integers(0, len(keys), (draws, len(keys)))
    # (draws, 2): mean sMAPE and MASE per draw, skipping NaN as the point OWA's pandas means do
    a, r, b = (np.nanmean(x[pick], axis=1) for x in (a, r, b))
    gap = 0.5 * ((a - r) / b).sum(axis=1)
    lo, hi = np.quantile(gap, [0.05, 0.95])
    return float(lo), float(hi)


def _row(name: str, source: str, s: pd.DataFrame, base: pd.DataFrame, seconds: float,
         ref: pd.DataFrame | None = None, dataset: str = "m4_hourly_holdout") -> dict:
    """A model's metrics; with ``ref`` (seasonal naive's scores) also the 90% interval of its
    OWA minus the reference's (``owa_gap_lo``, ``owa_gap_hi``: both below 0, it beats it)."""
    owa = 0.5 * (s["smape"].mean() / base["smape"].mean() + s["mase"].mean() / base["mase"].mean())
    row = {"dataset": dataset, "model": name, "source": source, "smape": s["smape"].mean(),
           "mase": s["mase"].mean(), "owa": owa, "seconds": seconds}
    if ref is not None:
        row["owa_gap_lo"], row["owa_gap_hi"] = owa_gap(s, ref, base)
    return row


def _future(train: pd.DataFrame, values: dict[str, np.ndarray], column: str) -> pd.DataFrame:
    last = train.groupby("unique_id", sort=False)["ds"].max()
    return pd.concat([pd.DataFrame({"unique_id": u, "ds": pd.date_range(t + pd.Timedelta("1h"), periods=H, freq="h"),
                                    column: values[u]}) for u, t in last.items()], ignore_index=True)


def dataset_name(test_file: Path | None) -> str:
    """The rows' label: the official test part, or the training part's held-out points."""
    return "m4_hourly_test" if test_file is not None else "m4_hourly_holdout"


def test_option_problem(test_file: Path | None, suites: list[str]) -> str | None:
    """What is wrong with ``--m4-test`` before any suite runs (None: nothing)."""
    if test_file is None:
        return None
    if "m4" not in suites:
        return "--m4-test scores the m4 suite: add m4 to --suites"
    return None if test_file.is_file() else f"--m4-test {test_file}: no such file"


def run(split: tuple[pd.DataFrame, pd.DataFrame], names: list[str], peers: bool, seed: int = 0,
        ds: str = "m4_hourly_holdout") -> list[dict]:
    """One row per model: Naive2 and seasonal naive, headroom's ``names``, then the peers, on
    ``split`` (:func:`load`'s (train, test)), the rows labelled ``ds``."""
    import forecasters

    train, test = split
    log.info("m4: %d series, %d training points", train["unique_id"].nunique(), len(train))
    ys = {u: g["y"].to_numpy() for u, g in train.groupby("unique_id", sort=False)}
    base = naive2_scores(train, test)
    rows = [_row("naive2", "benchmark", base, base, 0.0, dataset=ds)]
    snaive = scores(train, test, _future(train, {u: np.tile(y[-M:], H // M) for u, y in ys.items()}, "f"), "f")
    rows.append(_row("seasonal_naive", "benchmark", snaive, base, 0.0, dataset=ds))
    for name in [n for n in names if n != "seasonal_naive"]:  # its row is the benchmark's, above
        wall = time.perf_counter()
        model = forecasters.create(name, horizon=H, freq="h", season_length=M, seed=seed)
        fc = model.fit(train).predict(H, level=(80, 95))
        rows.append(_row(name, "headroom", scores(train, test, fc, "mean"), base, time.perf_counter() - wall, snaive,
                         ds) | coverage(test, fc, "lo_{}", "hi_{}"))
        log.info("m4 %s: OWA %.3f in %.0fs", name, rows[-1]["owa"], rows[-1]["seconds"])
    if peers:
        rows += _peers(train, test, base, snaive, ds)
    return rows


def mlforecast_peer(train: pd.DataFrame) -> pd.DataFrame:
    """mlforecast's LightGBM in the issue's configuration (lags 1, 2, 3, 24, 48, 168,
    ``Differences([24])`` + ``LocalStandardScaler``, 100 trees, one thread), fit on ``train``
    with its conformal intervals (2 windows): the next ``H`` hours at 80% and 95%, columns
    ``mlf_lgbm`` and ``mlf_lgbm-lo-80`` ... Raises ImportError without mlforecast."""
    import lightgbm as lgb
    from mlforecast import MLForecast
    from mlforecast.target_transforms import Differences, LocalStandardScaler
    from mlforecast.utils import PredictionIntervals

    mlf = MLForecast(models={"mlf_lgbm": lgb.LGBMRegressor(n_estimators=100, verbosity=-1, n_jobs=1)}, freq="h",
                     lags=[1, 2, 3, 24, 48, 168], target_transforms=[Differences([24]), LocalStandardScaler()])
    mlf.fit(train, prediction_intervals=PredictionIntervals(n_windows=2, h=H))
    return mlf.predict(H, level=[80, 95])


def _peers(train: pd.DataFrame, test: pd.DataFrame, base: pd.DataFrame, ref: pd.DataFrame,
           ds: str = "m4_hourly_holdout") -> list[dict]:
    """mlforecast's LightGBM (the issue's configuration, with its conformal intervals) and
    statsforecast's MSTL, when installed."""
    rows = []
    try:
        wall = time.perf_counter()
        fc = mlforecast_peer(train)
        rows.append(_row("mlf_lgbm", "peer", scores(train, test, fc, "mlf_lgbm"), base, time.perf_counter() - wall, ref,
                         ds) | coverage(test, fc, "mlf_lgbm-lo-{}", "mlf_lgbm-hi-{}"))
    except ImportError:
        log.warning("mlforecast not installed: no mlforecast peer")
    try:
        from statsforecast import StatsForecast
        from statsforecast.models import MSTL

        wall = time.perf_counter()
        fc = StatsForecast(models=[MSTL(season_length=[24, 168], alias="sf_mstl")], freq="h", n_jobs=1).forecast(
            df=train, h=H)
        rows.append(_row("sf_mstl", "peer", scores(train, test, fc, "sf_mstl"), base, time.perf_counter() - wall, ref,
                         ds))
    except ImportError:
        log.warning("statsforecast not installed: no statsforecast peer")
    return rows
