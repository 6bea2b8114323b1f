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
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)


# the signals a command stops on as on Ctrl-C: SIGTERM (kill, timeout, systemd) and SIGHUP (the
# terminal or ssh session closed; the API, in a session of its own, never hears that one)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)

# run before uvicorn (exec'd in its place): the kernel sends it SIGTERM when our main thread
# dies, so a headroom killed with SIGKILL leaves no API behind
_DIE_WITH_PARENT = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None).prctl(1, signal.SIGTERM)\n"  # PR_SET_PDEATHSIG
    "if os.getppid() != int(sys.argv[1]): sys.exit(0)\n"  # the parent died before that line
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within it, SIGTERM and SIGHUP raise KeyboardInterrupt in the main thread, as Ctrl-C does."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.signal(s, _interrupt) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


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
        for s in STOP_SIGNALS:
            signal.signal(s, _interrupt)

    for s in (signal.SIGINT, *STOP_SIGNALS):
        signal.signal(s, first)


def ignore_late_signals() -> None:
    """Registered before anything else, so run last at exit, once every other exit handler
    (Prefect's API stop) is done: a signal in the interpreter's final teardown would kill a
    process whose work is over (exit 130, no word); it is ignored (Python leaves an ignored
    signal ignored through its teardown)."""
    if threading.current_thread() is threading.main_thread():
        for s in (signal.SIGINT, *STOP_SIGNALS):
            signal.signal(s, signal.SIG_IGN)


def isolate_ephemeral_api() -> None:
    """Start Prefect's ephemeral API server, when one is started, in a session of its own, and
    on Linux, when the main thread starts it, so that it ends when this process does, however
    it ends (``_DIE_WITH_PARENT``; the kernel ties it to the thread that started it, so a
    worker thread's start is left as it was). Leaves Prefect as it is when its internals are
    not the ones this knows (another 3.x)."""
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
            command = kwargs.get("args")
            if (sys.platform == "linux" and isinstance(command, list) and not args
                    and threading.current_thread() is threading.main_thread()):
                kwargs["args"] = [sys.executable, "-c", _DIE_WITH_PARENT, str(os.getpid()), *command]
            return popen(*args, **kwargs)

        subprocess.Popen = own_session  # only for this call: it spawns the one uvicorn process
        try:
            return start(self)
        finally:
            subprocess.Popen = popen

    run_in_own_session._own_session = True  # type: ignore[attr-defined]
    cls._run_uvicorn_command = run_in_own_session


def process_alive(pid: int) -> bool:
    """Whether a process of this machine with ``pid`` runs (another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # not ours to signal: it runs
        return True
    return True
