"""What a command's console shows: headroom's own warnings; the libraries' with -v only."""
from __future__ import annotations

import logging

from forecasters.prophet_model import quiet_stan
from pipelines import cli


def test_prophets_warnings_need_v() -> None:
    prophet = logging.getLogger("prophet")
    before = prophet.level
    try:
        cli._configure_logging(logging.WARNING)
        quiet_stan()  # each Prophet fit calls it: it must not lower the command's level again
        # "Optimization terminated abnormally. Falling back to Newton." reached the console
        assert not logging.getLogger("prophet.models").isEnabledFor(logging.WARNING)
        cli._configure_logging(logging.INFO)
        quiet_stan()
        assert logging.getLogger("prophet.models").isEnabledFor(logging.WARNING)
        assert not logging.getLogger("prophet.models").isEnabledFor(logging.INFO)  # its chatter, even with -v
    finally:
        prophet.setLevel(before)
        cli._configure_logging(logging.WARNING)
