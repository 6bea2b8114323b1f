"""Alert storage and delivery: the ``alerts`` table, per-sink ``alert_deliveries``, sinks.

* :func:`sync_alerts` records one detector kind's current alerts: new fingerprints fire,
  firing alerts of that kind that are no longer current resolve. Every transition queues
  one ``pending`` delivery per sink (key fingerprint, sink, status). Each delivery keeps the
  severity, probability and summary its transition had, so one sent late (the sink was
  down) says what happened then, not what the alert says now.
* :func:`deliver_pending` sends each sink its pending deliveries in one batch and marks
  them ``delivered`` only when the sink accepted them. A failing sink keeps them pending
  for the next run; a delivered row is never sent again. (Should the process die between
  a sink's acceptance and that mark, the batch is sent once more: at-least-once.)
* The warehouse is closed while a batch is sent, so another ``detect`` (the schedule and one
  by hand) may read the same rows meanwhile: a run claims what it reads as pending in that
  same transaction (:class:`Claim`, a lease on the wall clock) and sends only that. The
  claim ends when the run records the outcome, or lapses if the run died.

Deliveries go out in the order things happened: an alert's firing, its escalations, its
resolution. Every record carries ``sent_at``, the run's time. An alert's severity only rises
while it fires: a rise is delivered once per step (status ``escalated`` with
``previous_severity``), and a fall keeps the higher one. Alertmanager identifies an alert by
its labels, severity among them, so there an escalation resolves the old label set and fires
the new one, and the resolution carries the labels last fired. A changed probability shows in
Alertmanager's re-sent annotations.

Sinks (:mod:`pipelines.detect.sinks`): a JSONL file, a generic JSON webhook and Prometheus
Alertmanager's ``POST /api/v2/alerts``. Alertmanager expects its clients to re-send alerts
that are still active (Prometheus does every minute) and ends one at its ``endsAt``: so every
run re-posts the firing alerts it already delivered there, outside the once-only bookkeeping,
with ``endsAt`` = the later of the run's time (the wall clock's, when a replay runs behind it)
plus ``hold`` (1 hour: four runs of the 15-minute schedule) and the end of a predicted window.
An alert stays active while ``detect`` keeps
running and expires an hour after it stops; the resolution is sent with the time the
condition cleared. Alertmanager deduplicates re-posts, so receivers are notified once."""
from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import duckdb
import pandas as pd

from anomaly.alert import SEVERITIES, Alert, goes_on
from pipelines.detect.sinks import (  # noqa: F401 - the sinks are part of this module's API
    ATTEMPT_TIMEOUTS,
    AlertmanagerSink,
    JsonlSink,
    Sink,
    WebhookSink,
    _iso,
    check_url,
    redact,
    sinks_from_settings,
    url_sink_name,
)
from pipelines.runtime.signals import process_alive
from pipelines.store.warehouse import default_lock_timeout, query, transaction, upsert

log = logging.getLogger(__name__)

SEVERITY_RANK = {sev: i for i, sev in enumerate(SEVERITIES)}  # info < warning < critical


def catch_up_sinks(con: duckdb.DuckDBPyConnection, names: Sequence[str], now: datetime) -> int:
    """Queue the firing of every alert still firing for each sink that has no delivery of it
    yet: a receiver added later hears what is firing (before any resolution of it), whichever
    detectors the run has. Returns the deliveries queued."""
    if not names:
        return 0
    missing = query(con, """
        SELECT a.fingerprint, s.sink, a.severity, a.probability, a.summary
        FROM alerts a CROSS JOIN (SELECT unnest(?) AS sink) s
        WHERE a.status = 'firing' AND NOT EXISTS (
            SELECT 1 FROM alert_deliveries d WHERE d.fingerprint = a.fingerprint AND d.sink = s.sink
              AND d.status = 'firing')
    """, [list(names)])
    if missing.empty:
        return 0
    upsert(con, "alert_deliveries", _queued(missing.assign(status="firing"), now))
    return len(missing)


