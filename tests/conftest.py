"""Shared fixtures. Prefect's settings are pinned before anything imports prefect."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

_PREFECT_HOME = tempfile.mkdtemp(prefix="headroom-prefect-")
os.environ["PREFECT_HOME"] = _PREFECT_HOME
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.pop("HEADROOM_DB", None)

import prefect.main  # noqa: E402,F401
import pytest  # noqa: E402

from pipelines.store import warehouse

# prefect.main is imported above, before any test captures stderr: importing it sets up Prefect's
# logging, a console handler on the root logger bound to the stderr of that moment; bound to one
# test's capture, it wrote to a closed file in a later command's warning (a 111-line "Logging error")


@pytest.fixture(scope="session")
def prefect_harness():
    """One ephemeral Prefect API for the whole session (it takes ~15 s to start)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture()
def con():
    """A real, migrated, in-memory DuckDB warehouse."""
    c = warehouse.connect(":memory:")
    yield c
    c.close()


@pytest.fixture()
def db_path(tmp_path: Path) -> Path:
    """A fresh warehouse file path (not created yet)."""
    return tmp_path / "wh.duckdb"


@pytest.fixture(scope="session")
def datasets_dir() -> Path:
    """The public traces, when HEADROOM_DATASETS points at them; skips otherwise."""
    root = os.environ.get("HEADROOM_DATASETS")
    if not root or not Path(root).is_dir():
        pytest.skip("HEADROOM_DATASETS not set or missing")
    return Path(root)
