"""Model save/load to bytes (no files: the caller decides where bytes go)."""
from __future__ import annotations

import io
import pickle

from forecasters.base import BaseForecaster

MAGIC = b"HEADROOM-FORECASTER-1\n"


def dumps(model: BaseForecaster) -> bytes:
    """A fitted (or unfitted) forecaster as bytes."""
    return MAGIC + pickle.dumps(model, protocol=pickle.HIGHEST_PROTOCOL)


def loads(data: bytes) -> BaseForecaster:
    """The forecaster saved by :func:`dumps`. Only load bytes you wrote yourself:
    this is pickle, so it trusts its input."""
    if not data.startswith(MAGIC):
        raise ValueError("not a headroom forecaster artifact (bad header)")
    model = pickle.load(io.BytesIO(data[len(MAGIC):]))
    if not isinstance(model, BaseForecaster):
        raise ValueError(f"artifact holds {type(model).__name__}, not a forecaster")
    return model