def _queued(q: pd.DataFrame, now: datetime) -> pd.DataFrame:
    """``fingerprint, sink, status`` (+ what the transition said) as new pending deliveries.
    The claim is cleared explicitly: an upsert keeps the columns it does not name, and a
    transition queued again while a run sends the old one is not that run's to mark."""
    return q.assign(state="pending", attempts=0, last_error=None, updated_at=now, claimed_by=None,
                    claimed_until=None)


def firing_entities(con: duckdb.DuckDBPyConnection, kind: str) -> set[str]:
    """The entities with a firing alert of ``kind``."""
    return set(query(con, "SELECT DISTINCT entity FROM alerts WHERE kind = ? AND status = 'firing'", [kind])["entity"])


def _row(alert: Alert, status: str, starts_at: datetime, ends_at: datetime | None, now: datetime) -> dict[str, object]:
    rec = alert.to_record()
    rec["labels"] = json.dumps(rec["labels"], sort_keys=True)
    rec.update(status=status, starts_at=starts_at, ends_at=ends_at, updated_at=now)
    return rec


def _changed(row: dict[str, object], old: object) -> bool:
    """Whether an alert row says anything else than its stored ``old`` row, or covers another window."""
    now = [*_said(row), row["window_start"], row["window_end"]]
    before = [old.severity, old.probability, old.summary, old.window_start, old.window_end]
    return any(pd.isna(a) != pd.isna(b) or (not pd.isna(a) and a != b) for a, b in zip(now, before))


def _said(row: dict[str, object]) -> tuple[object, object, object]:
    """What an alert row says, as a delivery keeps it: severity, probability, summary."""
    return row["severity"], row["probability"], row["summary"]


def _ahead(row, now: datetime) -> bool:
    """Whether a run whose clock is ahead of ``now`` fired or last renewed this alert row (a
    replay behind it neither renews nor resolves it: a later run saw it hold)."""
    return pd.Timestamp(row.starts_at) > pd.Timestamp(now) or pd.Timestamp(row.updated_at) > pd.Timestamp(now)


