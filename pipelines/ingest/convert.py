"""Converters from the public traces' own layouts to headroom's input contract.

Each converter reads one source file (or folder) and returns contract frames by kind;
``headroom convert`` writes them as CSV that ``headroom ingest`` then loads. Raw
Bitbrains GWA-T-12 files need no conversion (``--format gwa-t12``)."""
from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from pipelines.ingest.convert_io import (
    RecordError,
    SidecarError,
    _bad,
    _ids,
    _iso,
    _num,
    _read,
    _sidecar_counts,
    _sidecar_ids,
    _sidecar_iso,
    read_sidecar,
)
from pipelines.ingest.tables import parse_like_ingest, row_label

log = logging.getLogger(__name__)

GIB_PER_KB = 1.0 / 1048576.0


BITBRAINS_NUMBERS = ["cpu_cores", "cpu_capacity_mhz_mean", "cpu_usage_mhz_mean", "mem_usage_kb_mean",
                     "mem_capacity_kb_mean"]
MAX_BURST = 1.5  # usage above capacity up to this multiple is a burst (clipped); beyond, a bad record


def bitbrains_hourly(path: Path) -> dict[str, pd.DataFrame]:
    """``rnd_vm_hourly_*.csv.gz`` -> utilization (cpu in cores, mem in GiB) per VM-hour.

    Rows the contract cannot hold are handled here and counted in the log, not left for
    ingest to reject: VM-hours with 0 cores (cpu) or 0 memory (mem) are left out; usage
    up to ``MAX_BURST`` times the provisioned capacity (a VM bursting past its allotment,
    about 0.5% of the VM-hours) is clipped to it, and beyond that (a broken capacity
    record: 512 KB of memory using 1.3 GB) left out."""
    f = _read(path, ["vm_id", "hour_utc", *BITBRAINS_NUMBERS], dtype={"vm_id": str})
    f["vm_id"] = _ids(f["vm_id"])  # one empty id made every id a float: vm1.0, vmnan
    for col in BITBRAINS_NUMBERS:  # an empty cell is a row cut short, not a VM with 0 cores
        f[col] = _num(f[col], required=True)
    per_core = f["cpu_capacity_mhz_mean"] / f["cpu_cores"]
    base = pd.DataFrame({"ts": _iso(f["hour_utc"]), "cluster": "bitbrains", "pool": "rnd",
                         "node_id": "vm" + f["vm_id"]})
    cpu = base.assign(resource="cpu", used=(f["cpu_usage_mhz_mean"] / per_core).round(4), capacity=f["cpu_cores"])
    no_cores = ~(f["cpu_cores"] > 0)
    if no_cores.any():
        log.warning("%s: %d VM-hour(s) with 0 cores left out of cpu (usage per core is undefined)",
                    path, int(no_cores.sum()))
        cpu = cpu[~no_cores]
    mem = base.assign(resource="mem", used=(f["mem_usage_kb_mean"] * GIB_PER_KB).round(4),
                      capacity=(f["mem_capacity_kb_mean"] * GIB_PER_KB).round(4))
    no_memory = ~(mem["capacity"] > 0)
    if no_memory.any():
        log.warning("%s: %d VM-hour(s) with 0 memory left out of mem", path, int(no_memory.sum()))
        mem = mem[~no_memory]
    parts = []
    for frame in (cpu, mem):
        broken = frame["used"] > MAX_BURST * frame["capacity"]
        if broken.any():
            log.warning("%s: %d %s VM-hour(s) using more than %gx their capacity left out (a broken capacity "
                        "record)", path, int(broken.sum()), frame["resource"].iloc[0], MAX_BURST)
            frame = frame[~broken]
        above = frame["used"] > frame["capacity"]
        if above.any():
            log.warning("%s: %d %s VM-hour(s) above their provisioned capacity clipped to it", path,
                        int(above.sum()), frame["resource"].iloc[0])
        parts.append(frame.assign(used=frame["used"].where(~above, frame["capacity"])))
    return {"utilization": pd.concat(parts, ignore_index=True)}


# Mean provisioned MHz per core of the Bitbrains Rnd VM-hours (rnd_vm_hourly_2013-07: 2,400 to
# 2,926 by host, mean 2,753): the cluster file counts MHz only, the contract counts cores.
BITBRAINS_MHZ_PER_CORE = 2753.0


