"""Event-level scoring of fault alerts, and choosing the alert threshold.

An alert at time a on a device claims "this device fails in [a + lead, a + horizon]".
Alerts are deduplicated per device and window: a positive score re-alerts only once the
previous alert's horizon has run out. A failure is caught when an alert fired between
``horizon`` and ``lead`` before it; an alert is correct when such a failure follows.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import binomtest
from sklearn.metrics import roc_auc_score

METRIC_COLUMNS = [
    "events", "caught", "recall", "alerts", "precision", "median_lead_hours",
    "false_alarms_per_device_week", "auc",
]


def dedup_alerts(scored: pd.DataFrame, threshold: float, horizon: pd.Timedelta) -> pd.DataFrame:
    """``device_id, ts`` of alerts from scored rows (``device_id, ts, score``)."""
    pos = scored.loc[scored["score"] >= threshold, ["device_id", "ts"]]
    devs, times = [], []
    step = horizon.value
    for dev, t in pos.groupby("device_id", sort=True)["ts"]:
        ns = np.sort(t.to_numpy(dtype="datetime64[ns]").astype(np.int64))
        last = None
        for v in ns.tolist():
            if last is None or v - last >= step:
                devs.append(dev)
                times.append(v)
                last = v
    return pd.DataFrame({"device_id": devs, "ts": pd.to_datetime(np.asarray(times, dtype=np.int64))})


def failure_events(failures: pd.DataFrame) -> pd.DataFrame:
    """Distinct (device_id, ts) failure events (several failed parts at once are one event)."""
    return (
        failures.assign(device_id=failures["device_id"].astype(str))[["device_id", "ts"]]
        .drop_duplicates().sort_values(["device_id", "ts"]).reset_index(drop=True)
    )


def score_alerts(
    alerts: pd.DataFrame,
    failures: pd.DataFrame,
    lead: pd.Timedelta,
    horizon: pd.Timedelta,
    period: tuple[pd.Timestamp, pd.Timestamp],
    devices: list[str],
) -> dict[str, float]:
    """Recall, precision, lead and false-alarm rate of ``alerts`` over ``period``.

    Failures count when their whole alert window ``[f - horizon, f - lead]`` could be
    scored, i.e. ``f - lead`` falls inside ``period``, on one of ``devices``.

    An alert that no known failure confirms, and whose window ``[a + lead, a + horizon]``
    runs past the end of what is known (the later of ``period``'s end and the last failure
    in ``failures``: a log that goes on past the telemetry is known that far), cannot be
    judged: the device may fail after the data stop. Such alerts are ``censored_alerts``,
    left out of ``alerts``, precision and the false-alarm rate, rather than counted false.
    """
    start, end = period
    ev = failure_events(failures)
    ev = ev[ev["device_id"].isin(devices) & (ev["ts"] - lead >= start) & (ev["ts"] - lead <= end)]
    al = alerts[alerts["device_id"].astype(str).isin(devices)]
    by_dev = {d: np.sort(g["ts"].to_numpy(dtype="datetime64[ns]")) for d, g in al.groupby("device_id")}
    all_fail = failure_events(failures)
    fail_by_dev = {d: g["ts"].to_numpy(dtype="datetime64[ns]") for d, g in all_fail.groupby("device_id")}
    caught, leads = 0, []
    for dev, f in zip(ev["device_id"], ev["ts"].to_numpy(dtype="datetime64[ns]")):
        a = by_dev.get(dev, np.array([], dtype="datetime64[ns]"))
        hit = a[(a >= f - np.timedelta64(horizon)) & (a <= f - np.timedelta64(lead))]
        if hit.size:
            caught += 1
            leads.append((f - hit[0]) / np.timedelta64(1, "h"))
    # in numpy's naive UTC, as the alert and failure times above (a tz-aware end would warn)
    known_until = pd.Series([end]).to_numpy(dtype="datetime64[ns]")[0]
    if len(all_fail):
        known_until = max(known_until, all_fail["ts"].to_numpy(dtype="datetime64[ns]").max())
    correct = censored = 0
    for dev, a in by_dev.items():
        f = fail_by_dev.get(dev, np.array([], dtype="datetime64[ns]"))
        for t in a:
            if ((f >= t + np.timedelta64(lead)) & (f <= t + np.timedelta64(horizon))).any():
                correct += 1
            elif t + np.timedelta64(horizon) > known_until:
                censored += 1
    n_alerts = int(sum(len(a) for a in by_dev.values())) - censored
    weeks = (end - start) / pd.Timedelta(days=7) * max(len(devices), 1)
    return _alert_metrics(int(len(ev)), caught, leads, n_alerts, correct, censored, weeks)


def _alert_metrics(events: int, caught: int, leads: list[float] | np.ndarray, alerts: int, correct: int,
                   censored: int, device_weeks: float) -> dict[str, float]:
    """:func:`score_alerts`' row from its counts."""
    return {
        "events": events,
        "caught": caught,
        "recall": caught / events if events else float("nan"),
        "alerts": alerts,
        "precision": correct / alerts if alerts else float("nan"),
        "median_lead_hours": float(np.median(leads)) if len(leads) else float("nan"),
        "false_alarms_per_device_week": (alerts - correct) / device_weeks if device_weeks else float("nan"),
        "censored_alerts": censored,
    }


