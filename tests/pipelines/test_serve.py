"""``headroom serve``'s local Prefect server: unlike the ephemeral API it schedules runs."""
from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from pipelines.runtime.prefect_server import local_server

pytestmark = pytest.mark.timeout(300)


@pytest.mark.slow
def test_local_server_creates_scheduled_runs(tmp_path: Path) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from pipelines.flows.deployments import build_deployments
    from pipelines.runtime.prefect_server import answering_ui_url

    env = {"PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "2"}
    with local_server(env=env) as url, temporary_settings(updates={PREFECT_API_URL: url}):
        assert answering_ui_url() == url.removesuffix("/api")  # serve's UI line links a page that answers
        # old flow runs are vacuumed, not kept for ever
        vacuum = httpx.get(f"{url}/admin/settings").json()["server"]["services"]["db_vacuum"]
        assert set(vacuum["enabled"]) == {"events", "flow_runs"}
        detect = next(d for d in build_deployments(str(tmp_path / "wh.duckdb"), None)
                      if d.name.startswith("detect-15min-wh-"))
        dep_id = detect.apply()
        deadline, runs = time.monotonic() + 90, []
        with get_client(sync_client=True) as client:
            while not runs and time.monotonic() < deadline:
                runs = client.read_flow_runs(deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[dep_id])))
                time.sleep(1)
    assert runs, "the local server's scheduler created no run for the detect deployment"
    assert {r.state_type.value for r in runs} == {"SCHEDULED"}
    gaps = sorted(r.expected_start_time for r in runs)
    assert all((b - a).total_seconds() == 900 for a, b in zip(gaps, gaps[1:]))  # every 15 minutes


