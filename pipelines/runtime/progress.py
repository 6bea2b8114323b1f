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
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn(f"{what}"), BarColumn(), MofNCompleteColumn(), TextColumn(unit), TimeElapsedColumn(),
                  transient=True) as bar:
        task = bar.add_task(what, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update
