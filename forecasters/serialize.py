"""Model save/load to bytes (no files: the caller decides where bytes go).

An artifact is a header line, the SHA-256 of the rest, and the pickled forecaster: a
truncated or altered artifact is refused before it is unpickled (an altered booster text
could load as wrong forecasts, or abort the process inside LightGBM). Artifacts written
before the digest (``HEADROOM-FORECASTER-1``) still load, unchecked."""
from __future__ import annotations

import hashlib
import io
import pickle

from forecasters.base import BaseForecaster

MAGIC_V1 = b"HEADROOM-FORECASTER-1\n"
MAGIC = b"HEADROOM-FORECASTER-2\n"
DIGEST_LEN = 64  # hex SHA-256, then a newline


def dumps(model: BaseForecaster) -> bytes:
    """A fitted (or unfitted) forecaster as bytes."""
    payload = pickle.dumps(model, protocol=pickle.HIGHEST_PROTOCOL)
    return MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload


def loads(data: bytes) -> BaseForecaster:
    """The forecaster saved by :func:`dumps`; a ValueError, in one line, for bytes that are
    not one, are cut short or altered, or hold a model this headroom does not know. Only
    load bytes you wrote yourself: this is pickle, so it trusts its input."""
    if data.startswith(MAGIC):
        head = len(MAGIC) + DIGEST_LEN + 1
        digest, payload = data[len(MAGIC):head - 1], data[head:]
        if data[head - 1:head] != b"\n" or hashlib.sha256(payload).hexdigest().encode() != digest:
            raise ValueError("corrupt or truncated forecaster artifact (its checksum does not match)")
    elif data.startswith(MAGIC_V1):
        payload = data[len(MAGIC_V1):]
    else:
        raise ValueError("not a headroom forecaster artifact (bad header)")
    try:
        model = pickle.load(io.BytesIO(payload))
    except (ModuleNotFoundError, AttributeError) as exc:  # a class renamed or removed since it was saved
        raise ValueError(f"forecaster artifact of a model this headroom does not have ({exc})") from exc
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError) as exc:
        raise ValueError(f"corrupt or truncated forecaster artifact ({type(exc).__name__}: {exc})") from exc
    if not isinstance(model, BaseForecaster):
        raise ValueError(f"artifact holds {type(model).__name__}, not a forecaster")
    return model
