"""Warehouse reads and writes for the ``detect`` flow (all SQL of detection lives here)."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import pickle
from collections.abc import Mapping, Sequence
from datetime import datetime

import duckdb
import pandas as pd

from anomaly.cusum import CusumState
from anomaly.fault_features import FaultPolicy
from anomaly.spike_features import SERIES_KEY, SpikePolicy
from anomaly.spikes import SpikePredictor
from forecasters.demand import blank_filled
from pipelines.store.demand import STRAY_FAR, is_stray, load_demand, newest_two
from pipelines.store.warehouse import query, query_categorical, transaction, upsert

log = logging.getLogger(__name__)


def _upto(until: datetime | None) -> datetime:
    """``until`` for a ``ts <= ?`` bound; no bound (None) is the end of time."""
    return datetime.max if until is None else pd.Timestamp(until).to_pydatetime()


def demand_series(con: duckdb.DuckDBPyConnection, until: datetime | None = None,
                  since: pd.Timestamp | None = None) -> pd.DataFrame:
    """Hourly demand ``unique_id, ds, y`` (``cluster/pool/resource``), the same series the
    forecasters see (:func:`pipelines.store.demand.load_demand`: node hourly means summed, a
    partial last hour dropped, so a half-reported hour never looks like a drop), from the
    readings at or before ``until`` when given (a replay's clock). The hours a node a few
    hours behind has not reported yet wait for it (``late="wait"``): the CUSUM reads an hour
    once, so it must not read a stand-in for the node's load. ``since``: the readings from
    then on only (what the CUSUM states still need, see
    :func:`pipelines.detect.steps.burst_read_since`). Hours no node reported (a monitoring
    outage), or too few nodes to count, which ``load_demand`` fills, come back as NaN: the CUSUM reads no evidence
    there, where a straight line across a day would look like a burst against the daily cycle."""
    return blank_filled(load_demand(con, since=since,
                                    until=None if until is None else pd.Timestamp(until) + pd.Timedelta(microseconds=1),
                                    late="wait"))


# the fault model learns from at most this many of the newest readings (whole hours): its
# daily retraining then reads, and holds, no more as the history grows (42M readings, 600
# GPU nodes x 14 days: a 5.5 GB peak); a fleet that fits learns from all it has
# (pipelines.detect.steps.fault_model_job)
TRAIN_READINGS = 40_000_000


def telemetry(con: duckdb.DuckDBPyConnection, until: datetime | None = None,
              newest: int | None = None) -> pd.DataFrame:
    """Device telemetry (at or before ``until``) in the long contract (training; scoring
    reads :func:`recent_telemetry`): all of it, or with ``newest`` the newest whole hours of
    no more than that many readings. In no particular order: the feature builder sorts it,
    and a sort here would hold the whole table in DuckDB (6.7M rows: 0.65 GB peak read
    unsorted, 1.45 GB sorted)."""
    since = None if newest is None else _newest_hours(con, until, newest)
    return query_categorical(con, "SELECT ts, device_id, node_id, metric, value FROM device_telemetry "
                                  "WHERE ts <= ? AND ts >= ?", [_upto(until), since or datetime.min])


def _newest_hours(con: duckdb.DuckDBPyConnection, until: datetime | None, newest: int) -> datetime | None:
    """The first hour of the newest whole hours holding at most ``newest`` readings (at least
    the newest hour); None when all the readings fit."""
    total, start, last = con.execute("""
        SELECT sum(n), min(h) FILTER (WHERE c <= ?), max(h) FROM (
            SELECT h, n, sum(n) OVER (ORDER BY h DESC) AS c
            FROM (SELECT date_trunc('hour', ts) AS h, count(*) AS n FROM device_telemetry WHERE ts <= ? GROUP BY h))
    """, [newest, _upto(until)]).fetchone()
    if total is None or total <= newest:
        return None
    log.info("fault model: training on the readings from %s on (at most %d of the %d kept)", start or last,
             newest, total)
    return start or last


def data_end(con: duckdb.DuckDBPyConnection, leave_out_strays: bool = True, warn: bool = True):
    """The newest reading of utilization, device telemetry or spot prices (None when empty),
    as a datetime: the clock a replay of the data runs on. With ``leave_out_strays``, a
    table's newest reading standing alone far past the rest (:func:`stray_reading`), and
    readings over a day past this machine's clock (a source whose clock is a year ahead), are
    not its end: ``run`` on a warehouse with one telemetry row typed as 2126 ran every
    detector at 2126 (warned; ``prune`` reads them all, and refuses such a clock)."""
    wall = pd.Timestamp.now("UTC").tz_localize(None)
    ends = []
    for detector, (table, _far, _few) in DETECTOR_READINGS.items():
        newest = newest_two(con, table)[0]
        if newest is None:
            continue
        if leave_out_strays:
            why = stray_reading(con, detector, wall=wall.to_pydatetime())
            if why is not None:
                if warn:
                    log.warning("%s: not the data's end", why)
                newest = newest_two(con, table, (wall + AHEAD_OF_CLOCK).to_pydatetime())[0]
                if newest is not None and stray_reading(con, detector, until=newest) is not None:
                    newest = newest_two(con, table, newest)[1]
        if newest is not None:
            ends.append(pd.Timestamp(newest))
    return max(ends).to_pydatetime() if ends else None


# each detector's readings, and how far past all others their newest may stand before it reads as
# a mistyped date (spot prices are change events: a quiet market may hold its price for weeks)
DETECTOR_READINGS = {"bursts": ("utilization", STRAY_FAR, True), "faults": ("device_telemetry", STRAY_FAR, True),
                     "spikes": ("spot_prices", pd.Timedelta(days=30), False)}
AHEAD_OF_CLOCK = pd.Timedelta(days=1)  # live, a reading this far past the wall clock is misdated


def stray_reading(con: duckdb.DuckDBPyConnection, detector: str, until: datetime | None = None,
                  wall: datetime | None = None) -> str | None:
    """Why ``detector`` must not run, when its newest reading (at or before ``until``) stands
    alone far past every other: a date mistyped by a year (2126) makes that the data's end, so
    every real device, market or burst reads as long silent and resolves, and models are
    registered as of then; or, given the ``wall`` clock (a live run), stands over a day past
    it (a node whose clock is a year ahead reports many such readings). None when neither."""
    table, far, few = DETECTOR_READINGS[detector]
    newest, before, n_new, n_before = newest_two(con, table, until)
    if newest is None:
        return None
    newest = pd.Timestamp(newest)
    if wall is not None and newest - pd.Timestamp(wall) > AHEAD_OF_CLOCK:
        return (f"the newest {table} reading ({newest:%Y-%m-%d %H:%M} UTC) is {(newest - pd.Timestamp(wall)).days} "
                f"days after this machine's clock ({pd.Timestamp(wall):%Y-%m-%d %H:%M} UTC): a mistyped date, or a "
                "source whose clock is ahead? fix or delete those readings")
    if before is None or not is_stray(newest - pd.Timestamp(before), n_new, n_before, far, few):
        return None
    before = pd.Timestamp(before)
    return (f"the newest {table} reading ({newest:%Y-%m-%d %H:%M} UTC) stands {(newest - before).days} days after "
            f"the one before it ({before:%Y-%m-%d %H:%M}): a mistyped date? fix or delete that reading")


TELEMETRY_COLUMNS = ["ts", "device_id", "node_id", "metric", "value"]
SILENT_TOO_LONG = pd.Timedelta(days=1)  # a device this far behind the fleet's newest reading is not scored


def recent_telemetry(con: duckdb.DuckDBPyConnection, span: pd.Timedelta,
                     stale: pd.Timedelta = SILENT_TOO_LONG, until: datetime | None = None) -> pd.DataFrame:
    """What scoring each device's latest row needs: its telemetry over ``span`` before its
    own newest reading (a device that reports late is not cut short by the others), plus
    each metric's last reading in the ``span`` before that, so the first reading in the span
    can be told apart from the one before it (a counter polled at least that often).

    Devices whose newest reading is more than ``stale`` before the fleet's are left out
    (their prediction would be about a window already past). The reads are bounded by
    time, so a year of 1-minute DCGM history is not scanned every 15 minutes. With
    ``until``, readings after it do not exist (a replay's clock)."""
    newest = con.execute("SELECT max(ts) FROM device_telemetry WHERE ts <= ?", [_upto(until)]).fetchone()[0]
    if newest is None:
        return pd.DataFrame(columns=TELEMETRY_COLUMNS)
    newest = pd.Timestamp(newest)
    live, lo = newest - stale, newest - stale - 2 * span  # literals: DuckDB skips older row groups
    us = int(span / pd.Timedelta(microseconds=1))
    return query_categorical(con, """
        WITH recent AS (SELECT ts, device_id, node_id, metric, value FROM device_telemetry
                        WHERE ts >= ? AND ts <= ?),
        last AS (SELECT device_id, max(ts) AS ts FROM recent GROUP BY device_id HAVING max(ts) >= ?),
        t AS (
            SELECT r.ts, r.device_id, r.node_id, r.metric, r.value, r.ts >= l.ts - to_microseconds(?) AS inside
            FROM recent r JOIN last l USING (device_id)
            WHERE r.ts >= l.ts - 2 * to_microseconds(?)
        )
        SELECT ts, device_id, node_id, metric, value FROM t WHERE inside
        UNION ALL
        SELECT max(ts), device_id, arg_max(node_id, ts), metric, arg_max(value, ts) FROM t WHERE NOT inside
        GROUP BY device_id, metric
        ORDER BY device_id, ts, metric
    """, [lo.to_pydatetime(), newest.to_pydatetime(), live.to_pydatetime(), us, us])


def fault_input_counts(con: duckdb.DuckDBPyConnection, until: datetime | None = None) -> tuple[int, int]:
    """Rows of device telemetry and failures (none after ``until``): what a fault model learns from."""
    row = con.execute("SELECT (SELECT count(*) FROM device_telemetry WHERE ts <= $1), "
                      "(SELECT count(*) FROM failures WHERE ts <= $1)", [_upto(until)]).fetchone()
    return int(row[0]), int(row[1])


def spike_input_counts(con: duckdb.DuckDBPyConnection, until: datetime | None = None) -> tuple[int, int]:
    """Spot-price rows and markets (none after ``until``): what a spike model learns from."""
    row = con.execute("SELECT count(*), count(DISTINCT (provider, region, zone, instance_type, product)) "
                      "FROM spot_prices WHERE ts <= ?", [_upto(until)]).fetchone()
    return int(row[0]), int(row[1])


def failures(con: duckdb.DuckDBPyConnection, until: datetime | None = None) -> pd.DataFrame:
    """All recorded hardware failures (at or before ``until``)."""
    return query(con, "SELECT ts, device_id, node_id, failure_type FROM failures WHERE ts <= ? ORDER BY ts",
                 [_upto(until)])


def last_failures(con: duckdb.DuckDBPyConnection, until: datetime | None = None) -> pd.DataFrame:
    """``device_id, ts``: each device's latest failure up to the newest telemetry reading
    (what fault scoring needs to leave out devices that failed since their last reading)."""
    return query(con, """
        SELECT device_id, max(ts) AS ts FROM failures
        WHERE ts <= (SELECT max(ts) FROM device_telemetry WHERE ts <= ?)
        GROUP BY device_id ORDER BY device_id
    """, [_upto(until)])


def spot_prices(con: duckdb.DuckDBPyConnection, until: datetime | None = None) -> pd.DataFrame:
    """Spot price change events (at or before ``until``)."""
    return query(con, "SELECT ts, provider, region, zone, instance_type, product, price FROM spot_prices "
                      "WHERE ts <= ?", [_upto(until)])


def on_demand(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """On-demand prices from the catalog (where known)."""
    return query(con, """
        SELECT provider, region, instance_type, on_demand_price FROM instance_catalog
        WHERE on_demand_price > 0  -- 0 is a placeholder in some price lists, not a price
    """)


def spot_markets_in_use(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The spot markets (entity ``provider/zone/instance_type/product``) the latest plan run
    puts a pool's interruptible load on (its ``use_spot`` rows); empty before any plan."""
    rows = con.execute(
        "SELECT payload FROM recommendations WHERE kind = 'spot' AND run_id = (SELECT arg_max(run_id, created_at) "
        "FROM recommendations)").fetchall()
    out = set()
    for (payload,) in rows:
        p = json.loads(payload)
        if p.get("action") == "use_spot" and all(p.get(k) for k in SERIES_KEY):
            out.add("/".join(str(p[k]) for k in SERIES_KEY))
    return out


def load_states(con: duckdb.DuckDBPyConnection, detector: str) -> dict[str, CusumState]:
    """Persisted detector states by series. One this headroom cannot read (another version
    wrote it) is left out, with a warning: its series is calibrated afresh, as a new one."""
    rows = query(con, "SELECT unique_id, state FROM detector_state WHERE detector = ?", [detector])
    out = {}
    for r in rows.itertuples(index=False):
        try:
            out[r.unique_id] = CusumState.from_dict(json.loads(r.state))
        except (ValueError, TypeError, KeyError) as exc:
            log.warning("%s: its %s state is not one this headroom reads (%s): calibrated afresh", r.unique_id,
                        detector, exc)
    return out


def save_states(con: duckdb.DuckDBPyConnection, detector: str, states: Mapping[str, CusumState],
                now: datetime) -> int:
    """Upsert the states that changed (one transaction): a run that read nothing new writes
    nothing, so ``updated_at`` (status's last detect write) stays its last run that did, and a
    replay behind it does not move it back."""
    stored = dict(query(con, "SELECT unique_id, state FROM detector_state WHERE detector = ?",
                        [detector]).itertuples(index=False, name=None))
    rows = [{"detector": detector, "unique_id": uid, "last_ts": st.last_ts, "state": text, "updated_at": now}
            for uid, st in states.items()
            if stored.get(uid) != (text := json.dumps(st.to_dict(), sort_keys=True))]
    if not rows:
        return 0
    with transaction(con):
        return upsert(con, "detector_state", pd.DataFrame(rows))


def alert_counts(con: duckdb.DuckDBPyConnection, sinks: Sequence[str],
                 until: datetime | None = None) -> dict[str, object]:
    """Firing alerts (with ``until``, a replay's clock: those started by then) and the pending
    deliveries of the configured ``sinks``, for the flow's summary. Deliveries still pending for
    a sink not configured now (a JSONL file of another report folder, a webhook since removed)
    are kept, to go out if it comes back, and counted apart as ``pending_unconfigured``:
    {sink: n}, present only when there are any."""
    firing = con.execute("SELECT count(*) FROM alerts WHERE status = 'firing' AND starts_at <= ?",
                         [_upto(until)]).fetchone()
    rows = con.execute("SELECT sink, count(*) FROM alert_deliveries WHERE state = 'pending' GROUP BY sink "
                       "ORDER BY sink").fetchall()
    mine = set(sinks)
    out: dict[str, object] = {"firing": int(firing[0]) if firing else 0,
                              "pending_deliveries": sum(int(n) for s, n in rows if s in mine)}
    elsewhere = {str(s): int(n) for s, n in rows if s not in mine}
    if elsewhere:
        out["pending_unconfigured"] = elsewhere
    return out


def latest_model(con: duckdb.DuckDBPyConnection, kind: str, params: str, not_before: datetime,
                 until: datetime | None = None) -> bytes | None:
    """The newest artifact of ``kind`` trained with exactly ``params`` after ``not_before``
    (and, with ``until``, made at or before it from data up to it: a replay does not use a
    model that learned from its future). After, not at: a daily run whose clock is the data's
    end finds yesterday's model exactly a day old, and retrains it daily as it should."""
    # the id first, then its one artifact: a sort that carries the blobs reads every model kept
    # (a year of daily fault models: 0.4 s a lookup, three lookups a detect run)
    found = con.execute(
        "SELECT model_id FROM models WHERE kind = ? AND params = ? AND created_at > ? "
        "AND created_at <= ? AND data_cutoff <= ? ORDER BY created_at DESC, data_cutoff DESC LIMIT 1",
        [kind, params, not_before, _upto(until), _upto(until)],
    ).fetchone()
    row = con.execute("SELECT artifact FROM models WHERE model_id = ?", [found[0]]).fetchone() if found else None
    return bytes(row[0]) if row else None


def latest_model_row(con: duckdb.DuckDBPyConnection, kind: str, params: str,
                     until: datetime | None = None) -> dict | None:
    """``model_id, created_at, data_cutoff`` of the newest ``kind`` model trained with exactly
    ``params`` (with ``until``, as :func:`latest_model`: none made or trained after it)."""
    row = con.execute(
        "SELECT model_id, created_at, data_cutoff FROM models WHERE kind = ? AND params = ? "
        "AND created_at <= ? AND data_cutoff <= ? ORDER BY created_at DESC, data_cutoff DESC LIMIT 1",
        [kind, params, _upto(until), _upto(until)],
    ).fetchone()
    if row is None:
        return None
    return {"model_id": str(row[0]), "created_at": pd.Timestamp(row[1]), "data_cutoff": pd.Timestamp(row[2])}


def has_model(con: duckdb.DuckDBPyConnection, kind: str) -> bool:
    """Whether any ``kind`` model is registered, whatever settings it was trained with."""
    return bool(con.execute("SELECT count(*) FROM models WHERE kind = ?", [kind]).fetchone()[0])


def spot_prices_end(con: duckdb.DuckDBPyConnection, until: datetime | None = None) -> pd.Timestamp | None:
    """The newest spot-price change (at or before ``until``), None when there is none."""
    found = con.execute("SELECT max(ts) FROM spot_prices WHERE ts <= ?", [_upto(until)]).fetchone()[0]
    return None if found is None else pd.Timestamp(found)


# the ingest kinds each detector model learns from: a batch of these since its training is new data
MODEL_INPUTS = {"fault_predictor": ("telemetry", "failures"), "spike_predictor": ("spot-prices", "catalog")}


def inputs_mark(con: duckdb.DuckDBPyConnection, kind: str) -> str:
    """What ``kind``'s inputs are made of: the count and newest finish of the batches that loaded
    them. The same mark later means no file came in since (a retrain would learn the same)."""
    n, last = con.execute("SELECT count(*), max(finished_at) FROM ingest_batches WHERE kind IN "
                          "(SELECT unnest(?)) AND rows_loaded > 0", [list(MODEL_INPUTS[kind])]).fetchone()
    return f"{n}@{'' if last is None else pd.Timestamp(last).isoformat()}"


def model_inputs_mark(con: duckdb.DuckDBPyConnection, model_id: str) -> str | None:
    """The :func:`inputs_mark` a model was trained on, None for one registered without it."""
    row = con.execute("SELECT metrics FROM models WHERE model_id = ?", [model_id]).fetchone()
    try:
        return json.loads(row[0]).get("inputs_mark") if row and row[0] else None
    except (ValueError, AttributeError):
        return None


def save_model(con: duckdb.DuckDBPyConnection, kind: str, target: str, params: str,
               data_cutoff: datetime, artifact: bytes, metrics: str, now: datetime) -> str:
    """Register a detector model; its id is a hash of kind, params and data cutoff (retrained
    on the same cutoff, late rows inside its span, it is that model made anew: its time too,
    which the retrain age counts from)."""
    model_id = hashlib.sha256(f"{kind}|{params}|{pd.Timestamp(data_cutoff).isoformat()}".encode()).hexdigest()[:16]
    frame = pd.DataFrame([{
        "model_id": model_id, "kind": kind, "target": target, "series": None, "data_cutoff": data_cutoff,
        "params": params, "metrics": metrics, "artifact": artifact, "is_champion": False, "created_at": now,
    }])
    with transaction(con):
        upsert(con, "models", frame)
    return model_id


FAULT_MODEL = "fault_predictor"
SPIKE_MODEL = "spike_predictor"


def policy_params(policy: FaultPolicy | SpikePolicy) -> str:
    """The policy as canonical JSON: a stored model is reused only for the same policy."""
    return json.dumps(dataclasses.asdict(policy), sort_keys=True)


def spike_params(con: duckdb.DuckDBPyConnection, policy: SpikePolicy) -> str:
    """The policy, and whether on-demand prices are known: a model trained without them
    (no "above on-demand" spikes) is not reused once the catalog brings them."""
    params = json.loads(policy_params(policy))
    params["on_demand_known"] = not on_demand(con).empty
    return json.dumps(params, sort_keys=True)


def latest_spike_model(con: duckdb.DuckDBPyConnection, policy: SpikePolicy) -> SpikePredictor | None:
    """The newest registered spike model for ``policy``, None before the detect flow trained one."""
    blob = latest_model(con, SPIKE_MODEL, spike_params(con, policy), datetime.min)
    # pickle: our own estimator, stored in and read back from our own warehouse only
    return None if blob is None else pickle.loads(blob)
