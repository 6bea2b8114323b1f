"""The input formats ``headroom ingest`` reads, in one registry. A new format is one module
that maps its files to contract rows, plus one :class:`Format` entry in :data:`FORMATS`."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb

from pipelines.ingest import adapters, aws_json, gwa, prometheus
from pipelines.ingest.adapters import IngestFileError, RawInput
from pipelines.ingest.contract import KindSpec


@dataclass(frozen=True)
class Format:
    """One input format: the file names it may have, how to recognise its content among
    formats that share those names, and how to read it into the ``_raw`` table."""

    name: str
    family: str  # what the suffixes say the file is ("JSON"), for the error when no format claims it
    suffixes: tuple[str, ...]
    read: Callable[[duckdb.DuckDBPyConnection, Path, KindSpec, str, str], RawInput]
    sniff: Callable[[Path], bool] | None = None  # None: the fallback for its suffixes
    kinds: tuple[str, ...] | None = None  # the kinds its files hold (None: any)
    labelled: bool = False  # its rows take --cluster/--pool

    def named(self, path: Path) -> bool:
        return path.name.lower().endswith(self.suffixes)


def _mapped(frame: Callable[[Path, KindSpec, str, str], object], fmt: str):
    """A reader for a format mapped to a contract frame in Python first."""
    def read(con: duckdb.DuckDBPyConnection, path: Path, spec: KindSpec, cluster: str, pool: str) -> RawInput:
        return adapters.load_frame(con, frame(path, spec, cluster, pool), spec, fmt)
    return read


def _json_head(path: Path) -> str:
    return adapters.head(path, 65536)


def _is_prometheus(path: Path) -> bool:
    head = _json_head(path)  # a Prometheus error response says so there too
    return '"resultType"' in head or '"data"' in head or ('"status"' in head and '"errorType"' in head)


def _is_gwa(path: Path) -> bool:
    first = adapters.head(path)
    return ";" in first and "Timestamp" in first


FORMATS: tuple[Format, ...] = (
    Format("csv", "CSV", (".csv", ".csv.gz", ".txt"),
           lambda con, path, spec, cluster, pool: adapters.read_csv(con, path, spec, lazy=True)),
    Format("parquet", "Parquet", (".parquet", ".pq"),
           lambda con, path, spec, cluster, pool: adapters.read_parquet(con, path, spec)),
    Format("aws-json", "JSON", (".json", ".json.gz"),
           _mapped(lambda path, spec, cluster, pool: aws_json.aws_json_frame(path), "aws-json"),
           sniff=lambda path: "SpotPriceHistory" in _json_head(path), kinds=("spot-prices",)),
    Format("prometheus-json", "JSON", (".json", ".json.gz"),
           _mapped(prometheus.prometheus_frame, "prometheus-json"), sniff=_is_prometheus, labelled=True),
    Format("gwa-t12", "CSV", (".csv", ".csv.gz", ".txt"),
           _mapped(lambda path, spec, cluster, pool: gwa.gwa_frame(path, cluster, pool), "gwa-t12"),
           sniff=_is_gwa, kinds=("utilization",), labelled=True),
)
BY_NAME = {f.name: f for f in FORMATS}
NAMES = ("auto", *BY_NAME)  # what --format takes
LABELLED = tuple(f.name for f in FORMATS if f.labelled)


def detect_format(path: Path) -> str:
    """Guess a file's format from its name and, where formats share a name, its first bytes."""
    candidates = [f for f in FORMATS if f.named(path)]
    if not candidates:
        raise IngestFileError(path, "cannot tell the format from the name; pass --format")
    for f in candidates:
        if f.sniff is not None and f.sniff(path):
            return f.name
    fallback = [f for f in candidates if f.sniff is None]
    if fallback:
        return fallback[0].name
    names = " nor ".join(f.name for f in candidates)
    raise IngestFileError(path, f"{candidates[0].family} file that is neither {names}")


def read_input(con: duckdb.DuckDBPyConnection, path: Path, spec: KindSpec, fmt: str, cluster: str,
               pool: str) -> RawInput:
    """Read ``path`` with the reader of ``fmt`` (``auto`` guesses) into the ``_raw`` temp table."""
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt not in BY_NAME:
        raise IngestFileError(path, f"unknown format {fmt!r}; expected one of {', '.join(NAMES)}")
    f = BY_NAME[fmt]
    if f.kinds is not None and spec.kind not in f.kinds:
        held = f.kinds[0].replace("-", " ")
        raise IngestFileError(path, f"{fmt} holds {held}; use --kind {f.kinds[0]}, not {spec.kind}")
    return f.read(con, path, spec, cluster, pool)