def sync_alerts(con: duckdb.DuckDBPyConnection, kind: str, current: Sequence[Alert], now: datetime,
                sink_names: Iterable[str], ended: Sequence[Alert] = (), history: Collection[str] = frozenset(),
                ) -> dict[str, int]:
    """Record ``kind``'s alerts as of ``now``; return counts fired / updated / resolved (and
    ``history``). ``current``: conditions that hold now (a renewed prediction goes on as its
    firing alert: :func:`anomaly.alert.goes_on`). ``ended``: conditions found and already
    over (a burst that came and went between runs): they fire and resolve in the same run, or,
    fingerprint in ``history`` (over long before ``now``: old data read late), are recorded
    resolved and sent to no sink. Firing alerts of ``kind`` in neither list resolve."""
    if any(a.kind != kind for a in [*current, *ended]):
        raise ValueError(f"sync_alerts({kind!r}) got alerts of another kind")
    names = list(sink_names)
    existing = query(con, "SELECT fingerprint, status, starts_at, ends_at, updated_at, severity, probability, summary, "
                          "entity, window_start, window_end FROM alerts WHERE kind = ?", [kind])
    known = {r.fingerprint: r for r in existing.itertuples(index=False)}
    current = goes_on(kind, current, existing, now)
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
    fired = updated = resolved = past = 0
    current_fps = {a.fingerprint for a in current}
    for alert in [*current, *(a for a in ended if a.fingerprint not in current_fps)]:
        fp = alert.fingerprint
        is_ended = fp not in current_fps
        old = known.get(fp)
        was_firing = old is not None and old.status == "firing"
        if old is not None and not was_firing and (is_ended or pd.Timestamp(old.ends_at) > pd.Timestamp(now)):
            continue  # already fired and resolved; or resolved by a run whose clock is ahead of this one's
        if was_firing and _ahead(old, now):
            continue  # fired or renewed by a run whose clock is ahead of this replay's: not this run's to touch
        quiet = is_ended and not was_firing and fp in history
        if was_firing:
            starts = old.starts_at
        else:
            starts = now
            fired, past = fired + (not quiet), past + quiet
            if old is not None:  # it resolved and fires again: what was not yet said of that is moot
                refired.append(fp)
        # never ends before it started (a replay whose clock is behind the run that fired it)
        row = _row(alert, "resolved" if is_ended else "firing", starts,
                   max(now, pd.Timestamp(starts)) if is_ended else None, now)
        # the labels it fired with, until it resolves, unless it escalates: then every sink
        # hears it once per step up (Alertmanager: the old labels resolve, new ones fire). The
        # severity kept keeps the probability and summary that came with it: an escalation sent
        # later must not say "critical" with a lower, later probability
        step = SEVERITY_RANK[alert.severity] - SEVERITY_RANK.get(old.severity, 0) if was_firing else 0
        escalates = was_firing and not is_ended and step > 0
        if was_firing and (is_ended or step < 0):
            # (an ended one resolves with the labels it fired with, whatever it ended at)
            row.update(severity=old.severity, probability=old.probability, summary=old.summary)
        rows.append(row)
        # updated: still firing, and what it says or its window changed (a rerun on the same data is not)
        updated += was_firing and not is_ended and _changed(row, old)
        # each delivery says what its transition said. A sink configured after the alert fired
        # still hears it fire: as it stood before this run's escalation, which it hears next
        fired_as = (old.severity, old.probability, old.summary) if escalates else _said(row)
        if quiet:  # history: recorded, heard by no sink
            continue
        newcomers = [s for s in names if not was_firing or (fp, s, "firing") not in delivered_keys]
        queue += [(fp, s, "firing", *fired_as) for s in newcomers]
        if escalates:
            queue += [(fp, s, f"escalated:{old.severity}>{alert.severity}", *_said(row)) for s in told(fp)]
        if is_ended:
            queue += [(fp, s, "resolved", *_said(row)) for s in told(fp)]
            resolved += 1
    touched = {r["fingerprint"] for r in rows}
    # one that fired or was renewed after this run's clock (a replay behind a later run) is not
    # this run's to resolve: it knows nothing of it
    stale = [fp for fp, r in known.items() if r.status == "firing" and fp not in touched and not _ahead(r, now)]
    with transaction(con):
        # read before the delete and the upsert below take the rows another run is sending
        senders = _senders(con, [*refired, *(q[0] for q in queue), *stale])
        if refired:
            con.execute("DELETE FROM alert_deliveries WHERE state = 'pending' AND status <> 'firing' "
                        "AND fingerprint IN (SELECT unnest(?))", [refired])
        upsert(con, "alerts", pd.DataFrame(rows))
        if stale:
            con.execute(
                "UPDATE alerts SET status = 'resolved', ends_at = greatest(?::TIMESTAMP, starts_at), updated_at = ? "
                "WHERE fingerprint IN (SELECT unnest(?))", [now, now, stale],
            )
            queue += [(fp, s, "resolved", known[fp].severity, known[fp].probability, known[fp].summary)
                      for fp in stale for s in told(fp)]
            resolved += len(stale)
        if queue:
            q = pd.DataFrame(queue, columns=["fingerprint", "sink", "status", "severity", "probability", "summary"])
            upsert(con, "alert_deliveries", _held_for(_queued(q, now), senders))
    return {"fired": fired, "updated": updated, "resolved": resolved, **({"history": past} if past else {})}


HELD = "held:"  # claimed_by of a delivery queued while another run sends that alert to that sink


def _senders(con: duckdb.DuckDBPyConnection, fingerprints: Sequence[str]) -> pd.DataFrame:
    """``fingerprint, sink, run, until``: the live claims of other runs on these alerts' pending
    deliveries (in the caller's transaction), i.e. what is being sent while this run records."""
    if not fingerprints:
        return pd.DataFrame(columns=["fingerprint", "sink", "run", "until"])
    return query(con, f"""
        SELECT fingerprint, sink, max(CASE WHEN starts_with(claimed_by, '{HELD}') THEN substr(claimed_by, {len(HELD) + 1})
                                           ELSE claimed_by END) AS run, max(claimed_until) AS until
        FROM alert_deliveries
        WHERE state = 'pending' AND claimed_by IS NOT NULL AND claimed_until > ? AND fingerprint IN (SELECT unnest(?))
        GROUP BY fingerprint, sink
    """, [_wall_now(), sorted(set(fingerprints))])


