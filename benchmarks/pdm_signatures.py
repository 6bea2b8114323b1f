"""How far the Azure PdM data lets any fault model go: failure-like episodes with no failure.

    python benchmarks/pdm_signatures.py [--datasets ../shared/datasets] [--out bench-out/pdm_signatures.csv]

In the PdM simulation a failure is preceded by about two days of one sensor off its level
(volt, pressure or vibration up, rotate down) and by an error logged inside that drift. This
lists every such drift episode of every machine in the telemetry (the sensor's 24-hour mean,
in units of the machine's own standard deviation, above ``--enter`` for at least
``--min-hours`` and peaking above ``--peak``), whether the machine fails within ``--after``
of the episode's end, and the errors logged from a day before the episode to its end.

An episode with an error and no failure looks, to anything that reads sensors and error
logs, like the failures' own signature. A detector that catches every failure from that
signature also alerts on those episodes (overlapping ones of a machine counted once), so
its alert precision on these machines is about caught / (caught + such episodes), unless it
tells them apart by something else: which error kinds go with which sensor, or when in the
drift the error comes. It is an estimate, not a bound: the scorer counts an alert per device
and horizon, so a two-day look-alike may cost two alerts and a failure earn several. The thresholds only describe
the data; nothing here is fitted or scored against the fault model.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.public_files import union_csv  # noqa: E402

PDM = "azure-pdm-telemetry"
# the direction each sensor drifts before a failure, as seen in the PdM data
DRIFT = {"volt": 1, "rotate": -1, "pressure": 1, "vibration": 1}


def episodes(telemetry: pd.DataFrame, enter: float, peak: float, min_hours: float) -> pd.DataFrame:
    """``machineID, sensor, start, end, peak_z`` of each drift episode (the 24-hour mean's z
    above ``enter``)."""
    rows = []
    for machine, g in telemetry.groupby("machineID"):
        g = g.set_index("datetime").sort_index()
        for sensor, sign in DRIFT.items():
            x = g[sensor]
            # three quarters of the day's readings make a mean: a missing hour splits no episode
            z = (sign * (x - x.median()) / x.std()).rolling("24h", min_periods=18).mean()
            hot = z > enter
            run = (hot != hot.shift()).cumsum()
            for _, h in hot[hot].groupby(run[hot]):
                start, end = h.index.min(), h.index.max()
                top = float(z[start:end].max())
                if end - start >= pd.Timedelta(hours=min_hours) and top >= peak:
                    rows.append({"machineID": machine, "sensor": sensor, "start": start, "end": end, "peak_z": top})
    return pd.DataFrame(rows, columns=["machineID", "sensor", "start", "end", "peak_z"])


def _merged(found: pd.DataFrame) -> list[tuple[object, pd.Timestamp, pd.Timestamp]]:
    """Episodes of one machine that overlap in time (two sensors drifting at once) as one:
    ``(machineID, start, end)``; a detector alerts on the machine, not on the sensor."""
    out: list[tuple[object, pd.Timestamp, pd.Timestamp]] = []
    for machine, g in found.sort_values(["machineID", "start"]).groupby("machineID", sort=False):
        for r in g.itertuples():
            if out and out[-1][0] == machine and r.start <= out[-1][2]:
                out[-1] = (machine, out[-1][1], max(out[-1][2], r.end))
            else:
                out.append((machine, r.start, r.end))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default=os.environ.get("HEADROOM_DATASETS", str(ROOT.parent / "shared" / "datasets")))
    ap.add_argument("--enter", type=float, default=0.9, help="24-hour mean z that starts an episode")
    ap.add_argument("--peak", type=float, default=1.2, help="least peak z of an episode")
    ap.add_argument("--min-hours", type=float, default=12.0, help="least length of an episode")
    ap.add_argument("--after", default="30h", help="a failure this soon after the episode's end is its own")
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out" / "pdm_signatures.csv")
    args = ap.parse_args(argv)
    root = Path(args.datasets) / PDM
    if not root.is_dir():
        ap.error(f"no {PDM} under {args.datasets}: pass --datasets or set HEADROOM_DATASETS")
    telemetry, _ = union_csv(root, "PdM_telemetry*.csv*", ["machineID"], "datetime")
    telemetry["datetime"] = telemetry["datetime"].dt.tz_localize(None)  # PdM's times are zone-less
    first, last = telemetry["datetime"].min(), telemetry["datetime"].max()
    machines = set(telemetry["machineID"])
    failures = pd.read_csv(root / "PdM_failures.csv")
    errors = pd.read_csv(root / "PdM_errors.csv")
    for t in (failures, errors):
        t["datetime"] = pd.to_datetime(t["datetime"], format="mixed")
    failures = failures[failures["machineID"].isin(machines) & failures["datetime"].between(first, last)]
    events = failures.drop_duplicates(["machineID", "datetime"])
    after = pd.Timedelta(args.after)
    table = episodes(telemetry, args.enter, args.peak, args.min_hours)
    fails, errs, covered = [], [], set()
    for r in table.itertuples():
        f = events[(events["machineID"] == r.machineID) & (events["datetime"] >= r.start)
                   & (events["datetime"] <= r.end + after)]
        e = errors[(errors["machineID"] == r.machineID) & (errors["datetime"] >= r.start - pd.Timedelta("24h"))
                   & (errors["datetime"] <= r.end)]
        fails.append(", ".join(f["datetime"].dt.strftime("%Y-%m-%d %H:%M")))
        errs.append(" ".join(e["errorID"] + "@" + e["datetime"].dt.strftime("%m-%d %H:%M")))
        if len(e):
            covered.update((r.machineID, t) for t in f["datetime"])
    table["failure"], table["errors"] = fails, errs
    args.out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out, index=False)
    with pd.option_context("display.width", 200, "display.max_colwidth", 60, "display.max_rows", 500):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    with_error = table["errors"] != ""
    lookalikes = _merged(table[with_error & (table["failure"] == "")])
    n = len(events)
    print(f"\n{len(machines)} machines, {first} to {last}: {n} failure events, {len(table)} drift episodes, "
          f"{(table['failure'] != '').sum()} of them followed by a failure")
    print(f"episodes with an error: {int(with_error.sum())}; they cover {len(covered)} of the {n} failure events, "
          f"and {len(lookalikes)} are followed by none")
    if covered:
        k = len(covered)
        print(f"precision of a detector that catches those {k} failures from this signature, alerting once "
              f"on each look-alike: {k} / ({k} + {len(lookalikes)}) = {k / (k + len(lookalikes)):.3f}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