def bitbrains_cluster(path: Path) -> dict[str, pd.DataFrame]:
    """``rnd_cluster_5min_*.csv.gz`` -> one 'node' (the whole cluster) in its own pool
    ``rnd-total``, in cores: MHz over the VMs' mean MHz per core (``BITBRAINS_MHZ_PER_CORE``;
    the file has no core counts, so this is approximate). It is the same VMs as the per-VM
    files: a warehouse should hold one or the other, or the fleet is counted twice."""
    f = _read(path, ["bucket_start_utc", "cpu_usage_mhz_sum", "cpu_capacity_mhz_sum"])
    for col in ("cpu_usage_mhz_sum", "cpu_capacity_mhz_sum"):
        f[col] = _num(f[col], required=True)
    log.warning("%s: cluster totals in cores at %g MHz per core (approximate); the per-VM files describe the "
                "same VMs, so ingest one or the other into a warehouse", path, BITBRAINS_MHZ_PER_CORE)
    return {"utilization": pd.DataFrame({
        "ts": _iso(f["bucket_start_utc"]), "cluster": "bitbrains", "pool": "rnd-total", "node_id": "cluster-total",
        "resource": "cpu", "used": (f["cpu_usage_mhz_sum"] / BITBRAINS_MHZ_PER_CORE).round(4),
        "capacity": (f["cpu_capacity_mhz_sum"] / BITBRAINS_MHZ_PER_CORE).round(4),
    })}


def aws_spot(path: Path) -> dict[str, pd.DataFrame]:
    """The AWS spot CSV (timestamp_utc, region, availability_zone, ...) -> spot-prices."""
    f = _read(path, ["timestamp_utc", "region", "availability_zone", "instance_type", "product_description",
                     "spot_price_usd_per_hour"])
    # named in the source, not passed on for ingest to name a line of the converted file
    price = _num(f["spot_price_usd_per_hour"], required=True)
    if (price < 0).any():
        raise _bad(f["spot_price_usd_per_hour"], price < 0, "negative price")
    return {"spot-prices": pd.DataFrame({
        "ts": _iso(f["timestamp_utc"]), "provider": "aws", "region": f["region"], "zone": f["availability_zone"],
        "instance_type": f["instance_type"], "product": f["product_description"], "price": price,
    })}


# AWS's published sizes of the instance types in the public price file: (vCPUs, GiB, GPUs).
# The planner counts CPU capacity in vCPUs and GPU capacity in GPUs, so a type whose size is
# not known here cannot be priced per unit and is left out (named on the console).
AWS_SIZES = {
    "c3.xlarge": (4, 7.5, 0), "d2.8xlarge": (36, 244.0, 0), "g2.2xlarge": (8, 15.0, 1),
    "m3.medium": (1, 3.75, 0), "r3.large": (2, 15.25, 0),
}


def aws_on_demand(path: Path) -> dict[str, pd.DataFrame]:
    """``on_demand_prices.csv`` -> public catalog rows, in vCPUs (or GPUs) per instance."""
    f = _read(path, ["instance_type", "region", "on_demand_usd_per_hour"])
    if "product_description" in f.columns:  # the catalog prices Linux machines, as the spot prices are
        products = f["product_description"].astype(str)
        others = sorted(set(products) - {"Linux/UNIX", "Linux"})
        if others:
            log.warning("%s: %d row(s) of %s left out: the catalog holds the Linux/UNIX price", path,
                        int((~products.isin(["Linux/UNIX", "Linux"])).sum()), ", ".join(others))
        f = f[products.isin(["Linux/UNIX", "Linux"])]
    twice = f.duplicated(["instance_type", "region"], keep=False)
    if twice.any():
        first = twice[twice].index[0]
        raise RecordError(int(first), "instance_type", f"{f.at[first, 'instance_type']} in {f.at[first, 'region']} "
                          "has two on-demand prices")
    unknown = sorted(set(f["instance_type"]) - set(AWS_SIZES))
    if unknown:
        log.warning("%s: size of %s unknown (vCPUs, GPUs): left out of the catalog", path, ", ".join(unknown))
    f = f[f["instance_type"].isin(AWS_SIZES)]
    size = f["instance_type"].map(AWS_SIZES)
    gpus = size.map(lambda t: t[2])
    return {"catalog": pd.DataFrame({
        "provider": "aws", "region": f["region"], "instance_type": f["instance_type"], "location": "public",
        "resource": ["gpu" if g > 0 else "cpu" for g in gpus],
        "units": [g if g > 0 else t[0] for g, t in zip(gpus, size)],
        "vcpus": size.map(lambda t: t[0]), "memory_gb": size.map(lambda t: t[1]),
        "on_demand_price": f["on_demand_usd_per_hour"],
        "reserved_1y_price": None, "reserved_3y_price": None, "tflops": None,
    })}


