"""Alert deliveries recorded by an older headroom, carried over to what this one names."""
from __future__ import annotations

import logging
from collections.abc import Sequence

import duckdb

from pipelines.store.warehouse import transaction

log = logging.getLogger(__name__)


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
                INSERT INTO alert_deliveries (fingerprint, sink, status, state, attempts, last_error, updated_at,
                                              severity, probability, summary)
                SELECT o.fingerprint, ?, o.status, o.state, o.attempts, o.last_error, o.updated_at,
                       o.severity, o.probability, o.summary
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
