"""Screen Prophet variants on the M4 Hourly dev split (first N series, or all): point forecasts."""
import json
import logging
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from concurrent.futures import ThreadPoolExecutor

from benchmarks import m4
from forecasters.prophet_model import quiet_stan

train, test = m4.load(Path(os.environ.get("HEADROOM_DATASETS", Path(__file__).resolve().parents[2] / "shared" / "datasets")))
N = int(sys.argv[1])
keep = train["unique_id"].drop_duplicates().iloc[:N] if N else train["unique_id"].drop_duplicates()
train = train[train.unique_id.isin(keep)]
test = test[test.unique_id.isin(keep)]
ys = {u: g["y"].to_numpy() for u, g in train.groupby("unique_id", sort=False)}
base = m4.scores(train, test, m4._future(train, {u: m4.naive2(y) for u, y in ys.items()}, "f"), "f")
snaive = m4.scores(train, test, m4._future(train, {u: np.tile(y[-24:], 2) for u, y in ys.items()}, "f"), "f")
def owa(s):
    return 0.5 * (s.smape.mean() / base.smape.mean() + s.mase.mean() / base.mase.mean())
print(f"{N} series: snaive owa {owa(snaive):.3f}", flush=True)
EPOCH = pd.Timestamp("1970-01-05")
def one(y, window=672, ncp=10, cps=0.05, d_order=6, w_order=10, mode="additive", log=False, weekly_min=336, sps=10.0, growth="linear", cpr=0.8):
    quiet_stan()
    logging.getLogger("cmdstanpy").disabled = True
    from prophet import Prophet
    y = y[-window:]
    yt = np.log1p(y) if log else y
    m = Prophet(growth=growth, n_changepoints=min(ncp, len(y)//10), changepoint_prior_scale=cps, uncertainty_samples=0,
                daily_seasonality=False, weekly_seasonality=False, yearly_seasonality=False,
                seasonality_mode=mode, seasonality_prior_scale=sps, changepoint_range=cpr)
    m.add_seasonality(name="s24", period=1, fourier_order=d_order)
    if len(y) >= weekly_min and w_order:
        m.add_seasonality(name="s168", period=7, fourier_order=w_order)
    ds = EPOCH + pd.to_timedelta(np.arange(len(y) + 48), unit="h")
    df = pd.DataFrame({"ds": ds[:len(y)], "y": yt})
    m.fit(df)
    f = m.predict(pd.DataFrame({"ds": ds[len(y):]}))["yhat"].to_numpy()
    return np.expm1(f) if log else f
variants = json.loads(sys.argv[2])
for name, kw in variants.items():
    t = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        fc = dict(zip(ys, pool.map(lambda y, kw=kw: one(y, **kw), ys.values())))
    s = m4.scores(train, test, m4._future(train, fc, "f"), "f")
    print(f"{name} {kw}: owa {owa(s):.3f} smape {s.smape.mean():.3f} mase {s.mase.mean():.3f} {time.perf_counter()-t:.0f}s", flush=True)
