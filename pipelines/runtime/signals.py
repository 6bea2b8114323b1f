"""How a command stops when it is told to: Ctrl-C at a terminal, or SIGTERM (``kill``,
``timeout``, systemd).

Prefect's ephemeral API runs as a child process in our process group. A Ctrl-C (SIGINT to
the whole group) killed it with us; the flow's crash handler then retried against the dead
API for over a minute and ended in a long traceback. Started in a session of its own, the
API lives until we stop it: the flow reports its crash at once and the API is stopped on
exit. SIGTERM is taken as Ctrl-C, so Python's exit handlers run and stop the API too (the
default SIGTERM ends the process at once and left the API running, orphaned).
"""
from __future__ import annotations

import logging
import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within it, SIGTERM raises KeyboardInterrupt in the main thread, as Ctrl-C does."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def is_interrupt(exc: BaseException) -> bool:
    """Ctrl-C inside a DuckDB query: its InterruptException, or through a worker thread a
    RuntimeError "Query interrupted", or an error raised while handling either (a cleanup
    in an aborted transaction)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if type(exc).__name__ == "InterruptException" or "Query interrupted" in str(exc):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def quiet_shutdown() -> None:
    """Once a command's work is done and its process is about to exit (Prefect stops its
    ephemeral API then): a first Ctrl-C or SIGTERM is let pass, as the work is done and the
    stop takes a moment (it printed an exit handler's traceback, or made a finished command
    exit 130); a second one stops at once."""
    if threading.current_thread() is not threading.main_thread():
        return

    def first(signum: int, frame: object) -> None:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, _interrupt)

    signal.signal(signal.SIGINT, first)
    signal.signal(signal.SIGTERM, first)


def ignore_late_signals() -> None:
    """Registered before anything else, so run last at exit, once every other exit handler
    (Prefect's API stop) is done: a signal in the interpreter's final teardown would kill a
    process whose work is over (exit 130, no word); it is ignored (Python leaves an ignored
    signal ignored through its teardown)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def isolate_ephemeral_api() -> None:
    """Start Prefect's ephemeral API server, when one is started, in a session of its own.
    Leaves Prefect as it is when its internals are not the ones this knows (another 3.x)."""
    try:
        from prefect.server.api import server
    except ImportError:  # pragma: no cover - prefect is a core dependency
        return
    cls = getattr(server, "SubprocessASGIServer", None)
    start = getattr(cls, "_run_uvicorn_command", None)
    if start is None or getattr(start, "_own_session", False) or getattr(server, "subprocess", None) is not subprocess:
        return

    def run_in_own_session(self: object) -> subprocess.Popen:
        popen = subprocess.Popen

        def own_session(*args: object, **kwargs: object) -> subprocess.Popen:
            kwargs.setdefault("start_new_session", True)
            return popen(*args, **kwargs)

        subprocess.Popen = own_session  # only for this call: it spawns the one uvicorn process
        try:
            return start(self)
        finally:
            subprocess.Popen = popen

    run_in_own_session._own_session = True  # type: ignore[attr-defined]
    cls._run_uvicorn_command = run_in_own_session
