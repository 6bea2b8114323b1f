"""HEADROOM_* settings: a bad value is an error that names the variable."""
from __future__ import annotations

import pytest

from pipelines.runtime.settings import Settings, SettingsError


def test_task_runner_is_case_insensitive(monkeypatch) -> None:
    monkeypatch.setenv("HEADROOM_TASK_RUNNER", "Dask")
    assert Settings.from_env().task_runner == "dask"


def test_every_word_setting_is_read_alike(monkeypatch) -> None:
    """Trimmed, and in any case where the value is a word (a zone keeps its case)."""
    monkeypatch.setenv("HEADROOM_TASK_RUNNER", "DASK ")
    monkeypatch.setenv("HEADROOM_UNUSED_SPOT_MARKETS", "OFF")
    monkeypatch.setenv("HEADROOM_SCHEDULE_TIMEZONE", "Europe/Berlin ")
    s = Settings.from_env()
    assert (s.task_runner, s.unused_spot_markets, s.schedule_timezone) == ("dask", "off", "Europe/Berlin")
    monkeypatch.setenv("HEADROOM_UNUSED_SPOT_MARKETS", "loud")
    with pytest.raises(SettingsError, match="HEADROOM_UNUSED_SPOT_MARKETS='loud': Input should be 'info' or 'off'"):
        Settings.from_env()


def test_paths_are_trimmed_and_spaces_alone_are_unset(monkeypatch, tmp_path) -> None:
    """'wh.duckdb ' made a second warehouse beside the first; '  ' sent alerts to a file
    named two spaces."""
    monkeypatch.setenv("HEADROOM_DB", f" {tmp_path}/wh.duckdb ")
    monkeypatch.setenv("HEADROOM_ALERT_JSONL", "  ")
    monkeypatch.setenv("HEADROOM_PLAN_CONFIG", "\t")
    s = Settings.from_env()
    assert (s.db_path, s.alert_jsonl, s.plan_config) == (tmp_path / "wh.duckdb", None, None)


@pytest.mark.parametrize(("var", "value"), [
    ("HEADROOM_MAX_WORKERS", "0"), ("HEADROOM_LOCK_TIMEOUT", "abc"), ("HEADROOM_TASK_RUNNER", "ray"),
    # NaN waited no time at all; inf and 1e12 overflowed the alert lease built on the wait
    ("HEADROOM_LOCK_TIMEOUT", "nan"), ("HEADROOM_LOCK_TIMEOUT", "inf"), ("HEADROOM_LOCK_TIMEOUT", "1e12"),
    # the machine's own zone, whichever it is: the deployments' crons would move with the host
    ("HEADROOM_SCHEDULE_TIMEZONE", "localtime"), ("HEADROOM_SCHEDULE_TIMEZONE", "Mars/Olympus")])
def test_a_bad_variable_is_named(monkeypatch, var: str, value: str) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(SettingsError, match=f"{var}='{value}'"):
        Settings.from_env()


def test_the_cli_reports_it_without_a_traceback(monkeypatch, capsys, tmp_path) -> None:
    from pipelines.cli import main

    monkeypatch.setenv("HEADROOM_MAX_WORKERS", "0")
    assert main(["train", "--db", str(tmp_path / "wh.duckdb")]) == 2
    assert "HEADROOM_MAX_WORKERS='0'" in capsys.readouterr().err


def test_an_ephemeral_api_that_does_not_start_is_one_line_with_exit_1(monkeypatch, capsys) -> None:
    """On a busy machine Prefect's ephemeral API can miss its start-up wait: one line saying
    what to do, no traceback (the wait itself defaults to 120 s, not Prefect's 20)."""
    import os

    from pipelines import cli
    from pipelines.commands import plan as plan_command

    def slow(args):
        raise RuntimeError("Timed out while attempting to connect to ephemeral Prefect API server.")

    monkeypatch.setattr(plan_command, "run", slow)
    assert os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"]
    assert cli.main(["plan"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "PREFECT_API_URL" in err and "did not start within" in err


def test_version_says_the_installed_version(capsys) -> None:
    from importlib.metadata import version

    from pipelines import cli

    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"headroom {version('headroom')}"


@pytest.mark.parametrize("value", ["0D", "7", "soon", "-1D"])
def test_a_spike_retrain_age_must_be_a_positive_duration(monkeypatch, value: str) -> None:
    monkeypatch.setenv("HEADROOM_SPIKE_RETRAIN_EVERY", value)
    with pytest.raises(SettingsError, match="HEADROOM_SPIKE_RETRAIN_EVERY"):
        Settings.from_env()


def test_the_spike_model_is_retrained_weekly_by_default(monkeypatch) -> None:
    monkeypatch.delenv("HEADROOM_SPIKE_RETRAIN_EVERY", raising=False)
    assert Settings.from_env().spike_retrain_every == "7D"
    monkeypatch.setenv("HEADROOM_SPIKE_RETRAIN_EVERY", "24h")
    assert Settings.from_env().spike_retrain_every == "24h"