GCP_GPU_COLUMNS = ("a100", "a100-80gb", "h100-80gb", "h100-80gb-mega", "l4", "rtx6000")
# dense FP16/BF16 tensor TFLOPS per GPU (NVIDIA datasheets), the unit of work the planner
# compares GPU models by (as the generated catalog does)
# (rtx6000 is left out: the column holds the RTX PRO 6000 Blackwell of the g4 machines, whose
# dense BF16 figure we could not confirm; their offers stay uncompared rather than mis-sized)
GCP_GPU_TFLOPS = {"a100": 312.0, "a100-80gb": 312.0, "h100-80gb": 989.0, "h100-80gb-mega": 989.0, "l4": 121.0}


# GCP's shared-core machines that the specs file lists at one vCPU: the share of a core they
# sustain (GCP's machine-type docs; e2-micro, -small and -medium are listed at theirs already)
GCP_SHARED_CORE = {"f1-micro": 0.2, "g1-small": 0.5}


def gcp_prices(path: Path) -> dict[str, pd.DataFrame]:
    """A ``gcp_compute_price_changes_<year>.csv.gz`` -> spot-prices (spot changes) and, with
    ``gcp_instance_specs_latest.csv`` beside it, the catalog at the last snapshot."""
    f = _read(path, ["snapshot_utc", "region", "instance_type", "hour", "hour_spot", "month", "month_1y", "month_3y"])
    for col in ("hour", "hour_spot", "month", "month_1y", "month_3y"):
        f[col] = _num(f[col])
    # a price of 0 is a placeholder in the pricing file (no SKU yet), not a free machine
    for col in ("hour", "hour_spot"):
        if (f[col] < 0).any():
            raise _bad(f[col], f[col] < 0, "negative price")
    spot = f[f["hour_spot"] > 0]
    out = {"spot-prices": pd.DataFrame({
        "ts": _iso(spot["snapshot_utc"]), "provider": "gcp", "region": spot["region"],
        "zone": spot["region"], "instance_type": spot["instance_type"], "product": "Linux",
        "price": spot["hour_spot"],
    })}
    specs_path = path.parent / "gcp_instance_specs_latest.csv"
    if not specs_path.is_file():
        log.warning("%s: no %s beside it: spot prices only, no catalog", path, specs_path.name)
    else:
        specs = _sidecar_counts(specs_path, read_sidecar(specs_path, ["instance_type", "cpu", "ram"]),
                                ["cpu", "ram", *GCP_GPU_COLUMNS])
        # a machine listed twice with other sizes, and priced here: which would the catalog take?
        # (an exact repeat, or one no price names, is harmless)
        specs = specs.drop_duplicates()
        twice = specs["instance_type"].duplicated() & specs["instance_type"].isin(f.loc[f["hour"] > 0, "instance_type"])
        if twice.any():
            shown = specs["instance_type"][twice].iloc[0]
            raise SidecarError(specs_path, f"{row_label(specs_path, int(twice[twice].index[0]))}, column "
                               f"'instance_type': {shown} listed twice, with other sizes")
        specs = specs.drop_duplicates("instance_type").set_index("instance_type")
        # each offer's newest priced snapshot, whole: a column's last non-empty value would pair one
        # snapshot's on-demand price with an older one's commitment; ordered by time, not by text
        # (the files mix offsets)
        priced = f[f["hour"] > 0]
        last = (priced.assign(_t=_iso(priced["snapshot_utc"])).sort_values("_t", kind="stable")
                .groupby(["instance_type", "region"]).tail(1).sort_values(["instance_type", "region"]))
        last = last[last["instance_type"].isin(specs.index)].reset_index(drop=True)
        s = specs.loc[last["instance_type"]]
        # shared-core machines the specs list as one whole vCPU: their sustained share instead
        shared = last["instance_type"].map(GCP_SHARED_CORE).to_numpy(dtype=float)
        s = s.assign(cpu=np.where(np.isfinite(shared), np.fmin(shared, s["cpu"].to_numpy(dtype=float)), s["cpu"]))
        per_model = s.reindex(columns=list(GCP_GPU_COLUMNS)).fillna(0)
        gpus = per_model.sum(axis=1).to_numpy()
        known = per_model.columns.isin(list(GCP_GPU_TFLOPS))
        tflops = (per_model * pd.Series(GCP_GPU_TFLOPS).reindex(per_model.columns)).sum(axis=1).to_numpy()
        # a machine with a GPU model of unknown TFLOPS has none (not a partial sum)
        tflops = np.where((per_model.loc[:, ~known] > 0).any(axis=1).to_numpy(), np.nan, tflops)
        hours_per_month = 730.0
        out["catalog"] = pd.DataFrame({
            "provider": "gcp", "region": last["region"].to_numpy(), "instance_type": last["instance_type"].to_numpy(),
            "location": "public", "resource": ["gpu" if g > 0 else "cpu" for g in gpus],
            "units": [g if g > 0 else c for g, c in zip(gpus, s["cpu"].fillna(0).to_numpy())],
            "vcpus": s["cpu"].to_numpy(), "memory_gb": s["ram"].to_numpy(), "on_demand_price": last["hour"].to_numpy(),
            "reserved_1y_price": _commitment(last["month_1y"], last["month"], hours_per_month),
            "reserved_3y_price": _commitment(last["month_3y"], last["month"], hours_per_month),
            "tflops": np.where(gpus > 0, tflops, np.nan),
            "_as_of": _iso(last["snapshot_utc"]).to_numpy(),  # across files the newest price wins (then dropped)
        })
        out["catalog"] = out["catalog"][out["catalog"]["units"] > 0]
    return out


