"""Helpers of the ingest tests: files written as users have them, and what the warehouse kept."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd

UTIL_HEADER = "ts,cluster,pool,node_id,resource,used,capacity"


def write(path: Path, text: str, *, gz: bool = False, bom: bool = False) -> Path:
    data = ("\ufeff" if bom else "") + text
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


def rows(con, table: str) -> pd.DataFrame:
    return con.execute(f"SELECT * FROM {table} ORDER BY ALL").df()


def rejects(con) -> dict[int, str]:
    return dict(con.execute("SELECT line, reason FROM rejects").fetchall())


def prom(results: list[dict]) -> str:
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": results}})
