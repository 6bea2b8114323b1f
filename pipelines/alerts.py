"""Alert storage and delivery: the ``alerts`` table, per-sink ``alert_deliveries``, sinks.

* :func:`sync_alerts` records one detector kind's current alerts: new fingerprints fire,
  firing alerts of that kind that are no longer current resolve. Every transition
  queues one ``pending`` delivery per sink (key fingerprint, sink, status).
* :func:`deliver_pending` sends each sink its pending deliveries in one batch and marks
  them ``delivered`` only when the sink accepted them. A failing sink keeps them pending
  for the next run; a delivered row is never sent again. (Should the process die between
  a sink's acceptance and that mark, the batch is sent once more: at-least-once.)

Deliveries go out in the order things happened: an alert's firing, its escalations,
its resolution. Every record carries ``sent_at``, the run's time. An alert's severity only
rises while it fires: a rise is delivered once per step (status ``escalated`` with
``previous_severity``), and a fall keeps the higher one. Alertmanager identifies an alert
by its labels, severity among them, so there an escalation resolves the old label set and
fires the new one, and the resolution carries the labels last fired. A changed probability
shows in Alertmanager's re-sent annotations.

Sinks: a JSONL file, a generic JSON webhook and Prometheus Alertmanager's
``POST /api/v2/alerts``. Alertmanager expects its clients to re-send alerts that are
still active (Prometheus does every minute) and ends one at its ``endsAt``: so every run
re-posts the firing alerts it already delivered there, outside the once-only bookkeeping,
with ``endsAt`` = the later of the run's time plus ``hold`` (1 hour: four runs of the
15-minute schedule) and the end of a predicted window. An alert stays active while
``detect`` keeps running and expires on its own an hour after it stops; the resolution
is sent with the time the condition cleared. Alertmanager deduplicates re-posts, so
receivers are notified once.
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

import duckdb
import httpx
import pandas as pd

from anomaly.alert import SEVERITIES, Alert
from pipelines.warehouse import query, transaction, upsert

log = logging.getLogger(__name__)

SEVERITY_RANK = {sev: i for i, sev in enumerate(SEVERITIES)}  # info < warning < critical


class Sink(Protocol):
    """Somewhere alerts go. ``send`` raises on any failure; the batch then stays pending.
    A sink with ``resends_firing = True`` also gets the still-firing alerts it was already
    sent, on every run (Alertmanager's protocol)."""

    name: str

    def send(self, alerts: list[dict[str, object]]) -> None: ...


def _iso(value: object) -> str | None:
    if value is None or pd.isna(value):
        return None
    return pd.Timestamp(value).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class JsonlSink:
    """Appends one JSON object per alert transition to a file."""

    path: Path
    name: str = "jsonl"

    def send(self, alerts: list[dict[str, object]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            for a in alerts:
                fh.write(json.dumps(a, default=str, sort_keys=True) + "\n")


def redact(url: str) -> str:
    """``scheme://host[:port]/...``: a URL fit for logs, errors and the warehouse (its
    credentials, path and query may be secret: a Slack hook's path is its key)."""
    try:
        parts = urlsplit(url)
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        parts, port = None, ""
    if parts is None or not parts.scheme or not parts.hostname:  # no scheme: "host/path" reads as a path
        rest = url.split("://", 1)[-1]
        host = re.split(r"[/?#]", rest, maxsplit=1)[0].rsplit("@", 1)[-1]
        return f"{url.split('://', 1)[0] + '://' if '://' in url else ''}{host}/..."
    return f"{parts.scheme}://{parts.hostname}{port}/..."


def _post(url: str, body: object, timeout_s: float, retries: int, backoff_s: float) -> None:
    """POST JSON, retrying transport errors and 5xx/429; raise after the last attempt.
    The error names the URL redacted, never whole."""
    last: str = ""
    shown = redact(url)
    for attempt in range(retries + 1):
        try:
            resp = httpx.post(url, json=body, timeout=timeout_s)
            if resp.status_code < 300:
                return
            last = f"HTTP {resp.status_code}: {resp.text[:200]}"
            if resp.status_code < 500 and resp.status_code != 429:
                break  # a client error will not fix itself by retrying
        except httpx.HTTPError as exc:
            last = f"{type(exc).__name__}: {exc}"
        if attempt < retries:
            time.sleep(backoff_s * 2**attempt)
    raise RuntimeError(f"delivery to {shown} failed: {last.replace(url, shown)}")


@dataclass(frozen=True)
class WebhookSink:
    """A generic JSON webhook: ``{"source": "headroom", "alerts": [...]}``."""

    url: str
    timeout_s: float = 5.0
    retries: int = 2
    backoff_s: float = 0.2
    name: str = "webhook"

    def send(self, alerts: list[dict[str, object]]) -> None:
        _post(self.url, {"source": "headroom", "alerts": alerts}, self.timeout_s, self.retries, self.backoff_s)


@dataclass(frozen=True)
class AlertmanagerSink:
    """Prometheus Alertmanager API v2: ``POST {base}/api/v2/alerts`` with postable alerts."""

    base_url: str
    generator_url: str = "headroom://detect"
    timeout_s: float = 5.0
    retries: int = 2
    backoff_s: float = 0.2
    hold: pd.Timedelta = pd.Timedelta(hours=1)  # a firing alert's endsAt: at least sent_at + hold
    name: str = "alertmanager"
    resends_firing: bool = True

    def send(self, alerts: list[dict[str, object]]) -> None:
        body = []
        for a in alerts:
            if a["status"] == "escalated":  # the old label set ends now, the new one fires
                body.append(self.postable({**a, "status": "resolved", "severity": a["previous_severity"],
                                           "ends_at": a["sent_at"]}))
                body.append(self.postable({**a, "status": "firing"}))
            else:
                body.append(self.postable(a))
        _post(self.base_url.rstrip("/") + "/api/v2/alerts", body, self.timeout_s, self.retries, self.backoff_s)

    def postable(self, a: dict[str, object]) -> dict[str, object]:
        """One alert in Alertmanager's postableAlert shape (labels and annotations are strings)."""
        labels = {str(k): str(v) for k, v in dict(a.get("labels") or {}).items()}  # type: ignore[arg-type]
        labels.update({
            "alertname": f"headroom_{a['kind']}", "kind": str(a["kind"]), "entity": str(a["entity"]),
            "severity": str(a["severity"]), "fingerprint": str(a["fingerprint"]),
        })
        annotations = {"summary": str(a.get("summary") or ""), "runbook": str(a.get("runbook") or "")}
        if a.get("probability") is not None:
            annotations["probability"] = f"{float(a['probability']):.3f}"  # type: ignore[arg-type]
        body: dict[str, object] = {
            "labels": labels, "annotations": annotations, "startsAt": _iso(a["starts_at"]),
            "generatorURL": self.generator_url,
        }
        if a["status"] == "resolved":
            ends = a["ends_at"]
        else:  # active until the next runs re-send it, and at least to the end of a predicted window
            held = [pd.Timestamp(a["sent_at"]) + self.hold] if a.get("sent_at") else []  # type: ignore[arg-type]
            window = [pd.Timestamp(a["window_end"])] if a.get("window_end") else []  # type: ignore[arg-type]
            ends = max(held + window) if held or window else None
        if ends is not None:
            # Alertmanager refuses (400) an alert that ends before it starts, and with it the batch
            ends = max(pd.Timestamp(ends), pd.Timestamp(a["starts_at"])) if a.get("starts_at") else ends
            body["endsAt"] = _iso(ends)
        return body


def sinks_from_settings(jsonl: Path | None, webhook: str | None, alertmanager: str | None) -> list[Sink]:
    """The configured sinks, in a fixed order. A setting that can never work (a URL that is
    not http(s), a JSONL path that is a folder) raises ValueError instead of leaving every
    alert pending run after run.

    Each sink is named for its target (``jsonl:<path>``, ``webhook:<host>#<hash of the URL>``,
    ``alertmanager:<host>#<hash>``: a URL's path or credentials may be secret), so a new file
    or receiver hears the alerts already firing once, and what one target was sent says
    nothing of another."""
    for what, url in (("webhook", webhook), ("alertmanager", alertmanager)):
        if url:
            check_url(what, url)
    if jsonl and Path(jsonl).is_dir():
        raise ValueError(f"alert JSONL path {jsonl} is a folder; name a file")
    sinks: list[Sink] = []
    if jsonl:
        sinks.append(JsonlSink(Path(jsonl), name=f"jsonl:{Path(jsonl).resolve()}"))
    if webhook:
        sinks.append(WebhookSink(webhook, name=url_sink_name("webhook", webhook)))
    if alertmanager:
        sinks.append(AlertmanagerSink(alertmanager, name=url_sink_name("alertmanager", alertmanager.rstrip("/"))))
    return sinks


def check_url(what: str, url: str) -> None:
    """ValueError, naming the setting and the URL redacted, for a URL no POST can reach."""
    if not url.lower().startswith(("http://", "https://")):
        raise ValueError(f"{what} URL {redact(url)} must start with http:// or https://")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as exc:
        raise ValueError(f"{what} URL {redact(url)} is not a valid URL ({exc})") from None
    if not parts.hostname:
        raise ValueError(f"{what} URL {redact(url)} names no host")


def url_sink_name(kind: str, url: str) -> str:
    """``<kind>:<host[:port]>#<8 hex of sha256(url)>``: one name per URL, with no path,
    query or credentials in it (a Slack hook's path is its secret)."""
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{kind}:{parts.hostname or '?'}{port}#{hashlib.sha256(url.encode()).hexdigest()[:8]}"


def catch_up_sinks(con: duckdb.DuckDBPyConnection, names: Sequence[str], now: datetime) -> int:
    """Queue the firing of every alert still firing for each sink that has no delivery of it
    yet: a receiver added later hears what is firing (before any resolution of it), whichever
    detectors the run has. Returns the deliveries queued."""
    if not names:
        return 0
    missing = query(con, """
        SELECT a.fingerprint, s.sink FROM alerts a CROSS JOIN (SELECT unnest(?) AS sink) s
        WHERE a.status = 'firing' AND NOT EXISTS (
            SELECT 1 FROM alert_deliveries d WHERE d.fingerprint = a.fingerprint AND d.sink = s.sink
              AND d.status = 'firing')
    """, [list(names)])
    if missing.empty:
        return 0
    q = missing.assign(status="firing", state="pending", attempts=0, last_error=None, updated_at=now)
    upsert(con, "alert_deliveries", q[["fingerprint", "sink", "status", "state", "attempts", "last_error",
                                       "updated_at"]])
    return len(q)


def adopt_kind_named(con: duckdb.DuckDBPyConnection, names: Sequence[str]) -> int:
    """Deliveries recorded when sinks were named for their kind (``jsonl``, ``webhook``,
    ``alertmanager``) become those of the configured sink of that kind, so after the upgrade
    it neither sends a delivered alert again nor forgets a pending one. Returns rows moved."""
    moved = 0
    with transaction(con):
        for name in names:
            kind = name.split(":", 1)[0]
            if kind == name:
                continue
            n = con.execute("SELECT count(*) FROM alert_deliveries WHERE sink = ?", [kind]).fetchone()[0]
            if not n:
                continue
            # rows the target already has win; the rest move (insert, then delete: the key changes)
            con.execute("""
                INSERT INTO alert_deliveries (fingerprint, sink, status, state, attempts, last_error, updated_at)
                SELECT o.fingerprint, ?, o.status, o.state, o.attempts, o.last_error, o.updated_at
                FROM alert_deliveries o
                WHERE o.sink = ? AND NOT EXISTS (
                    SELECT 1 FROM alert_deliveries t
                    WHERE t.sink = ? AND t.fingerprint = o.fingerprint AND t.status = o.status)
            """, [name, kind, name])
            con.execute("DELETE FROM alert_deliveries WHERE sink = ?", [kind])
            moved += int(n)
    if moved:
        log.info("%d alert deliveries recorded under a sink kind adopted by its target", moved)
    return moved


def _row(alert: Alert, status: str, starts_at: datetime, ends_at: datetime | None, now: datetime) -> dict[str, object]:
    rec = alert.to_record()
    rec["labels"] = json.dumps(rec["labels"], sort_keys=True)
    rec.update(status=status, starts_at=starts_at, ends_at=ends_at, updated_at=now)
    return rec


def sync_alerts(
    con: duckdb.DuckDBPyConnection,
    kind: str,
    current: Sequence[Alert],
    now: datetime,
    sink_names: Iterable[str],
    ended: Sequence[Alert] = (),
) -> dict[str, int]:
    """Record ``kind``'s alerts as of ``now``; return counts fired / updated / resolved.

    ``current``: conditions that hold now. ``ended``: conditions found and already over
    (a burst that came and went between runs): they fire and resolve in the same run.
    Firing alerts of ``kind`` in neither list resolve.
    """
    if any(a.kind != kind for a in [*current, *ended]):
        raise ValueError(f"sync_alerts({kind!r}) got alerts of another kind")
    names = list(sink_names)
    existing = query(con, "SELECT fingerprint, status, starts_at, severity, probability, summary FROM alerts "
                          "WHERE kind = ?", [kind])
    known = {r.fingerprint: r for r in existing.itertuples(index=False)}
    keys = query(con, "SELECT d.fingerprint, d.sink, d.status FROM alert_deliveries d "
                      "JOIN alerts a USING (fingerprint) WHERE a.kind = ?", [kind])
    delivered_keys = set(keys.itertuples(index=False, name=None))
    # a sink that heard an alert fire hears what follows of it (escalation, resolution) even
    # when it is not configured in this run: kept pending for it, sent if it comes back
    heard: dict[str, set[str]] = {}
    for fp, sink, status in delivered_keys:
        if status == "firing":
            heard.setdefault(fp, set()).add(sink)

    def told(fp: str) -> list[str]:
        return [*names, *sorted(heard.get(fp, set()) - set(names))]

    rows, queue, refired = [], [], []
    fired = updated = resolved = 0
    current_fps = {a.fingerprint for a in current}
    for alert in [*current, *(a for a in ended if a.fingerprint not in current_fps)]:
        fp = alert.fingerprint
        is_ended = fp not in current_fps
        old = known.get(fp)
        if old is not None and old.status == "firing":
            starts = old.starts_at
            updated += 1
            # a sink configured after the alert fired still has to hear about it
            queue += [(fp, s, "firing") for s in names if (fp, s, "firing") not in delivered_keys]
        elif old is not None and is_ended:
            continue  # already fired and resolved: nothing new to say
        else:
            starts = now
            fired += 1
            queue += [(fp, s, "firing") for s in names]
            if old is not None:  # it resolved and fires again: what was not yet said of that is moot
                refired.append(fp)
        if is_ended:
            # never before it started (a replay whose clock is behind the run that fired it)
            rows.append(_row(alert, "resolved", starts, max(now, pd.Timestamp(starts)), now))
            queue += [(fp, s, "resolved") for s in told(fp)]
            resolved += 1
        else:
            rows.append(_row(alert, "firing", starts, None, now))
        if old is not None and old.status == "firing":
            # the labels it fired with, until it resolves, unless it escalates: then every
            # sink hears it once per step up (Alertmanager: the old labels resolve, new ones fire).
            # The severity kept keeps the probability and summary that came with it: an
            # escalation sent later must not say "critical" with a lower, later probability
            if not is_ended and SEVERITY_RANK[alert.severity] > SEVERITY_RANK.get(old.severity, 0):
                queue += [(fp, s, f"escalated:{old.severity}>{alert.severity}") for s in told(fp)]
            elif is_ended or SEVERITY_RANK[alert.severity] < SEVERITY_RANK.get(old.severity, 0):
                # (an ended one resolves with the labels it fired with, whatever it ended at)
                rows[-1].update(severity=old.severity, probability=old.probability, summary=old.summary)
    touched = {r["fingerprint"] for r in rows}
    stale = [fp for fp, r in known.items() if r.status == "firing" and fp not in touched]
    with transaction(con):
        if refired:
            con.execute("DELETE FROM alert_deliveries WHERE state = 'pending' AND status <> 'firing' "
                        "AND fingerprint IN (SELECT unnest(?))", [refired])
        upsert(con, "alerts", pd.DataFrame(rows))
        if stale:
            con.execute(
                "UPDATE alerts SET status = 'resolved', ends_at = greatest(?::TIMESTAMP, starts_at), updated_at = ? "
                "WHERE fingerprint IN (SELECT unnest(?))", [now, now, stale],
            )
            queue += [(fp, s, "resolved") for fp in stale for s in told(fp)]
            resolved += len(stale)
        if queue:
            q = pd.DataFrame(queue, columns=["fingerprint", "sink", "status"])
            q = q.assign(state="pending", attempts=0, last_error=None, updated_at=now)
            upsert(con, "alert_deliveries", q)
    return {"fired": fired, "updated": updated, "resolved": resolved}


@dataclass
class Batch:
    """What one sink is to be sent in one run: the payload, and the pending deliveries it
    settles (re-sends of firing alerts settle none)."""

    sink: Sink
    payload: list[dict[str, object]]
    keys: pd.DataFrame  # fingerprint, status of the pending deliveries in the payload
    refreshed: int = 0
    error: str | None = None  # set by send_batches when the sink failed
    sent: bool = False


def pending_batches(con: duckdb.DuckDBPyConnection, sinks: Sequence[Sink], now: datetime) -> list[Batch]:
    """Each sink's pending deliveries (and, for Alertmanager, the firing alerts to re-send) as
    payloads, read from the warehouse; nothing is sent here."""
    out: list[Batch] = []
    for sink in sinks:
        pending = query(con, """
            SELECT d.status AS delivery_status, d.attempts, d.updated_at AS delivery_updated_at, a.*
            FROM alert_deliveries d JOIN alerts a USING (fingerprint)
            WHERE d.sink = ? AND d.state = 'pending'
            ORDER BY a.starts_at, d.fingerprint,
                     CASE WHEN d.status = 'firing' THEN 0 WHEN d.status = 'resolved' THEN 2 ELSE 1 END, d.status
        """, [sink.name])
        refresh = query(con, """
            SELECT 'firing' AS delivery_status, d.attempts, a.*
            FROM alert_deliveries d JOIN alerts a USING (fingerprint)
            WHERE d.sink = ? AND d.status = 'firing' AND d.state = 'delivered' AND a.status = 'firing'
              AND NOT EXISTS (SELECT 1 FROM alert_deliveries p WHERE p.sink = d.sink
                              AND p.fingerprint = d.fingerprint AND p.state = 'pending')
            ORDER BY a.starts_at, d.fingerprint
        """, [sink.name]) if getattr(sink, "resends_firing", False) else pd.DataFrame()
        payload = []
        for r in [*pending.to_dict("records"), *refresh.to_dict("records")]:
            rec = {k: (None if (not isinstance(v, (list, dict)) and pd.isna(v)) else v) for k, v in r.items()}
            rec["labels"] = json.loads(rec["labels"]) if rec.get("labels") else {}
            rec["status"] = rec.pop("delivery_status")
            if rec["status"].startswith("escalated:"):  # escalated:<from>><to>
                rec["previous_severity"], rec["severity"] = rec["status"].split(":", 1)[1].split(">")
                rec["status"] = "escalated"
            if rec["status"] != "resolved":
                rec["ends_at"] = None
            rec["sent_at"] = now
            for key in ("window_start", "window_end", "starts_at", "ends_at", "updated_at", "sent_at"):
                rec[key] = _iso(rec[key])
            # one id per transition of one firing: a receiver that got a batch twice (a timeout
            # retried after it had been taken in) drops the copy by this id
            transition = f"{rec['fingerprint']}|{rec['starts_at']}|{rec['status']}|{rec.get('severity')}"
            rec["delivery_id"] = hashlib.sha256(transition.encode()).hexdigest()[:16]
            rec.pop("attempts")
            rec.pop("delivery_updated_at", None)
            payload.append(rec)
        # with the delivery's updated_at: a run that queues it again meanwhile (the warehouse is
        # closed while sending) changes that, so this batch does not mark the new one delivered
        keys = (pending[["fingerprint", "delivery_status", "delivery_updated_at"]]
                .rename(columns={"delivery_status": "status", "delivery_updated_at": "updated_at"})
                if not pending.empty else pd.DataFrame(columns=["fingerprint", "status", "updated_at"]))
        out.append(Batch(sink, payload, keys, len(refresh)))
    return out


def send_batches(batches: Sequence[Batch]) -> None:
    """Send each non-empty batch to its sink (network: no warehouse connection is held)."""
    for b in batches:
        if not b.payload:
            continue
        try:
            b.sink.send(b.payload)
            b.sent = True
        except Exception as exc:  # noqa: BLE001 - any sink failure keeps the batch pending
            b.error = str(exc)[:500]
            log.warning("sink %s failed (%d alert(s) stay pending): %s", b.sink.name, len(b.keys), exc)


def record_batches(con: duckdb.DuckDBPyConnection, batches: Sequence[Batch], now: datetime) -> dict[str, int]:
    """Mark what each sink accepted delivered, and what failed still pending with its error;
    return how many pending deliveries each sink accepted."""
    out: dict[str, int] = {}
    for b in batches:
        if b.sent and not b.keys.empty:
            _mark(con, b.sink.name, b.keys, "delivered", now, None)
        elif b.error is not None and not b.keys.empty:
            _mark(con, b.sink.name, b.keys, "pending", now, b.error)
        if b.sent and b.refreshed:
            log.info("sink %s: %d firing alert(s) re-sent", b.sink.name, b.refreshed)
        out[b.sink.name] = len(b.keys) if b.sent else 0
    return out


def deliver_pending(con: duckdb.DuckDBPyConnection, sinks: Sequence[Sink], now: datetime) -> dict[str, int]:
    """Send every sink its pending deliveries; return how many each sink accepted. (The
    detect flow runs the three steps itself, so that no warehouse lock is held while sending.)"""
    batches = pending_batches(con, sinks, now)
    send_batches(batches)
    return record_batches(con, batches, now)


def _mark(con: duckdb.DuckDBPyConnection, sink: str, keys: pd.DataFrame, state: str,
          now: datetime, error: str | None) -> None:
    con.register("_delivery_keys", keys)
    try:
        with transaction(con):
            con.execute("""
                UPDATE alert_deliveries SET state = ?, attempts = attempts + 1, last_error = ?, updated_at = ?
                FROM _delivery_keys k
                WHERE alert_deliveries.sink = ? AND alert_deliveries.fingerprint = k.fingerprint
                  AND alert_deliveries.status = k.status AND alert_deliveries.updated_at = k.updated_at
            """, [state, error, now, sink])
    finally:
        con.unregister("_delivery_keys")
