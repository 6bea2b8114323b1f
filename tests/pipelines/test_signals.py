"""Stopping a command: Ctrl-C (SIGINT to the process group) or SIGTERM ends it at once with
one line, and leaves no Prefect API server behind."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines.runtime.signals import terminate_as_interrupt


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_is_an_interrupt_only_inside_the_block(sig: signal.Signals) -> None:
    """SIGHUP (a closed ssh session) too: from there on it is Ctrl-C, which the run test below
    follows to the end for SIGINT and SIGTERM (SIGHUP left the Prefect API running)."""
    before = signal.getsignal(sig)
    with pytest.raises(KeyboardInterrupt), terminate_as_interrupt():
        os.kill(os.getpid(), sig)
        time.sleep(5)  # the handler raises before this ends
    assert signal.getsignal(sig) is before


def _api_servers(home: Path) -> set[int]:
    """Prefect API servers started with ``PREFECT_HOME=home``: this test's, not another
    session's running beside it."""
    out = subprocess.run(["pgrep", "-f", "prefect.server.api.server:create_app"], capture_output=True, text=True)
    mine = set()
    for pid in map(int, out.stdout.split()):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if f"PREFECT_HOME={home}".encode() in environ:
            mine.add(pid)
    return mine


@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGTERM])
def test_at_exit_a_first_signal_is_let_pass_and_a_second_stops(second: signal.Signals) -> None:
    """After the command, while Prefect's API stops: the work is done, so one Ctrl-C or SIGTERM
    must not print a traceback or turn a finished command into a failure; two still stop it."""
    code = ("import os, signal, time\nfrom pipelines.runtime.signals import quiet_shutdown\nquiet_shutdown()\n"
            "os.kill(os.getpid(), signal.SIGTERM)\ntime.sleep(0.2)\nprint('done', flush=True)\n"
            f"os.kill(os.getpid(), {int(second)})\ntime.sleep(0.2)\nprint('not reached')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.stdout == "done\n" and proc.returncode != 0 and "KeyboardInterrupt" in proc.stderr


def test_a_signal_in_the_last_teardown_leaves_a_finished_command_exit_0() -> None:
    code = ("import atexit, os, signal, time\nfrom pipelines.runtime.signals import ignore_late_signals\n"
            "atexit.register(lambda: (os.kill(os.getpid(), signal.SIGINT), os.kill(os.getpid(), signal.SIGTERM),"
            " time.sleep(0.2), print('after', flush=True)))\n"
            "atexit.register(ignore_late_signals)\n")  # at exit: ignore, then the signals
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "after\n", "")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_a_signal_to_the_group_stops_a_run_at_once(tmp_path: Path, sig: signal.Signals) -> None:
    """As a terminal's Ctrl-C, `timeout` or a closed ssh session does: the ephemeral API, in a
    session of its own, outlives the signal long enough for the flow to report its crash, then
    is stopped. (It used to die with us: a minute of retries, then a 100-line traceback.) After
    SIGKILL nothing of ours runs: the kernel stops the API (SIGHUP and SIGKILL left it running)."""
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "HEADROOM_DATA_DIR": str(tmp_path / "demo"), "HEADROOM_REPORT_DIR": str(tmp_path / "reports"),
           "PYTHONUNBUFFERED": "1"}
    env.pop("PREFECT_API_URL", None)  # the ephemeral API, as a user's shell has it
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "run", "--nodes", "6", "--days", "28",
                             "--stages", "train", "--db", str(tmp_path / "w.duckdb")], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    for line in proc.stdout:  # the ingest stage's summary: the train flow is starting
        if line.startswith("ingest ("):
            break
    assert proc.poll() is None and _api_servers(tmp_path / "prefect"), "no Prefect API, or the run ended early"
    time.sleep(3)  # into the train flow's backtests
    if sig == signal.SIGKILL:
        proc.kill()
        proc.communicate(timeout=60)
        deadline = time.monotonic() + 20
        while _api_servers(tmp_path / "prefect") and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not _api_servers(tmp_path / "prefect"), "the Prefect API outlived a killed headroom"
        return
    os.killpg(proc.pid, sig)
    sent = time.monotonic()
    _, err = proc.communicate(timeout=120)
    assert time.monotonic() - sent < 30, err[-2000:]
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "headroom run: interrupted", err[-2000:]
    time.sleep(1)
    assert not _api_servers(tmp_path / "prefect"), "the Prefect API was left running"


def test_a_failed_upsert_raises_its_own_error_not_the_cleanups() -> None:
    # an insert interrupted in a transaction aborts it; unregistering the frame then failed
    # with "Current transaction is aborted", which hid the interrupt (a traceback, exit 1)
    import duckdb
    import pandas as pd

    from pipelines.runtime.signals import is_interrupt
    from pipelines.store import warehouse

    con = duckdb.connect()
    con.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER NOT NULL)")
    with pytest.raises(duckdb.ConstraintException), warehouse.transaction(con):
        warehouse.upsert(con, "t", pd.DataFrame({"k": [1], "v": [None]}))
    assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 0
    try:
        try:
            raise RuntimeError("Query interrupted")
        except RuntimeError:
            raise duckdb.TransactionException("Current transaction is aborted (please ROLLBACK)") from None
    except duckdb.TransactionException as exc:
        assert is_interrupt(exc)  # the interrupt is found under what was raised while handling it
    assert not is_interrupt(ValueError("bad"))


def test_sigterm_while_a_command_starts_is_an_interrupt(monkeypatch, capsys) -> None:
    """In the seconds of imports before a command's own handling, SIGTERM ended it at once,
    exit 143 and no word, where Ctrl-C says it was interrupted."""
    from pipelines import cli

    build = cli.build_parser

    def slow_start():  # a signal while the command is still being set up
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises before this ends
        return build()

    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(cli, "build_parser", slow_start)
    assert cli.main(["status"]) == 130
    assert capsys.readouterr().err.strip() == "headroom: interrupted"
    assert signal.getsignal(signal.SIGTERM) is before
