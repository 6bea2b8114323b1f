"""Scale-out on a real Dask cluster: a ``dask scheduler`` and two ``dask worker`` processes on
loopback, headroom pointed at the scheduler through its settings, forecasts equal to a local run."""
from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from pipelines.cli import main
from pipelines.store import warehouse

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
DASK = Path(sys.executable).with_name("dask")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real scheduler and two single-threaded worker processes; their address."""
    pytest.importorskip("prefect_dask")
    if not DASK.exists() and shutil.which("dask") is None:
        pytest.skip("no dask command (pip install 'headroom[dask]')")
    exe = str(DASK if DASK.exists() else shutil.which("dask"))
    address = f"tcp://127.0.0.1:{_free_port()}"
    logs = tmp_path_factory.mktemp("dask")
    files = contextlib.ExitStack()  # each process's log, for a failure's post-mortem
    procs = [subprocess.Popen([exe, "scheduler", "--host", "127.0.0.1", "--port", address.rsplit(":", 1)[1],
                               "--no-dashboard"], stdout=subprocess.DEVNULL,
                              stderr=files.enter_context(open(logs / "s.log", "w")))]  # noqa: SIM115 (closed by files)
    try:
        for i in range(2):
            procs.append(subprocess.Popen([exe, "worker", address, "--nthreads", "1", "--nworkers", "1",
                                           "--no-dashboard", "--name", f"w{i}"], stdout=subprocess.DEVNULL,
                                          stderr=files.enter_context(open(logs / f"w{i}.log", "w"))))  # noqa: SIM115
        from distributed import Client

        deadline = time.monotonic() + 120
        while True:
            try:
                with Client(address, timeout=10) as client:
                    client.wait_for_workers(2, timeout=60)
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        yield address
    finally:
        for p in procs[::-1]:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        files.close()


def _train(db: Path, monkeypatch: pytest.MonkeyPatch, address: str | None) -> pd.DataFrame:
    """``headroom train`` with the settings pointing at ``address`` (None: the local thread pool)."""
    if address is None:
        monkeypatch.delenv("HEADROOM_DASK_ADDRESS", raising=False)
        monkeypatch.setenv("HEADROOM_TASK_RUNNER", "thread")
    else:
        monkeypatch.delenv("HEADROOM_TASK_RUNNER", raising=False)
        monkeypatch.setenv("HEADROOM_DASK_ADDRESS", address)
    assert main(["train", "--db", str(db), "--models", "seasonal_naive,lgbm", "--windows", "1",
                 "--horizon", "12"]) == 0
    with warehouse.open_warehouse(db, read_only=True) as con:
        return warehouse.query(con, "SELECT unique_id, ds, model, mean, lo_80, hi_80, lo_95, hi_95 FROM forecasts "
                                    "ORDER BY unique_id, ds")


def test_train_on_a_real_dask_cluster_equals_the_local_run(prefect_harness, scheduler: str, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from distributed import Client

    from pipelines.synth.fleet import generate_fleet

    util = generate_fleet(nodes=4, days=10, seed=1)["utilization"]
    src = tmp_path / "u.csv"
    util.to_csv(src, index=False)
    out = {}
    for name, address in (("local", None), ("dask", scheduler)):
        db = tmp_path / f"{name}.duckdb"
        assert main(["ingest", "--kind", "utilization", "--db", str(db), str(src)]) == 0
        if address is not None:
            with Client(address, timeout=10) as client:
                done_before = client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.task_prefixes))
        out[name] = _train(db, monkeypatch, address)
        if address is not None:
            with Client(address, timeout=10) as client:  # the fits ran as tasks of this scheduler
                done_after = client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.task_prefixes))
            assert done_after > done_before
    assert len(out["local"]) == 8 * 12
    pd.testing.assert_frame_equal(out["dask"], out["local"])


def test_run_and_serve_fan_the_fits_out_as_the_settings_say(monkeypatch: pytest.MonkeyPatch) -> None:
    """`headroom run` and `serve` take their train flow from stage_flow: the settings' runner."""
    pytest.importorskip("prefect_dask")
    from pipelines.flows.run import stage_flow

    monkeypatch.setenv("HEADROOM_DASK_ADDRESS", "tcp://127.0.0.1:8786")
    runner = stage_flow("train").task_runner
    assert type(runner).__name__ == "DaskTaskRunner" and runner.address == "tcp://127.0.0.1:8786"
    monkeypatch.delenv("HEADROOM_DASK_ADDRESS")
    monkeypatch.setenv("HEADROOM_TASK_RUNNER", "thread")
    assert type(stage_flow("train").task_runner).__name__ == "ThreadPoolTaskRunner"