def _first_at_or_after(qdev: np.ndarray, qt: np.ndarray, tdev: np.ndarray, tt: np.ndarray) -> np.ndarray:
    """For each query (device code, time): the index of the first target of its device at or
    after its time (targets sorted by device, then time), ``len(tt)`` where there is none. A
    searchsorted per device, done as one sort: at equal device and time a query sorts first."""
    n = len(tt)
    order = np.lexsort((np.r_[np.ones(n, np.int8), np.zeros(len(qt), np.int8)],
                        np.r_[tt, qt], np.r_[tdev, qdev]))
    before = np.cumsum(order < n) - (order < n)  # targets sorted ahead of each position
    idx = np.empty(len(qt), dtype=np.int64)
    idx[order[order >= n] - n] = before[order >= n]
    inside = idx < n
    inside[inside] = tdev[idx[inside]] == qdev[inside]
    return np.where(inside, idx, n)


class AlertJudge:
    """``score_alerts(dedup_alerts(scored, thr, horizon), failures, lead, horizon, period,
    devices)`` for many thresholds ``thr``: the rows are sorted and indexed once, and each
    threshold costs a few passes of numpy (choosing a threshold judges hundreds)."""

    def __init__(self, scored: pd.DataFrame, failures: pd.DataFrame, lead: pd.Timedelta, horizon: pd.Timedelta,
                 period: tuple[pd.Timestamp, pd.Timestamp], devices: list[str]) -> None:
        names = scored["device_id"].astype(str).to_numpy(dtype=object)
        ev_all = failure_events(failures)
        start, end = period
        ev = ev_all[ev_all["device_id"].isin(devices) & (ev_all["ts"] - lead >= start) & (ev_all["ts"] - lead <= end)]
        vocab = np.unique(np.concatenate([names, ev_all["device_id"].to_numpy(dtype=object)]).astype(str))

        def code(names: object) -> np.ndarray:  # a device's index in ``vocab``
            return np.searchsorted(vocab, np.asarray(names, dtype=object).astype(str))

        d, t = code(names), _ns(scored["ts"])
        order = np.lexsort((t, d))
        self.d, self.t = d[order], t[order]
        self.score = scored["score"].to_numpy(dtype=float)[order]
        self.listed = np.isin(vocab, np.asarray(devices, dtype=object).astype(str))
        n = len(self.t)
        # a row's device's end, and the first row of its device a horizon or more later
        first = np.flatnonzero(np.r_[True, self.d[1:] != self.d[:-1]][:n])
        self.firsts, self.dev_end = first, np.repeat(np.r_[first[1:], n], np.diff(np.r_[first, n])).astype(np.int64)
        self.after = np.maximum(_first_at_or_after(self.d, self.t + horizon.value, self.d, self.t), np.arange(n) + 1)
        self.ev_d, self.ev_t = code(ev["device_id"]), _ns(ev["ts"])
        self.fail_d, self.fail_t = code(ev_all["device_id"]), _ns(ev_all["ts"])
        known = pd.Series([end]).to_numpy(dtype="datetime64[ns]")[0].astype(np.int64)
        self.known_until = max(known, int(self.fail_t.max())) if len(self.fail_t) else known
        self.lead, self.horizon = lead.value, horizon.value
        self.weeks = (end - start) / pd.Timedelta(days=7) * max(len(devices), 1)

    def alert_rows(self, threshold: float) -> np.ndarray:
        """Indices (into the sorted rows) of the alerts :func:`dedup_alerts` raises."""
        n = len(self.t)
        # the first row at or after each index whose score reaches the threshold (n: none)
        at = np.where(self.score >= threshold, np.arange(n), n)
        next_hit = np.r_[np.minimum.accumulate(at[::-1])[::-1], n]
        front = next_hit[self.firsts]
        front = front[front < self.dev_end[self.firsts]]
        found = []
        while front.size:  # each device's next alert: its first hit a horizon after the last
            found.append(front)
            nxt = next_hit[self.after[front]]
            front = nxt[nxt < self.dev_end[front]]
        return np.sort(np.concatenate(found)) if found else np.array([], dtype=np.int64)

    def __call__(self, threshold: float) -> dict[str, float]:
        rows = self.alert_rows(threshold)
        rows = rows[self.listed[self.d[rows]]]
        al_d, al_t = self.d[rows], self.t[rows]
        j = _first_at_or_after(self.ev_d, self.ev_t - self.horizon, al_d, al_t)
        hit = j < len(al_t)
        hit[hit] = al_t[j[hit]] <= self.ev_t[hit] - self.lead
        leads = (self.ev_t[hit] - al_t[j[hit]]) / 3.6e12
        k = _first_at_or_after(al_d, al_t + self.lead, self.fail_d, self.fail_t)
        correct = k < len(self.fail_t)
        correct[correct] = self.fail_t[k[correct]] <= al_t[correct] + self.horizon
        censored = int((~correct & (al_t + self.horizon > self.known_until)).sum())
        return _alert_metrics(len(self.ev_t), int(hit.sum()), leads, len(al_t) - censored, int(correct.sum()),
                              censored, self.weeks)


