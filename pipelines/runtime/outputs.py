"""Writing result files: atomically, so a failed run never leaves half a file behind."""
from __future__ import annotations

import contextlib
import errno
import glob
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from pipelines.runtime import faults
from pipelines.runtime.signals import process_alive


class OutputError(OSError):
    """A result file that cannot be written: the message names the path and why; ``code``
    is the exit status (2: the path given is wrong, 1: the environment, a full disk say)."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code

    @classmethod
    def of(cls, target: Path, exc: OSError) -> OutputError:
        """``exc``, met writing ``target``, in one line."""
        kind = faults.kind_of(exc)
        if kind is not None:
            return cls(faults.message(kind, exc, path=target), faults.ENVIRONMENT)
        return cls(f"{target}: cannot write ({exc.strerror or exc})")


def check_writable(path: str | Path, append: bool = False) -> Path:
    """Fail early, before any work, when a file cannot be written at ``path``: it is a
    folder, a device, pipe or socket, or its folder cannot be made or written to (``append``:
    a file there already, appended to in place, that cannot be written). A link is followed:
    the file it points to is the one written (a rename over the link would replace the link,
    and over ``/dev/null`` the device). Returns the path to write."""
    target = Path(path)
    if target.is_symlink():
        target = Path(os.path.realpath(target))
        if target.is_symlink():  # realpath stops at a loop
            raise OutputError(f"{path}: cannot write, it is a link that leads back to itself")
    if target.is_dir():
        raise OutputError(f"{target}: cannot write, it is a folder (give a file name)")
    if target.exists() and not target.is_file():
        raise OutputError(f"{target}: cannot write, it is not a regular file (a device, pipe or socket; "
                          "give a file name)")
    parent = next((p for p in (target.parent, *target.parent.parents) if p.exists()), Path("."))
    if not parent.is_dir():
        raise OutputError(f"{target}: cannot write, {parent} is a file, not a folder")
    denied = parent if not os.access(parent, os.W_OK | os.X_OK) else \
        target if append and target.exists() and not os.access(target, os.W_OK) else None
    if denied is not None:
        read_only = hasattr(os, "statvfs") and os.statvfs(denied).f_flag & os.ST_RDONLY
        code = errno.EROFS if read_only else errno.EACCES
        cause = OSError(code, os.strerror(code))
        raise OutputError(faults.message(faults.kind_of(cause), cause, path=target), faults.ENVIRONMENT)
    return target


def _remove_dead_temps(target: Path) -> None:
    """The temp files of ``target`` whose writer is gone (killed before it could clean up:
    SIGKILL, a power cut); a live writer's are left to it."""
    for old in target.parent.glob(f".{glob.escape(target.name)}.*.tmp"):
        pid = old.name[len(target.name) + 2:-len(".tmp")].removesuffix(".was")  # .NAME.PID.tmp, .NAME.PID.was.tmp
        if pid.isdigit() and int(pid) != os.getpid() and not process_alive(int(pid)):
            with contextlib.suppress(OSError):
                old.unlink()


def write_atomic(path: str | Path, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp)`` on a temp file beside ``path``, then rename it into place; a
    path that cannot be written is an :class:`OutputError` naming it."""
    return write_set({Path(path): write})[0]


def write_set(writes: dict[Path, Callable[[Path], object]], remove: tuple[Path, ...] = ()) -> list[Path]:
    """Write several files as one: every ``write(tmp)`` to a temp file beside its path
    first, and only when all are written are they renamed into place (and ``remove``
    deleted), so a failure (a full disk) leaves the old set whole, never new files beside
    old ones; so does an interrupt (SIGTERM, Ctrl-C) between two renames: the renamed ones
    are put back from a hard link to each old file. :class:`OutputError` names the file
    that could not be written."""
    done: list[tuple[Path, Path]] = []
    made: list[Path] = []  # folders this call created, deepest first: removed again on failure
    swapped: list[tuple[Path, Path | bool, Path]] = []  # (target, a link to its old file or whether it had one, tmp)
    committed = False
    try:
        for path, write in writes.items():
            target = check_writable(path)
            tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            _remove_dead_temps(target)
            done.append((tmp, target))
            try:
                missing = [p for p in (target.parent, *target.parent.parents) if not p.exists()]
                target.parent.mkdir(parents=True, exist_ok=True)
                made.extend(missing)
                write(tmp)
            except OSError as exc:
                raise OutputError.of(target, exc) from exc
        for tmp, target in done:
            try:
                swapped.append((target, _keep_old(target, tmp), tmp))
                tmp.replace(target)
            except OSError as exc:
                raise OutputError.of(target, exc) from exc
        committed = True  # every new file is in place: the set is the new one
        for old in remove:
            old.unlink(missing_ok=True)
    except BaseException:
        for target, was, tmp in [] if committed else reversed(swapped):
            with contextlib.suppress(OSError):  # the old set back: each old file, or none where none was
                if tmp.exists():  # not renamed yet: the target is still the old one
                    pass
                elif isinstance(was, Path):
                    was.replace(target)
                elif not was:  # there was none: the new one goes (True: no link could be made, it stays)
                    target.unlink(missing_ok=True)
        for _, was, _ in swapped:
            if isinstance(was, Path):
                was.unlink(missing_ok=True)
        for tmp, _ in done:
            tmp.unlink(missing_ok=True)
        for folder in made:
            with contextlib.suppress(OSError):  # not empty: something else is in it now
                folder.rmdir()
        raise
    for _, was, _ in swapped:
        if isinstance(was, Path):
            was.unlink(missing_ok=True)
    for tmp, _ in done:
        tmp.unlink(missing_ok=True)
    return [target for _, target in done]


def _keep_old(target: Path, tmp: Path) -> Path | bool:
    """A hard link to ``target``'s old file, taken before ``tmp`` replaces it, so an
    interrupted set can put it back; False when there is none, True when it has one but no
    link can be made (a file system without them: that file is not put back, rather than a
    copy failing a write that would succeed)."""
    if not target.exists():
        return False
    was = tmp.with_name(f"{tmp.name[:-len('.tmp')]}.was.tmp")
    try:
        was.unlink(missing_ok=True)
        os.link(target, was)
    except OSError:
        return True
    return was


def write_csv(frame: pd.DataFrame, path: str | Path) -> Path:
    """``frame`` as CSV, atomically."""
    return write_atomic(path, lambda tmp: frame.to_csv(tmp, index=False))


def write_parquet(frame: pd.DataFrame, path: str | Path) -> Path:
    """``frame`` as Parquet, atomically."""
    return write_atomic(path, lambda tmp: frame.to_parquet(tmp, index=False))


def write_text(text: str, path: str | Path) -> Path:
    """UTF-8 text, atomically."""
    return write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def report_metrics(metrics: pd.DataFrame, out: str | Path | None) -> None:
    """An evaluation command's result: to ``out`` when given, and always to stdout."""
    if out:
        write_csv(metrics, out)
    metrics.to_csv(sys.stdout, index=False, float_format="%.4g")
