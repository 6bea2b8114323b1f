"""statsforecast MSTL+AutoETS variants on the M4 Hourly dev split: fit window, forward context."""
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from statsforecast.models import MSTL

from benchmarks import m4

train, test = m4.load(Path(os.environ.get("HEADROOM_DATASETS", Path(__file__).resolve().parents[2] / "shared" / "datasets")))
ys = {u: g["y"].to_numpy() for u, g in train.groupby("unique_id", sort=False)}
base = m4.scores(train, test, m4._future(train, {u: m4.naive2(y) for u, y in ys.items()}, "f"), "f")
def owa(fc):
    s = m4.scores(train, test, m4._future(train, fc, "f"), "f")
    return 0.5 * (s.smape.mean() / base.smape.mean() + s.mase.mean() / base.mase.mean()), s.smape.mean(), s.mase.mean()
fitw = int(sys.argv[1])
ctxs = [int(c) for c in sys.argv[2].split(",")]
t = time.perf_counter()
models = {u: MSTL(season_length=[24, 168]).fit(y[-fitw:] if fitw else y) for u, y in ys.items()}
print(f"fit {fitw or 'full'}: {time.perf_counter()-t:.0f}s", flush=True)
for c in ctxs:
    t = time.perf_counter()
    fc = {u: (models[u].forward(y[-c:], 48)["mean"] if c else models[u].predict(48)["mean"]) for u, y in ys.items()}
    o, s, m = owa(fc)
    print(f"fit {fitw or 'full'} ctx {c or 'fit'}: owa {o:.3f} smape {s:.3f} mase {m:.3f} {time.perf_counter()-t:.0f}s", flush=True)
