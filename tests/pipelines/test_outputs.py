"""Result files: written whole or not at all, and never over what is not a file."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipelines.cli import main
from pipelines.runtime.outputs import OutputError, write_text
from tests.forecasters.conftest import make_panel


def test_a_link_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    real = tmp_path / "real.csv"
    real.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to(real)
    assert write_text("new\n", link) == real
    assert link.is_symlink() and real.read_text() == "new\n"
    loop = tmp_path / "loop.csv"
    loop.symlink_to(tmp_path / "back.csv")
    (tmp_path / "back.csv").symlink_to(loop)
    with pytest.raises(OutputError, match="loop.csv: cannot write, it is a link that leads back to itself"):
        write_text("x", loop)
    assert loop.is_symlink()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_pipe_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match="it is not a regular file") as exc:
        write_text("x", fifo)
    assert exc.value.code == 2 and fifo.is_fifo()
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_command_refuses_a_device_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # --out /dev/null once replaced the device with a file: a rename over it
    src = tmp_path / "series.csv"
    make_panel(length=24 * 10).to_csv(src, index=False)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    code = main(["backtest", "--input", str(src), "--horizon", "12", "--season-length", "24", "--freq", "h",
                 "--models", "seasonal_naive", "--out", str(fifo)])
    err = capsys.readouterr().err
    assert code == 2 and fifo.is_fifo()
    assert err.strip().endswith("it is not a regular file (a device, pipe or socket; give a file name)")
    assert len(err.strip().splitlines()) == 1


def test_temp_files_of_a_killed_writer_are_removed_by_the_next(tmp_path: Path) -> None:
    """A writer killed with SIGKILL cannot remove its temp file: reruns left them for good
    (110 MB of them after a killed generate); a live writer's are its own."""
    import subprocess

    dead = subprocess.Popen(["true"])
    dead.wait()
    target = tmp_path / "report.html"
    stale = tmp_path / f".report.html.{dead.pid}.tmp"
    live = tmp_path / f".report.html.{os.getppid()}.tmp"
    other = tmp_path / f".other.html.{dead.pid}.tmp"
    for p in (stale, live, other):
        p.write_text("half")
    write_text("<html></html>", target)
    assert target.read_text() == "<html></html>"
    assert not stale.exists() and live.exists() and other.exists()
