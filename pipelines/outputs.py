"""Writing result files: atomically, so a failed run never leaves half a file behind."""
from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd


def write_atomic(path: str | Path, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp)`` on a temp file beside ``path``, then rename it into place."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def write_csv(frame: pd.DataFrame, path: str | Path) -> Path:
    """``frame`` as CSV, atomically."""
    return write_atomic(path, lambda tmp: frame.to_csv(tmp, index=False))


def write_parquet(frame: pd.DataFrame, path: str | Path) -> Path:
    """``frame`` as Parquet, atomically."""
    return write_atomic(path, lambda tmp: frame.to_parquet(tmp, index=False))


def write_text(text: str, path: str | Path) -> Path:
    """UTF-8 text, atomically."""
    return write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def report_metrics(metrics: pd.DataFrame, out: str | Path | None) -> None:
    """An evaluation command's result: to ``out`` when given, and always to stdout."""
    if out:
        write_csv(metrics, out)
    metrics.to_csv(sys.stdout, index=False, float_format="%.4g")
