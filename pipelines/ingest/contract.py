"""The input contract: what each ingest kind's columns are, which form its key, and
which values are refused. One spec per kind drives validation for every format."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class KindSpec:
    """The columns and rules of one input kind."""

    kind: str
    table: str
    columns: tuple[str, ...]
    key: tuple[str, ...]
    timestamp: str | None = "ts"
    numeric: tuple[str, ...] = ()
    optional_numeric: tuple[str, ...] = ()
    optional_text: tuple[str, ...] = ()
    enums: dict[str, tuple[str, ...]] = field(default_factory=dict)
    non_negative: tuple[str, ...] = ()
    # (sql condition that is TRUE for a bad row, reason) over the typed columns
    checks: tuple[tuple[str, str], ...] = ()
    # a number this large is a unit or export error, and sums of it overflow to inf
    max_abs: float = 1e15

    @property
    def text(self) -> tuple[str, ...]:
        typed = set(self.numeric) | set(self.optional_numeric) | {self.timestamp}
        return tuple(c for c in self.columns if c not in typed)


RESOURCES = ("gpu", "cpu", "mem")
LOCATIONS = ("private", "public", "edge")

SPECS: dict[str, KindSpec] = {
    "utilization": KindSpec(
        kind="utilization",
        table="utilization",
        columns=("ts", "cluster", "pool", "node_id", "resource", "used", "capacity"),
        key=("ts", "node_id", "resource"),
        numeric=("used", "capacity"),
        enums={"resource": RESOURCES},
        non_negative=("used", "capacity"),
        checks=(("used > capacity", "used above capacity"),
                # cluster/pool/resource is a series' id: a '/' inside a name would move it to another group
                ("contains(cluster, '/') OR contains(pool, '/')", "cluster and pool names cannot contain '/'")),
    ),
    "telemetry": KindSpec(
        kind="telemetry",
        table="device_telemetry",
        columns=("ts", "device_id", "node_id", "metric", "value"),
        key=("ts", "device_id", "metric"),
        numeric=("value",),
        optional_text=("node_id",),
        max_abs=1e18,  # cumulative counters (energy in mJ since boot) run larger than any unit count
    ),
    "failures": KindSpec(
        kind="failures",
        table="failures",
        columns=("ts", "device_id", "node_id", "failure_type"),
        key=("ts", "device_id", "failure_type"),
        optional_text=("node_id",),
    ),
    "spot-prices": KindSpec(
        kind="spot-prices",
        table="spot_prices",
        columns=("ts", "provider", "region", "zone", "instance_type", "product", "price"),
        key=("ts", "provider", "zone", "instance_type", "product"),
        numeric=("price",),
        non_negative=("price",),
    ),
    "catalog": KindSpec(
        kind="catalog",
        table="instance_catalog",
        columns=(
            "provider", "region", "instance_type", "location", "resource", "units", "vcpus",
            "memory_gb", "on_demand_price", "reserved_1y_price", "reserved_3y_price", "tflops",
        ),
        key=("provider", "region", "instance_type"),
        timestamp=None,
        numeric=("units",),
        optional_numeric=(
            "vcpus", "memory_gb", "on_demand_price", "reserved_1y_price", "reserved_3y_price", "tflops",
        ),
        enums={"location": LOCATIONS, "resource": RESOURCES},
        non_negative=(
            "units", "vcpus", "memory_gb", "on_demand_price", "reserved_1y_price",
            "reserved_3y_price", "tflops",
        ),
        checks=(("units = 0", "units must be positive"),),
    ),
}

KINDS = tuple(SPECS)


def spec_for(kind: str) -> KindSpec:
    """The spec of ``kind``, or a ValueError listing the known kinds."""
    try:
        return SPECS[kind]
    except KeyError:
        raise ValueError(f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}") from None