def _ns(ts: pd.Series) -> np.ndarray:
    """Times as int64 nanoseconds of naive UTC (as ``to_numpy(dtype="datetime64[ns]")`` gives)."""
    return pd.Series(ts).to_numpy(dtype="datetime64[ns]").astype(np.int64)


def point_auc(y: np.ndarray, score: np.ndarray) -> float:
    """ROC AUC of the row scores, NaN when only one class is present."""
    return float(roc_auc_score(y, score)) if 0 < int(np.sum(y)) < len(y) else float("nan")


MAX_EVENT_CANDIDATES = 200
# "never alert": above any probability, so the final model (trained on more failures than
# the fold models, so scoring higher) stays quiet too
NEVER = float(np.nextafter(1.0, 2.0))
# which rule set the threshold: the target precision was reached; it was not, and the threshold
# of the best event F1 is used (its alerts go out as warnings, not critical); the cost ratio;
# "none": nothing catches a failure on these scores (best F1 is 0), so never alert; "no_skill":
# thresholds catch failures, but none is more precise than an alert at a random row, so never
# alert; "default": no out-of-fold score to set it on, the classifier's own 0.5
THRESHOLD_RULES = ("target_precision", "max_f1_fallback", "cost_ratio", "none", "no_skill", "default")


@dataclass(frozen=True)
class ThresholdChoice:
    """An alert threshold, the rule that set it, and its alert metrics on the scores it was
    chosen on (``key``: how the choice ranks, comparable across models on the same rows)."""

    threshold: float
    rule: str
    precision: float
    recall: float
    f1: float
    alerts: int
    key: tuple[float, ...]


def _window_scores(scored: pd.DataFrame, ev: pd.DataFrame, lead: pd.Timedelta,
                   horizon: pd.Timedelta) -> list[np.ndarray]:
    """For each failure event of ``ev``: the finite scores of its device in its alert window
    ``[f - horizon, f - lead]``."""
    rows = {d: (g["ts"].to_numpy(dtype="datetime64[ns]"), g["score"].to_numpy(dtype=float))
            for d, g in scored.assign(device_id=scored["device_id"].astype(str)).groupby("device_id")}
    empty = (np.array([], dtype="datetime64[ns]"), np.array([]))
    out = []
    for dev, f in zip(ev["device_id"], ev["ts"].to_numpy(dtype="datetime64[ns]")):
        ts, sc = rows.get(dev, empty)
        inside = (ts >= f - np.timedelta64(horizon)) & (ts <= f - np.timedelta64(lead)) & np.isfinite(sc)
        out.append(sc[inside])
    return out


