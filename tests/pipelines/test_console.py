"""What a command's console shows: headroom's own warnings; the libraries' with -v only."""
from __future__ import annotations

import logging

from pipelines import cli


def _shown(name: str, level: int) -> bool:
    record = logging.LogRecord(name, level, __file__, 1, "Optimization terminated abnormally", None, None)
    assert cli._OWN_HANDLERS  # the console handler a command adds
    return all(handler.filter(record) for handler in cli._OWN_HANDLERS)


def test_prophets_warnings_need_v() -> None:
    import prophet  # noqa: F401  # its import sets its logger to INFO: after the command configured logging

    root = logging.getLogger()
    theirs, level = list(root.handlers), root.level  # pytest's: with them, basicConfig adds no handler
    for handler in theirs:
        root.removeHandler(handler)
    try:
        cli._configure_logging(logging.WARNING)
        assert not _shown("prophet.models", logging.WARNING)  # it recovers; this reached the console
        assert _shown("prophet.models", logging.ERROR) and _shown("pipelines.flows.train", logging.WARNING)
        cli._configure_logging(logging.INFO)
        assert _shown("prophet.models", logging.WARNING)
    finally:
        while cli._OWN_HANDLERS:
            root.removeHandler(cli._OWN_HANDLERS.pop())
        for handler in theirs:
            root.addHandler(handler)
        root.setLevel(level)  # -v set the root to INFO: the tests after this one would log at INFO
