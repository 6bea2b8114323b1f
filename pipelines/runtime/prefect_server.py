"""A local Prefect server for ``headroom serve`` when no ``PREFECT_API_URL`` is set.

Prefect's ephemeral API (what every other command uses) runs without the scheduler
service, so deployments served against it register but never get a scheduled run.
``headroom serve`` therefore starts ``prefect server start`` (API, scheduler and UI) on a
free local port, points itself at it, and stops it on exit. Its database lives in
``PREFECT_HOME`` as the ephemeral API's does, so run history carries over.
"""
from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import httpx

log = logging.getLogger(__name__)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def local_server(
    port: int | None = None, timeout_s: float = 180.0, env: Mapping[str, str] | None = None
) -> Iterator[str]:
    """Run a Prefect server with its scheduler and UI on 127.0.0.1; yield its API URL."""
    port = port or free_port()
    url = f"http://127.0.0.1:{port}/api"
    cmd = [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port),
           "--analytics-off", "--scheduler"]
    child_env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    # the UI asks the server where its API is: without this it is told the default port, 4200
    child_env["PREFECT_UI_API_URL"] = url
    # flow runs (with their task runs and logs) past the retention (90 days) are deleted: by
    # default Prefect keeps them all, and serve makes ~120 flow runs a day plus a task a file
    child_env.setdefault("PREFECT_SERVER_SERVICES_DB_VACUUM_ENABLED", "events,flow_runs")
    child_env.update(env or {})
    with tempfile.TemporaryFile(mode="w+") as out:
        proc = subprocess.Popen(cmd, env=child_env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                if proc.poll() is not None:
                    out.seek(0)
                    raise RuntimeError(f"the local Prefect server exited with {proc.returncode}:\n{out.read()[-2000:]}")
                try:
                    if httpx.get(f"{url}/health", timeout=2.0).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the local Prefect server did not answer on {url} within {timeout_s:.0f} s")
                time.sleep(0.5)
            log.info("local Prefect server (with scheduler) at %s", url)
            yield url
        finally:
            stop(proc)


def stop(proc: subprocess.Popen, grace_s: float = 20.0) -> None:
    """SIGTERM, then SIGKILL after ``grace_s``: a server that hangs on shutdown does not hang us."""
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=grace_s)


def answering_ui_url(timeout_s: float = 3.0) -> str | None:
    """The Prefect UI's URL (PREFECT_UI_URL, from PREFECT_API_URL) when its deployments page
    answers a browser there; None when it does not (a server started ``--no-ui``, or
    nothing listening)."""
    from prefect.settings import PREFECT_UI_URL

    ui = PREFECT_UI_URL.value()
    if not ui:
        return None
    try:  # the UI's pages answer HTML requests only: a plain GET of /deployments is a 404
        page = httpx.get(f"{ui}/deployments", headers={"accept": "text/html"}, timeout=timeout_s)
    except httpx.HTTPError:
        return None
    return ui if page.status_code == 200 and "<html" in page.text[:500].lower() else None
