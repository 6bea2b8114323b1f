"""Fixtures of the shell's tests."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.pipelines.alert_servers import Recorder


@pytest.fixture()
def server() -> Iterator[Recorder]:
    with Recorder() as r:
        yield r