def _commitment(committed: pd.Series, monthly: pd.Series, hours_per_month: float) -> np.ndarray:
    """A committed-use price per hour, only where it is below the sustained-use monthly price
    (where the file repeats that price, there is no commitment to buy)."""
    c = pd.to_numeric(committed, errors="coerce")
    real = (c > 0) & (c < pd.to_numeric(monthly, errors="coerce") - 1e-9)
    return (c / hours_per_month).round(6).where(real).to_numpy()


PDM_METRICS = ("volt", "rotate", "pressure", "vibration")


TELEMETRY_OUT = ["ts", "device_id", "node_id", "metric", "value"]


def _pdm_error_counters(f: pd.DataFrame, errors: pd.DataFrame) -> pd.DataFrame:
    """Each error type of ``PdM_errors.csv`` as a counter metric (``error1`` ...: that
    machine's errors of the type since the error log began) at every telemetry hour of the
    machine: the contract's way to hold an error log, read by the fault predictor as events,
    as ECC and Xid counters are (a metric named ``error...`` is an event counter). Counted from
    the log's start, not the telemetry's, so slices of one history, split or overlapping in
    time, give the same counter at the same hour."""
    errors = errors.assign(_t=pd.to_datetime(errors["datetime"]))
    parts = []
    by_machine = dict(tuple(f.groupby("machineID", sort=False)["datetime"]))
    # machines in number order where their ids are numbers (ids are text: 2 before 10)
    for machine in sorted(by_machine, key=lambda m: (0, int(m), "") if m.isdigit() else (1, 0, m)):
        hours = by_machine[machine]
        t = pd.to_datetime(hours).to_numpy(dtype="datetime64[ns]")
        mine = errors[errors["machineID"] == machine]
        for kind, g in mine.groupby(mine["errorID"].astype(str), sort=True):
            at = np.sort(g["_t"].to_numpy(dtype="datetime64[ns]"))
            count = np.searchsorted(at, t, side="right")
            parts.append(pd.DataFrame({"ts": hours.to_numpy(), "device_id": f"machine{machine}",
                                       "node_id": f"machine{machine}", "metric": kind, "value": count.astype(float)}))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=TELEMETRY_OUT)


