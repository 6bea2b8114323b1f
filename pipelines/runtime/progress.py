"""Progress bars for long loops: shown on a terminal, silent when output is piped."""
from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def progress_bar(what: str, unit: str) -> Iterator[Callable[[int, int], None]]:
    """A ``(done, total)`` callback that draws a bar on stderr when it is a terminal."""
    if not sys.stderr.isatty():
        yield lambda done, total: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn(f"{what}"), BarColumn(), MofNCompleteColumn(), TextColumn(unit), TimeElapsedColumn(),
                  console=Console(file=sys.stderr), transient=True) as bar:
        task = bar.add_task(what, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


# who hears that a stage (or one ingested file) is done: the command that runs the pipeline
# prints it then; served runs have no listener and only log
_LISTENERS: list[Callable[[str, object, float], None]] = []


@contextmanager
def stage_listener(listener: Callable[[str, object, float], None]) -> Iterator[None]:
    """While open, ``listener(stage, result, seconds)`` is called as each stage finishes."""
    _LISTENERS.append(listener)
    try:
        yield
    finally:
        _LISTENERS.remove(listener)


def stage_done(stage: str, result: object, seconds: float) -> None:
    """Tell the listeners ``stage`` finished with ``result`` after ``seconds``."""
    for listener in list(_LISTENERS):
        listener(stage, result, seconds)
