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


def test_an_output_this_user_cannot_write_stops_the_command_before_any_work(tmp_path: Path) -> None:
    """detect found an unwritable alert file only when delivering, after every model had
    trained, and run found an unwritable report folder after the whole pipeline: both now
    refuse at the start, in one line. As root, with the capabilities that override file
    modes dropped (setpriv); as anyone else, the modes alone."""
    import shutil
    import subprocess
    import sys

    from tests.pipelines.test_faults_env import headroom_env, made_warehouse, one_line

    db = made_warehouse(tmp_path)
    locked = tmp_path / "locked"
    locked.mkdir()
    kept = tmp_path / "alerts.jsonl"
    kept.write_text("")
    prefix: list[str] = []
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("root, and no setpriv to drop CAP_DAC_OVERRIDE")
        prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner"]
    hr = [*prefix, sys.executable, "-m", "pipelines.cli"]
    env = headroom_env(tmp_path)
    locked.chmod(0o555)
    kept.chmod(0o444)
    try:
        if os.access(locked, os.W_OK) and not prefix:
            pytest.skip("file modes do not deny this user")
        runs = {
            "folder": [*hr, "detect", "--db", str(db), "--jsonl", str(locked / "a.jsonl")],
            "file": [*hr, "detect", "--db", str(db), "--jsonl", str(kept)],
            "report": [*hr, "report", "--db", str(db), "--out", str(locked / "r")],
            "run": [*hr, "run", "--stages", "detect", "--db", str(db)],
        }
        done = {k: subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                                  env={**env, "HEADROOM_ALERT_JSONL": str(kept)} if k == "run" else env)
                for k, cmd in runs.items()}
    finally:
        locked.chmod(0o755)
        kept.chmod(0o644)
    why = "permission denied; nothing was written (what was there is unchanged): let this user write the file and " \
          "its folder (chmod, chown), or write elsewhere"
    for k, out in done.items():  # a sink setting that cannot work: 2; the report's folder, the machine: 1
        assert out.returncode == (1 if k == "report" else 2), (k, out.stderr)
    assert one_line(done["folder"].stderr) == f"headroom detect: error: alert JSONL path {locked}/a.jsonl: {why}"
    assert one_line(done["file"].stderr) == f"headroom detect: error: alert JSONL path {kept}: {why}"
    assert one_line(done["report"].stderr) == f"headroom report: error: {locked}/r/report.html: {why}"
    assert one_line(done["run"].stderr).startswith("headroom run: error: alert sink setting")
    assert not list(locked.iterdir()) and kept.read_text() == ""


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_between_two_renames_leaves_the_old_set(tmp_path: Path, monkeypatch, interrupt) -> None:
    """SIGTERM (SystemExit here) or Ctrl-C after 2 of 4 files were renamed in: the report
    folder held new CSVs beside the old HTML. The renamed ones are put back; one that did not
    exist before is gone again; no temp file is left."""
    from pipelines.runtime.outputs import write_set

    old = {n: f"old {n}\n" for n in ("a.csv", "b.csv", "d.html")}
    for name, text in old.items():
        (tmp_path / name).write_text(text)
    renames, real = [0], Path.replace

    def replace(self: Path, target):
        renames[0] += 1
        if renames[0] == 3 and ".tmp" in self.name and not self.name.endswith(".was.tmp"):
            raise interrupt()
        return real(self, target)

    monkeypatch.setattr(Path, "replace", replace)
    writes = {tmp_path / n: (lambda text: lambda tmp: tmp.write_text(text))(f"new {n}\n")
              for n in ("a.csv", "c.csv", "b.csv", "d.html")}
    with pytest.raises(interrupt):
        write_set(writes)
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == old
    monkeypatch.setattr(Path, "replace", real)
    write_set(writes)
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {p.name: f"new {p.name}\n" for p in writes}


def test_a_sibling_files_temp_is_not_taken_for_a_dead_writers(tmp_path: Path) -> None:
    """Writing ``data`` cleans up ``.data.<pid>.tmp`` of dead writers; ``.data.2026.csv.<pid>.tmp``,
    a live temp of ``data.2026.csv``, parsed as pid 2026 and was deleted."""
    sibling = tmp_path / f".data.2026.csv.{os.getpid()}.tmp"
    sibling.write_text("being written")
    dead = tmp_path / ".data.999999999.tmp"
    dead.write_text("left by a killed writer")
    write_text("x", tmp_path / "data")
    assert sibling.exists() and not dead.exists()