def _held_for(q: pd.DataFrame, senders: pd.DataFrame) -> pd.DataFrame:
    """``q`` with each delivery to a sink another run is sending its alert to held for that
    run (``held:<run>`` until its claim lapses): re-queueing replaces or deletes the rows that
    run claimed, and an unheld new row would let a third run send it before the batch in flight
    lands (a new firing overtaken by the old resolution). The run frees them when it records."""
    if senders.empty or q.empty:
        return q
    m = q.merge(senders, on=["fingerprint", "sink"], how="left")
    hold = m["run"].notna().to_numpy()
    q = q.copy()
    q.loc[hold, "claimed_by"] = (HELD + m.loc[hold, "run"].astype(str)).to_numpy()
    q.loc[hold, "claimed_until"] = m.loc[hold, "until"].to_numpy()
    return q


def _wall_now() -> datetime:
    """The wall clock, naive UTC, as claims are written (never the run's clock)."""
    return datetime.now(UTC).replace(tzinfo=None)


CLAIM_LEASE_MIN = pd.Timedelta(minutes=10)


@dataclass(frozen=True)
class Claim:
    """One run's hold on the pending deliveries it sends: ``run_id`` names the run, ``at`` is
    when it was taken and ``until`` when it lapses (the run died before recording). Both on
    the wall clock, never the run's: a replay's clock may be months behind a live run's."""

    run_id: str
    at: datetime
    until: datetime

    @classmethod
    def take(cls, lease: pd.Timedelta) -> Claim:
        at = _wall_now()
        return cls(f"{HOST}:{os.getpid()}-{uuid.uuid4().hex[:12]}", at, (pd.Timestamp(at) + lease).to_pydatetime())


HOST = socket.gethostname()  # a claim names its machine: only there can its process be looked up


def _release_dead(con: duckdb.DuckDBPyConnection, at: datetime) -> None:
    """Release the live claims (and holds) of this machine's runs whose process is gone: killed,
    they send nothing more, so their deliveries need not wait out the lease (at least once)."""
    dead = []
    for (by,) in con.execute("SELECT DISTINCT claimed_by FROM alert_deliveries WHERE state = 'pending' "
                             "AND claimed_by IS NOT NULL AND claimed_until > ?", [at]).fetchall():
        host, _, rest = str(by).removeprefix(HELD).rpartition(":")
        if host == HOST and rest.partition("-")[0].isdigit() and not process_alive(int(rest.partition("-")[0])):
            dead.append(str(by))
    if dead:
        con.execute("UPDATE alert_deliveries SET claimed_by = NULL, claimed_until = NULL "
                    "WHERE claimed_by IN (SELECT unnest(?))", [dead])
        log.warning("released the deliveries claimed by %d run(s) of this machine that died", len(dead))


def claim_lease(sinks: Sequence[Sink], lock_timeout_s: float | None = None) -> pd.Timedelta:
    """How long a run's claim holds: twice the worst case of one run's sends (each sink's
    attempts, each cut off after ``ATTEMPT_TIMEOUTS`` timeouts, and the backoffs between)
    plus the wait for the warehouse to record them, and at least ``CLAIM_LEASE_MIN``. A
    claim left by a run that died holds its deliveries back that long, no longer."""
    worst = default_lock_timeout() if lock_timeout_s is None else lock_timeout_s
    for sink in sinks:
        tries = int(getattr(sink, "retries", 0)) + 1
        timeout_s, backoff_s = float(getattr(sink, "timeout_s", 10.0)), float(getattr(sink, "backoff_s", 0.0))
        worst += tries * ATTEMPT_TIMEOUTS * timeout_s + backoff_s * 2**tries
    return max(CLAIM_LEASE_MIN, pd.Timedelta(seconds=2 * worst))


