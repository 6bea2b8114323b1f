"""lstm: one global LSTM across series, direct multi-horizon output.

Each sample is a window of per-window-scaled history before an origin; the
network reads the last ``input_length`` values (with their seasonal phase) and,
through a skip connection, corrects an anchor for all ``h`` steps at once: the robust
median of the same phase over the last cycles, or the value one season back (seasonal
naive), per series whichever forecasts its validation stretch better (``anchor="auto"``).
Training stops early on a time-based validation split: the last ``val_points`` of
every series are only ever validation targets. The copy that calibrates the intervals
trains as many epochs as the fitted networks kept.
"""
from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator

import numpy as np
import pandas as pd

from forecasters.base import BaseForecaster, Context, series_arrays, windows_at
from forecasters.features import FeatureSpec, seasonal_block
from forecasters.registry import register
from forecasters.validation import HistoryError, default_seasons

log = logging.getLogger(__name__)
EPS = 1e-9
ANCHORS = ("median", "last")  # what the network corrects: the seasonal median, or seasonal naive


def lstm_inputs(
    win: np.ndarray, origin_step: np.ndarray, h: int, input_length: int, seasons: tuple[int, ...],
    anchor: str | np.ndarray = "median",
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The one feature builder (fit and predict): (sequence, static, anchor, scale).

    ``win`` holds the values up to each origin (most recent last), ``origin_step``
    the step index of its last value. The anchor the network corrects is the robust
    seasonal median (``"median"``, see :func:`forecasters.features.build_features`) or the
    value one season back (``"last"``, seasonal naive), or per row (a boolean array, True:
    ``"last"``).
    """
    spec = FeatureSpec(seasons)
    with np.errstate(all="ignore"):
        scale = np.nanmean(np.abs(win[:, -spec.scale_window:]), axis=1)
    scale = np.where(np.isfinite(scale) & (scale > EPS), scale, 1.0)
    norm = win / scale[:, None]
    last = pd.DataFrame(norm).ffill(axis=1).to_numpy()[:, -1]
    seq_y = np.where(np.isnan(norm[:, -input_length:]), last[:, None], norm[:, -input_length:])
    steps = origin_step[:, None] + np.arange(-input_length + 1, 1)[None, :]
    s0 = seasons[0]
    seq = np.stack([seq_y, np.sin(2 * np.pi * steps / s0), np.cos(2 * np.pi * steps / s0)], axis=2)
    if isinstance(anchor, str):
        if anchor not in ANCHORS:
            raise ValueError(f"lstm: anchor must be one of {', '.join(ANCHORS)}, not {anchor!r}")
        anchor = np.full(len(win), anchor == "last")
    use_last, anchor, statics = np.asarray(anchor, dtype=bool), [], []
    for k in range(1, h + 1):
        ks = np.full(len(norm), k)
        block = [seasonal_block(norm, ks, s, spec.repeats(i)) for i, s in enumerate(seasons)]
        # seasonal naive: one cycle back, or two for steps beyond one cycle
        last_cycle = np.where(np.isnan(block[0][0]), block[0][1], block[0][0])
        base = np.where(use_last, last_cycle, block[0][2])
        anchor.append(np.where(np.isnan(base), last, base))
        statics += [b[0] for b in block]  # one cycle back, per season
    anchor_m = np.column_stack(anchor)
    static = np.column_stack(statics)
    static = np.where(np.isnan(static), np.repeat(anchor_m, len(seasons), axis=1), static)
    phase = [np.column_stack([np.sin(2 * np.pi * ((origin_step + 1) % s) / s),
                              np.cos(2 * np.pi * ((origin_step + 1) % s) / s)]) for s in seasons]
    static = np.hstack([static, anchor_m, *phase])
    return seq.astype(np.float32), static.astype(np.float32), anchor_m.astype(np.float32), scale


def _network(n_static: int, h: int, hidden: int, layers: int) -> object:
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(3, hidden, num_layers=layers, batch_first=True)
            self.head = nn.Sequential(nn.Linear(hidden + n_static, hidden), nn.ReLU(), nn.Linear(hidden, h))
            # start exactly at the anchor: the network only learns a correction
            nn.init.zeros_(self.head[2].weight)
            nn.init.zeros_(self.head[2].bias)

        def forward(self, seq: torch.Tensor, static: torch.Tensor, base: torch.Tensor) -> torch.Tensor:
            _, (hn, _) = self.lstm(seq)
            return base + self.head(torch.cat([hn[-1], static], dim=1))

    return Net()


def weighted_l1(pred: object, target: object, weight: object) -> object:
    """Mean absolute error with one weight per sample (row)."""
    return ((pred - target).abs().mean(dim=1) * weight).mean()  # type: ignore[operator, union-attr]


# torch's random generator and its thread count belong to the process (OpenMP's count to
# each thread), and the train flow fits several groups' models at once on threads: torch
# work runs one block at a time under this lock, so no fit draws from another's seed or
# runs on a thread count another set (re-running train changed the LSTM's backtests)
_TORCH = threading.RLock()


@contextlib.contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    """Hold the torch lock and use ``n`` intra-op threads for the block (set from this
    thread: OpenMP keeps a count per thread), then restore the caller's setting."""
    import torch

    with _TORCH:
        before = torch.get_num_threads()
        torch.set_num_threads(n)
        try:
            yield
        finally:
            torch.set_num_threads(before)


@register
class LSTMForecaster(BaseForecaster):
    """Global LSTM, direct multi-horizon, early-stopped, seeded; the mean of ``n_networks``
    networks trained from seeds ``seed``, ``seed + 1``, ..."""

    name = "lstm"
    forecasts_any_series = True  # from each context alone

    def __init__(
        self,
        horizon: int = 24,
        freq: str | None = "h",
        season_length: int = 24,
        calibration_origins: int = 336,
        input_length: int = 48,
        hidden_size: int = 48,
        num_layers: int = 1,
        max_epochs: int = 40,
        patience: int = 4,
        batch_size: int = 256,
        learning_rate: float = 1e-3,
        samples_per_epoch: int = 4096,
        max_train_points: int = 24 * 42,
        val_points: int | None = None,
        min_improvement: float = 0.02,
        n_networks: int = 3,
        device: str = "cpu",
        n_threads: int = 1,
        seed: int = 0,
        weighting: str = "equal",
        anchor: str = "auto",
    ) -> None:
        self.horizon = horizon
        self.freq = freq
        self.season_length = season_length
        self.calibration_origins = calibration_origins
        self.input_length = input_length
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.max_epochs = max_epochs
        self.patience = patience
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.samples_per_epoch = samples_per_epoch
        self.max_train_points = max_train_points
        self.val_points = val_points
        self.min_improvement = min_improvement
        self.n_networks = n_networks
        self.device = device
        self.n_threads = n_threads
        self.seed = seed
        self.anchor = anchor  # "median", "last" or "auto" (per series, the one that validates better)
        self.weighting = weighting  # as lgbm's: "equal" per series, or "scale" (the loss sums to WAPE's)

    def __setstate__(self, state: dict) -> None:
        # an artifact saved before n_networks holds one network, its weights alone
        if "n_networks" not in state:
            state = {**state, "n_networks": len(state["weights_"]) if isinstance(state.get("weights_"), list) else 1}
        # one saved before the anchor was a choice corrects the seasonal median
        state = {"anchor": "median", **state}
        super().__setstate__(state)

    def _seasons(self) -> tuple[int, ...]:
        return default_seasons(self.freq, self.season_length)

    def _context_length(self) -> int:
        return max(self.input_length, FeatureSpec(self._seasons()).window)

    def _min_length(self) -> int:
        return self.input_length + self.horizon + self._val_points()

    def min_points(self) -> int:
        """As every model's; but before a fit chose the validation stretch, the shortest series
        :meth:`fit` takes: one that leaves a horizon to validate on once halved for the
        calibration copy (fit then validates on a shorter stretch, and says so)."""
        full = super().min_points()
        if self.val_points is not None or getattr(self, "_short_val", None) is not None:
            return full
        return min(full, 2 * (self.input_length + 2 * self.horizon) - 1)

    def _val_points(self) -> int:
        short = getattr(self, "_short_val", None)  # set by fit for short series (see fit)
        if short is not None:
            return short
        return self.val_points if self.val_points is not None else max(self.horizon, 7 * self.season_length)

    def fit(self, history: pd.DataFrame) -> LSTMForecaster:
        """As every model's, but a series too short for the default validation stretch (a week
        of seasons) validates early stopping on a shorter one, said in a warning, instead of
        refusing: the calibration copy fits on about half of the shortest series, so the stretch
        is what that half leaves after one input window and one horizon (at least a horizon)."""
        self._short_val = None
        if self.val_points is None and "unique_id" in history and len(history):
            shortest = int(history.groupby("unique_id", sort=False).size().min())
            room = (shortest + 1) // 2 - self.input_length - self.horizon
            if self.horizon <= room < self._val_points():
                log.warning("lstm: the shortest series has %d points, too few to validate on %d; early stopping "
                            "validates on the last %d of each series instead", shortest, self._val_points(), room)
                self._short_val = room
        return super().fit(history)

    def _samples(self, ys: list[np.ndarray], starts: np.ndarray,
                 anchors: list[str]) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Train and validation arrays (seq, static, anchor, target, weight); validation
        targets are the last ``val_points`` of each series, train targets end before them.
        The weight is 1 (``weighting="equal"``: each series learnt alike in scaled units), or
        the window scale (``"scale"``: the scaled L1 loss then sums absolute errors in each
        series' own units, as WAPE does)."""
        h, ctx = self.horizon, self._context_length()
        if self.weighting not in ("equal", "scale"):
            raise ValueError(f"lstm: weighting must be 'equal' or 'scale', not {self.weighting!r}")
        train, val = [], []
        for y, start, anchor in zip(ys, starts, anchors):
            n = len(y)
            cut = n - self._val_points()
            # up to max_train_points of training targets, then the validation stretch
            origins = np.arange(max(self.input_length, n - self._val_points() - self.max_train_points), n - h + 1)
            for part, keep in ((train, origins + h <= cut), (val, origins + h > cut)):
                o = origins[keep]
                if o.size == 0:
                    continue
                seq, static, base, scale = lstm_inputs(windows_at(y, ctx, o), start + o - 1, h,
                                                       self.input_length, self._seasons(), anchor)
                target = np.lib.stride_tricks.sliding_window_view(y, h)[o] / scale[:, None]
                weight = scale if self.weighting == "scale" else np.ones_like(scale)
                part.append((seq, static, base, target.astype(np.float32), weight.astype(np.float32)))
        if not train or not val:
            short = int(np.argmin([len(y) for y in ys]))
            raise HistoryError(
                f"lstm: not enough history for a train/validation split; need more than "
                f"{self.input_length + self.horizon + self._val_points()} points per series "
                f"(the shortest has {len(ys[short])})"
            )
        train_a = [np.concatenate(a) for a in zip(*train)]
        val_a = [np.concatenate(a) for a in zip(*val)]
        norm = float(train_a[4].mean())
        train_a[4], val_a[4] = train_a[4] / norm, val_a[4] / norm
        return train_a, val_a

    def _pick_anchors(self, ys: list[np.ndarray], starts: np.ndarray) -> list[str]:
        """Each series' anchor: ``self.anchor``, or with ``"auto"`` the one that forecasts the
        series' own validation stretch (the origins whose targets are in it, as early stopping
        validates) with the lower mean absolute error; the median when there is no such origin
        or a tie. A regular series takes seasonal naive, a noisy one the median of its cycles
        (on M4 Hourly's training part: 49% seasonal naive, and the chosen anchors alone score
        OWA 0.555 on the held-out points, against 0.629 and 0.773 for either anchor alone)."""
        if self.anchor != "auto":
            return [self.anchor] * len(ys)
        h, ctx, out = self.horizon, self._context_length(), []
        for y, start in zip(ys, starts):
            n = len(y)
            o = np.arange(max(self.input_length, n - self._val_points() - h + 1), n - h + 1)
            if o.size == 0:
                out.append("median")
                continue
            win = windows_at(y, ctx, o)
            target = np.lib.stride_tricks.sliding_window_view(y, h)[o]
            err = {}
            for a in ANCHORS:
                _, _, base, scale = lstm_inputs(win, start + o - 1, h, self.input_length, self._seasons(), a)
                err[a] = float(np.nanmean(np.abs(base * scale[:, None] - target)))
            out.append("last" if err["last"] < err["median"] else "median")
        return out

    def _fit_points(self, frame: pd.DataFrame) -> None:
        if self.n_networks < 1:
            raise ValueError(f"lstm: n_networks must be >= 1, got {self.n_networks}")
        if self.anchor not in ANCHORS + ("auto",):
            raise ValueError(f"lstm: anchor must be one of {', '.join(ANCHORS)} or 'auto', not {self.anchor!r}")
        uids, ys, starts = series_arrays(frame)
        anchors = self._pick_anchors(ys, starts)
        self.anchors_ = dict(zip(map(str, uids), anchors))
        train, val = self._samples(ys, starts, anchors)
        # one network's accuracy swings with its seed (on the 100-VM Bitbrains panel, WAPE 0.92
        # to 1.17 over four seeds, the worst behind seasonal naive); the mean of a few is steadier
        fixed = getattr(self, "_fixed_epochs", None)
        nets = [self._train_network(train, val, self.seed + i, None if fixed is None else fixed[i])
                for i in range(self.n_networks)]
        self.weights_ = [state for state, _, _, _ in nets]
        self.n_static_ = int(train[1].shape[1])
        self.epochs_ = [epochs for _, epochs, _, _ in nets]
        self.best_epochs_ = [best for _, _, best, _ in nets]
        self.val_loss_ = [loss for _, _, _, loss in nets]

    def _calibration_copy(self) -> LSTMForecaster:
        """A copy whose networks train for the epochs the fitted ones kept (each seed its own;
        0 keeps the anchor), not early-stopped on their own: with two weeks less data a copy's
        validation rarely shows the improvement early stopping asks for, so it would keep the
        anchor while the fitted networks trained, and intervals measured around the anchor
        undercover a trained network's forecasts. The epochs were chosen on the fitted networks'
        validation week, which lies in the calibration stretch: one integer per network, not
        the copy's weights."""
        kept = getattr(self, "best_epochs_", None)
        copy = self.clone()
        if kept is not None:
            copy._fixed_epochs = list(kept)
        copy._short_val = getattr(self, "_short_val", None)  # validates on the stretch the fit did
        return copy

    def _train_network(self, train: list[np.ndarray], val: list[np.ndarray], seed: int,
                       fixed_epochs: int | None = None) -> tuple[dict[str, np.ndarray], int, int, float]:
        """One network trained from ``seed``: (its weights, epochs run, the epoch they are
        from, their validation L1). Early-stopped (the best epoch's weights, 0 for the
        untrained anchor), or with ``fixed_epochs`` trained exactly that many epochs."""
        import torch

        rng = np.random.default_rng(seed)
        with _torch_threads(self.n_threads):
            dev = torch.device(self.device)
            torch.manual_seed(seed)  # the only draws from torch's generator: the initial weights
            net = _network(train[1].shape[1], self.horizon, self.hidden_size, self.num_layers).to(dev)
            opt = torch.optim.Adam(net.parameters(), lr=self.learning_rate)
            tv = [torch.from_numpy(a).to(dev) for a in val]

            def val_loss() -> float:
                net.eval()
                with torch.no_grad():
                    return float(weighted_l1(net(*tv[:3]), tv[3], tv[4]))

            # the untrained network is the anchor itself: it is the first candidate
            best, bad, epochs, best_epoch = val_loss(), 0, 0, 0
            best_state = {k: v.detach().cpu().numpy().copy() for k, v in net.state_dict().items()}
            for epoch in range(self.max_epochs if fixed_epochs is None else fixed_epochs):
                epochs = epoch + 1
                net.train()
                # an epoch is samples_per_epoch draws however few windows there are (with
                # replacement then): a single series of a month has ~400, and epochs of two
                # batches would leave early stopping's patience too few steps to leave the anchor
                n = len(train[0])
                pick = rng.choice(n, size=self.samples_per_epoch, replace=n < self.samples_per_epoch)
                for b in range(0, len(pick), self.batch_size):
                    idx = pick[b:b + self.batch_size]
                    seq, static, base, target, weight = (torch.from_numpy(a[idx]).to(dev) for a in train)
                    opt.zero_grad()
                    loss = weighted_l1(net(seq, static, base), target, weight)
                    loss.backward()
                    opt.step()
                if fixed_epochs is not None:
                    continue
                vloss = val_loss()
                if vloss < best * (1 - self.min_improvement):
                    best, bad, best_epoch = vloss, 0, epochs
                    best_state = {k: v.detach().cpu().numpy().copy() for k, v in net.state_dict().items()}
                else:
                    bad += 1
                    if bad >= self.patience:
                        break
            if fixed_epochs is not None:
                best, best_epoch = val_loss(), epochs
                best_state = {k: v.detach().cpu().numpy().copy() for k, v in net.state_dict().items()}
        log.debug("lstm: seed %d ran %d epochs, kept epoch %d, validation L1 %.4f", seed, epochs, best_epoch, best)
        return best_state, epochs, best_epoch, float(best)

    def _predict_points(self, ctx: Context, h: int) -> np.ndarray:
        import torch

        anchors = getattr(self, "anchors_", {})  # an artifact from before the choice: the median
        use_last = np.array([anchors.get(str(u), "median") == "last" for u in ctx.uids], dtype=bool)
        seq, static, base, scale = lstm_inputs(ctx.values, ctx.end, self.horizon, self.input_length, self._seasons(),
                                                use_last)
        # an artifact of one network (before n_networks) holds its weights alone
        states = self.weights_ if isinstance(self.weights_, list) else [self.weights_]
        total = np.zeros((len(seq), self.horizon))
        with _torch_threads(self.n_threads), torch.no_grad():
            dev = torch.device(self.device)
            for state in states:
                net = _network(self.n_static_, self.horizon, self.hidden_size, self.num_layers)
                net.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
                net = net.to(dev).eval()
                total += np.vstack([
                    net(*(torch.from_numpy(a[b:b + 4096]).to(dev) for a in (seq, static, base))).cpu().numpy()
                    for b in range(0, len(seq), 4096)
                ])
        return total[:, :h] / len(states) * scale[:, None]