def test_local_server_reports_a_server_that_cannot_start(tmp_path: Path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with (pytest.raises(RuntimeError, match="local Prefect server"),
              local_server(port=port, timeout_s=60, env={"PREFECT_HOME": str(tmp_path / "p")})):
            pass


def test_serve_names_deployments_for_their_warehouse_and_checks_settings_first(tmp_path, monkeypatch, capsys):
    from pipelines.cli import main

    assert main(["serve", "--list", "--db", str(tmp_path / "a" / "wh.duckdb")]) == 0
    a = capsys.readouterr().out
    assert main(["serve", "--list", "--db", str(tmp_path / "b" / "wh.duckdb")]) == 0
    b = capsys.readouterr().out
    names_a = {line.split()[0].split("/")[1] for line in a.splitlines()}  # flow/deployment
    names_b = {line.split()[0].split("/")[1] for line in b.splitlines()}
    assert all(n.startswith(("train-daily-wh-", "detect-15min-wh-", "plan-daily-wh-", "report-daily-wh-",
                             "prune-daily-wh-")) for n in names_a)
    assert len(names_a) == 5 and not names_a & names_b  # two warehouses, two sets of deployments
    monkeypatch.setenv("HEADROOM_KEEP_DAYS", "3")  # the daily prune's: refused before anything is served
    assert main(["serve", "--list", "--db", str(tmp_path / "a" / "wh.duckdb")]) == 2
    assert "HEADROOM_KEEP_DAYS='3'" in capsys.readouterr().err
    monkeypatch.delenv("HEADROOM_KEEP_DAYS")
    monkeypatch.setenv("HEADROOM_ALERT_WEBHOOK", "hooks.example.com/services/T0/B0/XSECRETX")
    assert main(["serve", "--list", "--db", str(tmp_path / "a" / "wh.duckdb")]) == 2
    err = capsys.readouterr().err
    assert "must start with http" in err and "XSECRETX" not in err
    monkeypatch.delenv("HEADROOM_ALERT_WEBHOOK")
    assert main(["serve", "--list", "--db", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
    (tmp_path / "zero.duckdb").write_bytes(b"")  # no scheduled run could open it
    assert main(["serve", "--list", "--db", str(tmp_path / "zero.duckdb")]) == 2
    assert "is an empty file, not a DuckDB warehouse" in capsys.readouterr().err
    import duckdb

    with duckdb.connect(str(tmp_path / "theirs.duckdb")) as con:  # every scheduled run would refuse it
        con.execute("CREATE TABLE t (a INT)")
    assert main(["serve", "--list", "--db", str(tmp_path / "theirs.duckdb")]) == 2
    assert "a DuckDB database of something else (tables t)" in capsys.readouterr().err
    # Prefect refuses '&', '%', '<', '>' and '/' in a deployment's name: a traceback once
    assert main(["serve", "--list", "--db", str(tmp_path / "ops&cap%<x>.duckdb")]) == 0
    assert capsys.readouterr().out.split()[0].startswith("train/train-daily-ops_cap__x_-")


def test_serve_starts_while_another_process_writes_the_warehouse(tmp_path, capsys) -> None:
    """The check for another program's DuckDB file opened it read-only and waited for (then
    failed on) a writer's lock: a scheduler restarted during a long run did not start."""
    import subprocess
    import sys
    import time

    from pipelines.cli import main
    from pipelines.store import warehouse

    db = tmp_path / "wh.duckdb"
    with warehouse.open_warehouse(db):
        pass
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
                               "print('held', flush=True); time.sleep(60)", str(db)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        assert main(["serve", "--list", "--db", str(db)]) == 0
        assert time.monotonic() - started < 20  # not the 30 s lock wait
        assert "report-daily-wh-" in capsys.readouterr().out
    finally:
        holder.kill()
        holder.wait()


def test_serve_schedules_carry_the_time_zone_setting(tmp_path, monkeypatch, capsys) -> None:
    from pipelines.cli import main
    from pipelines.flows.deployments import build_deployments

    monkeypatch.setenv("HEADROOM_SCHEDULE_TIMEZONE", "Europe/Berlin")
    assert main(["serve", "--list", "--db", str(tmp_path / "wh.duckdb")]) == 0
    lines = capsys.readouterr().out.splitlines()
    # daily crons in the zone; every 15 minutes stays on UTC, where DST skips no run
    assert lines and {line.split()[0].split("/")[1].split("-")[0]: line.split()[-1] for line in lines} == {
        "train": "Europe/Berlin", "detect": "UTC", "plan": "Europe/Berlin", "report": "Europe/Berlin",
        "prune": "Europe/Berlin"}
    deployments = build_deployments(str(tmp_path / "wh.duckdb"), str(tmp_path), "Europe/Berlin")
    assert {d.name.split("-")[0]: d.schedules[0].schedule.timezone for d in deployments} == {
        "ingest": "UTC", "train": "Europe/Berlin", "detect": "UTC", "plan": "Europe/Berlin", "report": "Europe/Berlin",
        "prune": "Europe/Berlin"}
    assert {d.schedules[0].schedule.timezone for d in build_deployments(str(tmp_path / "wh.duckdb"), None)} == {"UTC"}
    monkeypatch.setenv("HEADROOM_SCHEDULE_TIMEZONE", "Mars/Olympus")
    assert main(["serve", "--list", "--db", str(tmp_path / "wh.duckdb")]) == 2
    err = capsys.readouterr().err.strip()
    assert "HEADROOM_SCHEDULE_TIMEZONE='Mars/Olympus'" in err and "IANA" in err and len(err.splitlines()) == 1


def test_headroom_loggers_stay_quiet_outside_deployed_runs() -> None:
    import logging

    from pipelines.runtime.run_logs import HEADROOM_LOGGERS, info_in_deployed_runs

    before = {name: logging.getLogger(name).level for name in HEADROOM_LOGGERS}
    info_in_deployed_runs()  # no flow run: a command's console keeps its level
    assert {name: logging.getLogger(name).level for name in HEADROOM_LOGGERS} == before


def test_serve_says_what_prune_daily_deletes(monkeypatch, capsys) -> None:
    from pipelines.commands import serve
    from pipelines.runtime import prefect_server
    from pipelines.runtime.settings import Settings

    monkeypatch.setattr(prefect_server, "answering_ui_url", lambda: None)
    serve._announce("http://127.0.0.1:4200/api", 6, Settings(keep_days=30, keep_data_days=90))
    assert "prune-daily deletes history past 30 days, readings past 90 days" in capsys.readouterr().out
    serve._announce("http://127.0.0.1:4200/api", 6, Settings(keep_days=None))
    assert "prune-daily" not in capsys.readouterr().out