@dataclass
class Batch:
    """What one sink is to be sent in one run: the payload, and the pending deliveries it
    settles, all claimed by ``claim`` (re-sends of firing alerts settle none)."""

    sink: Sink
    payload: list[dict[str, object]]
    keys: pd.DataFrame  # fingerprint, status of the pending deliveries in the payload
    refreshed: int = 0
    error: str | None = None  # set by send_batches when the sink failed
    sent: bool = False
    claim: Claim | None = field(default=None, repr=False)


def _claim(con: duckdb.DuckDBPyConnection, names: list[str], claim: Claim) -> None:
    """Claim for ``claim``'s run the pending deliveries of ``names`` that no other run's live
    claim holds (in the caller's transaction). An alert whose deliveries to a sink another run
    is sending is left whole to that run: a resolution queued meanwhile must not reach the
    receiver before the firing still on its way."""
    _release_dead(con, claim.at)
    con.execute("""
        UPDATE alert_deliveries AS d SET claimed_by = ?, claimed_until = ?
        WHERE d.sink IN (SELECT unnest(?)) AND d.state = 'pending'
          AND EXISTS (SELECT 1 FROM alerts a WHERE a.fingerprint = d.fingerprint)  -- what a batch can read
          AND NOT EXISTS (SELECT 1 FROM alert_deliveries o WHERE o.sink = d.sink AND o.fingerprint = d.fingerprint
                          AND o.state = 'pending' AND o.claimed_until > ? AND o.claimed_by <> ?)
    """, [claim.run_id, claim.until, names, claim.at, claim.run_id])
    busy = con.execute("""
        SELECT sink, count(*), max(claimed_until) FROM alert_deliveries
        WHERE sink IN (SELECT unnest(?)) AND state = 'pending' AND claimed_by <> ? GROUP BY sink ORDER BY sink
    """, [names, claim.run_id]).fetchall()
    for sink, n, until in busy:
        log.warning("sink %s: %d pending deliveries are being sent by another run (claimed until %s); left to it",
                    sink, n, until)


def pending_batches(con: duckdb.DuckDBPyConnection, sinks: Sequence[Sink], now: datetime,
                    claim: Claim | None = None) -> list[Batch]:
    """Each sink's pending deliveries (and, for Alertmanager, the firing alerts to re-send) as
    payloads, read from the warehouse; nothing is sent here. What is read as pending is claimed
    for this run (``claim``, else a new one) in the same transaction, and only that is sent:
    two runs at once never both read one delivery. A write conflict with another thread's
    claim is retried; if it persists, nothing is claimed and the next run sends it."""
    claim = claim or Claim.take(claim_lease(sinks))
    for attempt in range(3):
        try:
            with transaction(con):
                _claim(con, [s.name for s in sinks], claim)
                return [_batch(con, sink, now, claim) for sink in sinks]
        except duckdb.TransactionException as exc:
            log.info("claiming pending deliveries conflicted with another run (%s); trying again", exc)
            time.sleep(0.05 * 2**attempt)
    log.warning("pending deliveries could not be claimed (another run kept writing them); left for the next run")
    empty = pd.DataFrame(columns=["fingerprint", "status"])
    return [Batch(sink, [], empty, claim=claim) for sink in sinks]