def scorable_failures(scored: pd.DataFrame, failures: pd.DataFrame, lead: pd.Timedelta,
                      horizon: pd.Timedelta) -> pd.DataFrame:
    """The failure events (``device_id, ts``) whose alert window ``[f - horizon, f - lead]``
    holds a finite score of their device: the ones some threshold could catch."""
    ev = failure_events(failures)
    keep = np.array([w.size > 0 for w in _window_scores(scored, ev, lead, horizon)], dtype=bool)
    return ev[keep].reset_index(drop=True)


def window_maxima(
    scored: pd.DataFrame,
    failures: pd.DataFrame,
    lead: pd.Timedelta,
    horizon: pd.Timedelta,
    period: tuple[pd.Timestamp, pd.Timestamp],
    devices: list[str],
) -> np.ndarray:
    """For each failure scored over ``period``: the highest score in its alert window
    ``[f - horizon, f - lead]`` (the largest threshold that still catches it)."""
    ev = failure_events(failures)
    start, end = period
    ev = ev[ev["device_id"].isin(devices) & (ev["ts"] - lead >= start) & (ev["ts"] - lead <= end)]
    return np.asarray([float(w.max()) for w in _window_scores(scored, ev, lead, horizon) if w.size], dtype=float)


def chance_precision(scored: pd.DataFrame, failures: pd.DataFrame, lead: pd.Timedelta,
                     horizon: pd.Timedelta) -> float:
    """The precision of an alert raised at a random scored row: the share of rows whose device
    fails in ``[ts + lead, ts + horizon]``. Rows that no failure confirms and whose window runs
    past what is known are left out, as :func:`score_alerts` leaves out censored alerts."""
    ev = failure_events(failures)
    fail_by_dev = {d: np.sort(g["ts"].to_numpy(dtype="datetime64[ns]")) for d, g in ev.groupby("device_id")}
    known_until = pd.Series([scored["ts"].max()]).to_numpy(dtype="datetime64[ns]")[0]
    if len(ev):
        known_until = max(known_until, ev["ts"].to_numpy(dtype="datetime64[ns]").max())
    right = judged = 0
    for dev, t in scored.assign(device_id=scored["device_id"].astype(str)).groupby("device_id")["ts"]:
        ts = t.to_numpy(dtype="datetime64[ns]")
        f = fail_by_dev.get(dev, np.array([], dtype="datetime64[ns]"))
        hit = (np.searchsorted(f, ts + np.timedelta64(horizon), "right")
               - np.searchsorted(f, ts + np.timedelta64(lead), "left")) > 0
        known = hit | (ts + np.timedelta64(horizon) <= known_until)
        right += int(hit.sum())
        judged += int(known.sum())
    return right / judged if judged else float("nan")


SKILL_LEVEL = 0.05  # a one-sided binomial test at the usual 5%


def beats_chance(precision: float, alerts: int, chance: float) -> bool:
    """Whether ``alerts`` alerts right at ``precision`` are more often right than alerts at
    random rows (right at ``chance``) would be by luck: a one-sided binomial test at
    :data:`SKILL_LEVEL`."""
    if not alerts or not np.isfinite(chance) or precision <= chance:
        return False
    right = int(round(precision * alerts))
    return bool(binomtest(right, alerts, chance, alternative="greater").pvalue < SKILL_LEVEL)


def _f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def choose_threshold(
    scored: pd.DataFrame,
    failures: pd.DataFrame,
    lead: pd.Timedelta,
    horizon: pd.Timedelta,
    target_precision: float | None,
    cost_ratio: float | None,
) -> float:
    """The alert threshold of :func:`threshold_choice`."""
    return threshold_choice(scored, failures, lead, horizon, target_precision, cost_ratio).threshold


