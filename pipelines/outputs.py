"""Writing result files: atomically, so a failed run never leaves half a file behind."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pandas as pd


def write_csv(frame: pd.DataFrame, path: str | Path) -> Path:
    """Write ``frame`` as CSV to a temp file beside ``path``, then rename it into place."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        frame.to_csv(tmp, index=False)
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def report_metrics(metrics: pd.DataFrame, out: str | Path | None) -> None:
    """An evaluation command's result: to ``out`` when given, and always to stdout."""
    if out:
        write_csv(metrics, out)
    metrics.to_csv(sys.stdout, index=False, float_format="%.4g")