def _batch(con: duckdb.DuckDBPyConnection, sink: Sink, now: datetime, claim: Claim) -> Batch:
    """``sink``'s batch: the deliveries ``claim`` holds, each saying what its transition said
    (one queued before deliveries kept that says what the alert says now), then the re-sends."""
    pending = query(con, """
        SELECT d.status AS delivery_status, d.attempts,
               a.* REPLACE (coalesce(d.severity, a.severity) AS severity,
                            CASE WHEN d.severity IS NULL THEN a.probability ELSE d.probability END AS probability,
                            CASE WHEN d.severity IS NULL THEN a.summary ELSE d.summary END AS summary)
        FROM alert_deliveries d JOIN alerts a USING (fingerprint)
        WHERE d.sink = ? AND d.state = 'pending' AND d.claimed_by = ?
        ORDER BY a.starts_at, d.fingerprint,
                 CASE WHEN d.status = 'firing' THEN 0 WHEN d.status = 'resolved' THEN 2 ELSE 1 END, d.status
    """, [sink.name, claim.run_id])
    # re-sends: what is firing, and for ``hold`` after its end what resolved (as Prometheus
    # keeps sending a resolved alert): a run's re-send of a firing alert that lands after another
    # run's resolution (both in flight at once) would hold it active until its endsAt
    hold = pd.Timedelta(getattr(sink, "hold", pd.Timedelta(hours=1)))
    refresh = query(con, """
        SELECT a.status AS delivery_status, d.attempts, a.*
        FROM alert_deliveries d JOIN alerts a USING (fingerprint)
        WHERE d.sink = ? AND d.state = 'delivered' AND d.status = a.status
          AND (a.status = 'firing' OR (a.status = 'resolved' AND a.ends_at >= ?))
          AND NOT EXISTS (SELECT 1 FROM alert_deliveries p WHERE p.sink = d.sink
                          AND p.fingerprint = d.fingerprint AND p.state = 'pending')
        ORDER BY a.starts_at, d.fingerprint
    """, [sink.name, (pd.Timestamp(now) - hold).to_pydatetime()]) if getattr(sink, "resends_firing", False) \
        else pd.DataFrame()
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
        payload.append(rec)
    keys = pending[["fingerprint", "delivery_status"]].rename(columns={"delivery_status": "status"})
    return Batch(sink, payload, keys, len(refresh), claim=claim)


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
    """Mark what each sink accepted delivered, and what failed still pending with its error
    (its claim released: the next run tries again, not after the lease); return how many
    pending deliveries each sink accepted."""
    out: dict[str, int] = {}
    for b in batches:
        marked = 0
        if b.sent and not b.keys.empty:
            marked = _mark(con, b, "delivered", now, None)
        elif b.error is not None and not b.keys.empty:
            _mark(con, b, "pending", now, b.error)
        if b.sent and b.refreshed:
            log.info("sink %s: %d active (or just resolved) alert(s) re-sent", b.sink.name, b.refreshed)
        if b.sent and marked < len(b.keys):
            log.warning("sink %s: %d of the %d deliveries sent were queued again meanwhile (the alert moved on) or "
                        "taken over by another run (this run's claim lapsed): not recorded by this run",
                        b.sink.name, len(b.keys) - marked, len(b.keys))
        out[b.sink.name] = marked
    return out


def deliver_pending(con: duckdb.DuckDBPyConnection, sinks: Sequence[Sink], now: datetime) -> dict[str, int]:
    """Send every sink its pending deliveries; return how many each sink accepted. (The
    detect flow runs the three steps itself, so that no warehouse lock is held while sending.)"""
    batches = pending_batches(con, sinks, now)
    send_batches(batches)
    return record_batches(con, batches, now)


def _mark(con: duckdb.DuckDBPyConnection, batch: Batch, state: str, now: datetime, error: str | None) -> int:
    """Record a batch's outcome on the deliveries its run still claims, end the claim, free
    what was held for it (see :func:`_held_for`), and return how many it recorded. A delivery
    queued again meanwhile (the warehouse is closed while sending: another run saw the alert
    resolve and fire again) lost the claim, so the old batch does not settle it; nor does one
    another run took over when this run's lease lapsed."""
    run = batch.claim.run_id if batch.claim else None
    con.register("_delivery_keys", batch.keys)
    try:
        with transaction(con):
            con.execute("UPDATE alert_deliveries SET claimed_by = NULL, claimed_until = NULL "
                        "WHERE sink = ? AND claimed_by = ?", [batch.sink.name, f"{HELD}{run}"])
            return int(con.execute("""
                UPDATE alert_deliveries SET state = ?, attempts = attempts + 1, last_error = ?, updated_at = ?,
                                            claimed_by = NULL, claimed_until = NULL
                FROM _delivery_keys k
                WHERE alert_deliveries.sink = ? AND alert_deliveries.fingerprint = k.fingerprint
                  AND alert_deliveries.status = k.status AND alert_deliveries.claimed_by = ?
            """, [state, error, now, batch.sink.name, run]).fetchone()[0])
    finally:
        con.unregister("_delivery_keys")