def threshold_choice(
    scored: pd.DataFrame,
    failures: pd.DataFrame,
    lead: pd.Timedelta,
    horizon: pd.Timedelta,
    target_precision: float | None,
    cost_ratio: float | None,
) -> ThresholdChoice:
    """The alert threshold on out-of-fold scores, and the rule that set it.

    With ``target_precision``: the threshold with the most recall among those whose event
    precision reaches the target (rule ``target_precision``); if none does, the one with the
    best event F1 (``max_f1_fallback``: still alerts, which the caller flags, at severity
    warning) among the thresholds whose alerts beat alerts at random rows
    (:func:`beats_chance`). When the best F1 is 0 (nothing caught) the rule is ``none``,
    and when no threshold that catches a failure beats chance it is ``no_skill``: never alert
    (on a small fleet where failures are common, alerting on every device can have the best
    F1, and would warn on all of them). With ``cost_ratio``: the least
    ``cost_ratio * missed + false alerts``.

    Many thresholds score the same on these folds; of them, the one returned sits midway
    between the highest one (the weakest failure caught) and the next candidate below them
    all, which scores worse (a false alert too many): the widest margin on both sides, as
    the final model, trained on more, moves the scores a little. If that midpoint scores
    worse itself, the lowest of the tied thresholds is returned. A choice that raises no
    alert on these scores is ``NEVER``, above any probability.
    """
    period = (scored["ts"].min(), scored["ts"].max())
    devices = sorted(scored["device_id"].astype(str).unique())
    # Failures are rare, so the useful thresholds sit in the top percent of scores:
    # space the candidate quantiles geometrically towards the very top ...
    tail = np.geomspace(0.5, max(1.0 / len(scored), 1e-6), 80)
    top = float(scored["score"].max())
    # ... plus each failure's best score in its alert window, where recall changes (a
    # quantile grid alone can step over the threshold that catches one more failure),
    # plus "never alert", which a high cost of false alerts can make the best choice
    catch = window_maxima(scored, failures, lead, horizon, period, devices)
    if len(catch) > MAX_EVENT_CANDIDATES:
        catch = np.quantile(catch, np.linspace(0.0, 1.0, MAX_EVENT_CANDIDATES))
    candidates = np.unique(np.concatenate([
        np.quantile(scored["score"], 1.0 - tail), catch, [np.nextafter(top, np.inf)],
    ]))
    seen: dict[float, tuple[tuple[float, ...], dict[str, float]]] = {}
    chance = chance_precision(scored, failures, lead, horizon) if cost_ratio is None else float("nan")

    alerts_at = AlertJudge(scored, failures, lead, horizon, period, devices)

    def judge(thr: float) -> tuple[tuple[float, ...], dict[str, float]]:
        if thr not in seen:
            m = alerts_at(thr)
            recall = 0.0 if np.isnan(m["recall"]) else m["recall"]
            precision = 0.0 if np.isnan(m["precision"]) else m["precision"]
            m = {"precision": precision, "recall": recall, "f1": _f1(precision, recall), "alerts": m["alerts"],
                 "events": m["events"], "caught": m["caught"]}
            if cost_ratio is not None:
                missed = m["events"] - m["caught"]
                key: tuple[float, ...] = (-(cost_ratio * missed + (m["alerts"] * (1 - precision))),)
            else:
                assert target_precision is not None
                # reaching the target ranks first (by recall); short of it, the best F1 (then
                # recall) of the thresholds that beat chance
                key = ((1.0, recall) if precision >= target_precision
                       else (0.0, m["f1"], recall) if beats_chance(precision, m["alerts"], chance)
                       else (0.0, 0.0, 0.0))
            seen[thr] = (key, m)
        return seen[thr]

    keys = [judge(float(thr))[0] for thr in candidates]
    best_key = max(keys)
    tied = [float(t) for t, k in zip(candidates, keys) if k == best_key]
    below = candidates[candidates < tied[0]]
    if not below.size:  # the lowest candidate is among the best: nothing below to keep a margin from
        chosen = float(np.sqrt(tied[0] * tied[-1])) if tied[0] > 0 else float((tied[0] + tied[-1]) / 2)
    else:
        mid = float((below.max() + tied[-1]) / 2)
        chosen = mid if judge(mid)[0] == best_key else tied[0]
    m = judge(chosen)[1]
    if cost_ratio is not None:
        rule = "cost_ratio"
    elif best_key[0] == 1.0:
        rule = "target_precision"
    elif best_key[1] > 0:
        rule = "max_f1_fallback"
    else:
        rule = "no_skill" if any(m["caught"] for _, m in seen.values()) else "none"
    if rule in ("none", "no_skill") or not (scored["score"] >= chosen).any():
        chosen = NEVER
        m = {"precision": float("nan"), "recall": 0.0, "f1": 0.0, "alerts": 0}
    return ThresholdChoice(chosen, rule, float(m["precision"]), float(m["recall"]), float(m["f1"]),
                           int(m["alerts"]), tuple(float(k) for k in best_key))