def azure_pdm(path: Path) -> dict[str, pd.DataFrame]:
    """PdM telemetry (wide, hourly) -> telemetry; ``PdM_errors.csv`` beside it -> an error
    counter per type in that telemetry; ``PdM_failures.csv`` beside it -> failures (each
    limited to the machines and span of the telemetry)."""
    f = _read(path, ["datetime", "machineID", *PDM_METRICS], dtype={"machineID": str})
    f["datetime"] = _iso(f["datetime"])  # before the melt, so an error names the file's line
    f["machineID"] = _ids(f["machineID"])
    long = f.melt(id_vars=["datetime", "machineID"], value_vars=list(PDM_METRICS), var_name="metric")
    telemetry = pd.DataFrame({
        "ts": long["datetime"], "device_id": "machine" + long["machineID"].astype(str),
        "node_id": "machine" + long["machineID"].astype(str), "metric": long["metric"], "value": long["value"],
    })
    err_path = path.parent / "PdM_errors.csv"
    if err_path.is_file():
        errors = read_sidecar(err_path, ["datetime", "machineID", "errorID"], dtype={"machineID": str, "errorID": str})
        counters = _pdm_error_counters(f, errors.assign(datetime=_sidecar_iso(err_path, errors["datetime"]),
                                                        machineID=_sidecar_ids(err_path, errors["machineID"]),
                                                        errorID=_sidecar_ids(err_path, errors["errorID"])))
        log.warning("%s: %d error counter reading(s) of %s added to the telemetry (metrics %s)", path, len(counters),
                    err_path.name, ", ".join(sorted(counters["metric"].unique())) or "none")
        telemetry = pd.concat([telemetry, counters], ignore_index=True)
    else:
        log.warning("%s: no %s beside it: the telemetry has no error counters", path, err_path.name)
    out = {"telemetry": telemetry}
    fail_path = path.parent / "PdM_failures.csv"
    if not fail_path.is_file():
        log.warning("%s: no %s beside it: no failures written", path, fail_path.name)
    else:
        fails = read_sidecar(fail_path, ["datetime", "machineID", "failure"], dtype={"machineID": str})
        fails["datetime"] = _sidecar_iso(fail_path, fails["datetime"])  # an error names that file's line
        fails["machineID"] = _sidecar_ids(fail_path, fails["machineID"])
        t = pd.to_datetime(fails["datetime"])
        span = pd.to_datetime(f["datetime"])
        keep = fails["machineID"].isin(f["machineID"].unique()) & (t >= span.min()) & (t <= span.max() + pd.Timedelta(hours=1))
        fails = fails[keep]
        out["failures"] = pd.DataFrame({
            "ts": fails["datetime"], "device_id": "machine" + fails["machineID"].astype(str),
            "node_id": "machine" + fails["machineID"].astype(str), "failure_type": fails["failure"],
        })
    return out


def titan(path: Path) -> dict[str, pd.DataFrame]:
    """Titan ``gc_full.csv.gz`` (one row per GPU placement) -> failures: each removal whose
    event is a double-bit error (dbe) or off-the-bus (otb)."""
    f = _read(path, ["SN", "event", "remove", "location"], dtype={"SN": str})
    event = f["event"].fillna("").astype(str).str.lower()  # a slice with no event reads as all-empty floats
    ev = f[event.isin(["dbe", "otb"])]
    if "insert" in ev.columns:  # a removal before its install is no failure time (hazard rejects it too)
        inserted = pd.to_datetime(parse_like_ingest(ev["insert"], as_text=True))  # (none known: NaT, passes)
        before = pd.to_datetime(_iso(ev["remove"])) < inserted
        if before.any():
            raise _bad(ev["remove"], before, "removed before it was inserted")
    return {"failures": pd.DataFrame({
        "ts": _iso(ev["remove"]), "device_id": ev["SN"], "node_id": ev["location"],
        "failure_type": event[ev.index],
    })}


