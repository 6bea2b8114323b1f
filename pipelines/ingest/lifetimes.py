"""Device lifetimes: a file of lives in, ``device_id, install, remove, failed, failure_type`` out.

Two shapes are read:

* the contract ``device_id, install, remove, failed[, failure_type]``: ``failed`` is
  1/0, true/false or yes/no; an empty ``remove`` is a device still in service (censored at
  the file's last timestamp); a failure with no type is ``failure``;
* Titan's ``gc_full.csv`` (OLCF TitanGPULife): ``SN, location, insert, remove, duration,
  out, event``; ``SN`` becomes ``device_id`` (as text: leading zeros kept) and a non-empty
  ``event`` (``DBE``, ``OTB``) a failure of that type. Its times have no offset and are
  read as written.

A bad file (missing columns, an unparseable timestamp or flag) is an :class:`InputError`
naming the file, line and column. Rows that are well-formed but cannot be a life are kept
aside as rejects with a reason, never silently dropped: no install time (Titan repeats an
event of the life before with an empty ``insert``), a remove before the install, or a life
that starts before the same device's previous one ended.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from pipelines.ingest.tables import InputError, read_table, row_label, row_numbers, to_utc_naive

TITAN = {"SN", "insert", "remove", "event"}
CONTRACT = ["device_id", "install", "remove", "failed"]
TRUE = {"1", "true", "t", "yes", "y", "1.0"}
FALSE = {"0", "false", "f", "no", "n", "0.0", ""}


def _flags(values: pd.Series, path: Path, column: str) -> np.ndarray:
    text = values.fillna("").astype(str).str.strip().str.lower()
    bad = ~text.isin(TRUE | FALSE)
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(f"{path}: {row_label(path, i)}, column {column!r}: {values.iloc[i]!r} is not a yes/no "
                         f"flag (1/0, true/false, yes/no) ({int(bad.sum())} such value(s))")
    return text.isin(TRUE).to_numpy()


def _times(values: pd.Series, path: Path, column: str, empty_ok: np.ndarray) -> pd.Series:
    """Timestamps; the empty cells where ``empty_ok`` are NaT, any other bad one an error."""
    blank = (values.isna() | (values.astype(str).str.strip() == "")).to_numpy() & empty_ok
    if blank.any():  # a stand-in where empty is allowed, so that an error still names its own line
        values = values.astype(object).where(~blank, "1970-01-01T00:00:00")
    return to_utc_naive(values, path, column).mask(blank)


def read_lifetimes(path: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(lives, rejects)``: lives ``device_id, install, remove, failed, failure_type, line``
    sorted by device and install; rejects ``line, device_id, reason``."""
    p = Path(path)
    f = read_table(p, text=("SN", "device_id", "event", "failure_type", "failed", "insert", "install", "remove"))
    line = row_numbers(p, len(f))
    if set(f.columns) >= TITAN:
        device, ins_col = f["SN"].astype(str).str.strip(), "insert"
        kind = f["event"].fillna("").astype(str).str.strip()
        failed = (kind != "").to_numpy()
    else:
        missing = [c for c in CONTRACT if c not in f.columns]
        if missing:
            raise InputError(f"{p}: missing column(s) {missing} (expected {','.join(CONTRACT)}[,failure_type] "
                             "or Titan's SN,insert,remove,event)")
        device, ins_col = f["device_id"].astype(str).str.strip(), "install"
        failed = _flags(f["failed"], p, "failed")
        kind = (f["failure_type"].fillna("").astype(str).str.strip() if "failure_type" in f.columns
                else pd.Series("", index=f.index))
        kind = kind.where(~failed | (kind != ""), "failure").where(failed, "")
    no_id = ((device == "") | f["SN" if ins_col == "insert" else "device_id"].isna()).to_numpy()
    if no_id.any():
        i = int(np.flatnonzero(no_id)[0])
        column = "SN" if ins_col == "insert" else "device_id"
        raise InputError(f"{p}: {row_label(p, i)}, column {column!r}: empty device id ({int(no_id.sum())} such "
                         "value(s))")
    install = _times(f[ins_col], p, ins_col, np.ones(len(f), bool))
    remove = _times(f["remove"], p, "remove", ~failed)  # only a failure must say when
    end = pd.concat([install, remove]).max()
    remove = remove.fillna(end)
    lives = pd.DataFrame({"device_id": device.to_numpy(), "install": install.to_numpy(), "remove": remove.to_numpy(),
                          "failed": failed, "failure_type": kind.to_numpy(), "line": line})
    lives = lives.drop_duplicates(["device_id", "install", "remove", "failed", "failure_type"])
    reason = pd.Series(None, index=lives.index, dtype=object)
    reason[lives["install"].isna()] = (f"no {ins_col} time (a repeated record of an event of an earlier life)"
                                       if ins_col == "insert" else f"no {ins_col} time")
    reason[reason.isna() & (lives["remove"] < lives["install"])] = "removed before it was installed"
    ok = lives[reason.isna()].sort_values(["device_id", "install", "remove"], kind="stable")
    prev_end = ok.groupby("device_id")["remove"].shift()
    # the running latest end, so that one long life overlapped by two short ones rejects both
    prev_end = prev_end.groupby(ok["device_id"]).cummax()
    overlap = ok.index[(ok["install"] < prev_end).to_numpy()]
    reason[overlap] = "starts before this device's previous life ended"
    rejects = pd.DataFrame({"line": lives.loc[reason.notna(), "line"].to_numpy(),
                            "device_id": lives.loc[reason.notna(), "device_id"].to_numpy(),
                            "reason": reason[reason.notna()].to_numpy()})
    good = lives[reason.isna()].sort_values(["device_id", "install"], kind="stable").reset_index(drop=True)
    if good.empty:
        raise InputError(f"{p}: no usable lives ({len(rejects)} row(s) rejected, such as line "
                         f"{rejects['line'].iloc[0]}: {rejects['reason'].iloc[0]})")
    return good, rejects.sort_values("line").reset_index(drop=True)
