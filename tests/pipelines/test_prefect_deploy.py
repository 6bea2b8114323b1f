"""``prefect.yaml``: ``prefect deploy --all`` against a real ``prefect server start`` on
loopback registers every deployment, and a worker runs one, headroom's log lines in its logs."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from pipelines.flows.deployments import SCHEDULES
from pipelines.runtime.prefect_server import free_port, stop
from pipelines.runtime.run_logs import EXTRA_LOGGERS

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]
PREFECT = [sys.executable, "-m", "prefect"]


def _declared() -> list[dict]:
    return yaml.safe_load((ROOT / "prefect.yaml").read_text())["deployments"]


def test_prefect_yaml_declares_what_serve_serves() -> None:
    declared = {d["name"]: d for d in _declared()}
    assert list(declared) == [s.name for s in SCHEDULES]
    for s in SCHEDULES:
        d = declared[s.name]
        assert d["entrypoint"] == s.entrypoint
        assert d["schedules"] == [{"cron": s.cron, "timezone": "UTC"}]  # the HEADROOM_SCHEDULE_TIMEZONE default
        assert d["work_pool"]["name"] == "headroom"
        assert d["work_pool"]["job_variables"]["env"]["PREFECT_LOGGING_EXTRA_LOGGERS"] == EXTRA_LOGGERS
        assert not any("db_path" in k or "dir" in k for k in d.get("parameters", {}))  # paths: the worker's settings


def _prefect(args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    done = subprocess.run([*PREFECT, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"prefect {' '.join(args)} exited {done.returncode}:\n{done.stdout[-3000:]}" \
                                 f"\n{done.stderr[-3000:]}"
    return done


def _wait_healthy(proc: subprocess.Popen, url: str, log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.skip(f"prefect server start exited {proc.returncode}: {log.read_text()[-500:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    pytest.skip(f"prefect server start did not answer {url}/health within {timeout_s:.0f} s")


def _post_ok(api: httpx.Client, path: str, tries: int = 5) -> dict:
    """POST and return the JSON body; a server error (its SQLite busy on a loaded machine) is
    tried again a few times, and a last failure names the status and body, not a KeyError."""
    for attempt in range(tries):
        resp = api.post(path, json={})
        if resp.status_code < 500 or attempt == tries - 1:
            break
        time.sleep(2)
    assert resp.is_success, f"POST {path}: {resp.status_code} {resp.text[:500]}"
    return resp.json()


@pytest.mark.slow
def test_prefect_deploy_all_registers_and_a_worker_runs_report(tmp_path: Path) -> None:
    from pipelines.store import warehouse

    port = free_port()
    url = f"http://127.0.0.1:{port}/api"
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "HEADROOM_"))}
    env = {**base, "PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    log = tmp_path / "server.log"
    with log.open("w") as out:
        server = subprocess.Popen([*PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port),
                                   "--no-ui", "--analytics-off"], cwd=tmp_path, env=env, stdout=out,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_healthy(server, url, log, timeout_s=120)
        client_env = {**env, "PREFECT_API_URL": url}
        _prefect(["work-pool", "create", "headroom", "--type", "process"], client_env, timeout=60)
        _prefect(["--no-prompt", "deploy", "--all"], client_env, timeout=120)

        from prefect.settings import PREFECT_API_URL, temporary_settings

        from pipelines.runtime.prefect_server import answering_ui_url

        with temporary_settings(updates={PREFECT_API_URL: url}):
            assert answering_ui_url() is None  # --no-ui: serve names no UI (Prefect's banner links a 404)
        api = httpx.Client(base_url=url, timeout=10.0)
        registered = {d["name"]: d for d in api.post("/deployments/filter", json={}).json()}
        assert set(registered) == {s.name for s in SCHEDULES}
        for s in SCHEDULES:
            d = registered[s.name]
            assert d["work_pool_name"] == "headroom" and d["entrypoint"] == s.entrypoint
            assert [(x["schedule"]["cron"], x["schedule"]["timezone"]) for x in d["schedules"]] == [(s.cron, "UTC")]
            assert d["pull_steps"] == [{"prefect.deployments.steps.set_working_directory": {"directory": str(ROOT)}}]

        # one for real: the report of an empty warehouse, the path from the worker's settings
        db = tmp_path / "wh.duckdb"
        warehouse.connect(str(db)).close()
        run = _post_ok(api, f"/deployments/{registered['report-daily']['id']}/create_flow_run")
        worker_env = {**client_env, "HEADROOM_DB": str(db), "HEADROOM_REPORT_DIR": str(tmp_path / "reports")}
        _prefect(["worker", "start", "--pool", "headroom", "--run-once"], worker_env, timeout=150)
        state = api.get(f"/flow_runs/{run['id']}").json()["state"]
        assert state["type"] == "COMPLETED", state
        assert (tmp_path / "reports" / "report.html").exists()
        logs = api.post("/logs/filter", json={"logs": {"flow_run_id": {"any_": [run["id"]]}}, "limit": 200}).json()
        ours = [entry for entry in logs if entry["name"].startswith("pipelines.")]
        assert any(entry["name"] == "pipelines.flows.report" and entry["message"].startswith("report: ")
                   for entry in ours), [(e["name"], e["message"][:80]) for e in logs]
    finally:
        stop(server)