def nab(path: Path) -> dict[str, pd.DataFrame]:
    """A NAB ``realAWSCloudwatch`` series (timestamp, value in CPU percent) -> utilization
    of one instance in cores (capacity 1), in a pool of its own: the NAB instances are
    unrelated and cover different weeks, so summing them would make no series."""
    f = _read(path, ["timestamp", "value"])
    f["value"] = _num(f["value"])
    name = nab_name(path.name)
    above = int((f["value"] > 100).sum())
    if above:
        log.warning("%s: %d reading(s) above 100%% CPU clipped to 100%%", path, above)
    return {"utilization": pd.DataFrame({
        "ts": _iso(f["timestamp"]), "cluster": "nab", "pool": name, "node_id": name,
        "resource": "cpu", "used": (f["value"] / 100).clip(upper=1.0).round(6), "capacity": 1.0,
    })}


# Dense FP16/BF16 tensor TFLOPS per GPU of the Alibaba models (NVIDIA datasheets; H800 and A800
# are the export variants of H100 SXM and A100 SXM, same compute). The anonymised
# "GPU-series-N" models are unknown: left without, so not compared.
ALIBABA_GPU_TFLOPS = {"A10": 125.0, "A100-SXM4-80GB": 312.0, "A800-SXM4-80GB": 312.0, "H800": 989.0}


def alibaba_nodes(path: Path) -> dict[str, pd.DataFrame]:
    """Alibaba GPU node inventory -> private catalog offers, one per (gpu_model, gpus, cpus),
    with TFLOPS per machine where the GPU model is known (``ALIBABA_GPU_TFLOPS``)."""
    f = _read(path, ["gpu_model", "gpu_capacity_num", "cpu_num"], dtype={"gpu_model": str})
    f["gpu_model"] = _ids(f["gpu_model"])
    for col in ("gpu_capacity_num", "cpu_num"):  # whole counts, written as integers ("126", not "126.0")
        n = _num(f[col])
        bad = n.isna() | (n != n.round()) | (n < 1) | (n > 100_000)  # (1e20 wrapped to a negative int64)
        if bad.any():
            shown = f[col][bad].iloc[0]
            what = ("missing count" if pd.isna(shown) else f"{str(shown)[:40]!r} is not a whole count of at least 1"
                    + (" and at most 100000" if n[bad].iloc[0] > 1 else ""))
            raise _bad(f[col], bad, what)
        f[col] = n.astype("int64")
    g = f.groupby(["gpu_model", "gpu_capacity_num", "cpu_num"]).size().reset_index(name="nodes")
    return {"catalog": pd.DataFrame({
        "provider": "alibaba-fleet", "region": "private",
        "instance_type": g["gpu_model"] + "-" + g["gpu_capacity_num"].astype(str) + "g-" + g["cpu_num"].astype(str) + "c",
        "location": "private", "resource": "gpu", "units": g["gpu_capacity_num"], "vcpus": g["cpu_num"],
        "memory_gb": None, "on_demand_price": None, "reserved_1y_price": None, "reserved_3y_price": None,
        "tflops": (g["gpu_model"].map(ALIBABA_GPU_TFLOPS) * g["gpu_capacity_num"]).to_numpy(),
    })}


CONVERTERS: dict[str, Callable[[Path], dict[str, pd.DataFrame]]] = {
    "bitbrains-hourly": bitbrains_hourly,
    "bitbrains-cluster": bitbrains_cluster,
    "aws-spot": aws_spot,
    "aws-on-demand": aws_on_demand,
    "gcp-prices": gcp_prices,
    "azure-pdm": azure_pdm,
    "titan": titan,
    "nab": nab,
    "alibaba-nodes": alibaba_nodes,
}


def nab_name(file_name: str) -> str:
    """A NAB series' name from its file's: without folders, ``.gz`` and ``.csv`` (a gzipped copy
    is the same series, and the windows file names it so)."""
    name = Path(file_name).name
    for suffix in (".gz", ".csv"):
        name = name.removesuffix(suffix)
    return name


def nab_windows(path: Path) -> dict[str, list[list[str]]]:
    """NAB ``combined_windows.json`` keyed by series name (the node_id ``nab`` gives)."""
    doc = json.loads(path.read_text())
    return {nab_name(k): v for k, v in doc.items()}
