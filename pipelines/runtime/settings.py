"""Runtime settings: environment variables (HEADROOM_*) and CLI flags, validated at the edge."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Literal
from zoneinfo import available_timezones

from pydantic import BaseModel, Field, ValidationError, field_validator

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DB = REPO_ROOT / "data" / "warehouse.duckdb"
SCHEMA_DIR = REPO_ROOT / "data" / "schema"
MIN_KEEP_DAYS = 7  # the report's heatmap week of alerts, and a resolved alert's window long past
MIN_DATA_DAYS = 70  # a week's replay, each step reading 60 days before it (training reads 56)
MAX_KEEP_DAYS = 36500  # a century: more is a typo (and past the calendar's end for a date)


ENV_NAMES = {
    "db_path": "HEADROOM_DB", "lock_timeout_s": "HEADROOM_LOCK_TIMEOUT", "data_dir": "HEADROOM_DATA_DIR",
    "report_dir": "HEADROOM_REPORT_DIR", "task_runner": "HEADROOM_TASK_RUNNER",
    "dask_address": "HEADROOM_DASK_ADDRESS", "max_workers": "HEADROOM_MAX_WORKERS",
    "alert_jsonl": "HEADROOM_ALERT_JSONL", "alert_webhook_url": "HEADROOM_ALERT_WEBHOOK",
    "alertmanager_url": "HEADROOM_ALERTMANAGER_URL", "plan_config": "HEADROOM_PLAN_CONFIG",
    "stale_after_hours": "HEADROOM_STALE_AFTER_HOURS", "unused_spot_markets": "HEADROOM_UNUSED_SPOT_MARKETS",
    "input_dir": "HEADROOM_INPUT_DIR", "schedule_timezone": "HEADROOM_SCHEDULE_TIMEZONE",
    "spike_retrain_every": "HEADROOM_SPIKE_RETRAIN_EVERY", "keep_days": "HEADROOM_KEEP_DAYS",
    "keep_data_days": "HEADROOM_KEEP_DATA_DAYS",
}


class SettingsError(ValueError):
    """A setting has a value that cannot be used; the message names the variable."""


class Settings(BaseModel):
    """Everything a run needs to know about where things live and how to run them."""

    db_path: Path = Field(default=DEFAULT_DB)
    # seconds; a day at most (a longer wait is a hung writer, and the alert lease is built on it)
    lock_timeout_s: float = Field(default=30.0, ge=0, le=86400, allow_inf_nan=False)
    data_dir: Path = Field(default=REPO_ROOT / "data" / "demo")
    report_dir: Path = Field(default=REPO_ROOT / "reports")
    task_runner: Literal["thread", "dask"] = "thread"
    dask_address: str | None = None
    max_workers: int = Field(default=2, ge=1)
    alert_jsonl: Path | None = None
    alert_webhook_url: str | None = None
    alertmanager_url: str | None = None
    plan_config: Path | None = None
    stale_after_hours: float = Field(default=24.0, gt=0, allow_inf_nan=False)  # headroom status: a source older is stale
    unused_spot_markets: Literal["info", "off"] = "info"  # spike alerts where no pool runs
    input_dir: Path | None = None  # the drop folder of the hourly ingest deployment (serve --input)
    schedule_timezone: str = "UTC"  # the IANA zone the deployments' crons are read in
    # the detect flow reuses the registered spike model until it is this old, or until the
    # prices run this far past what it learnt from; then it retrains
    spike_retrain_every: str = "7D"
    # days of derived history (models, plans, resolved alerts, replays) serve's daily prune keeps,
    # and of readings (None, "all": every one); headroom prune's defaults (pipelines.store.retention)
    keep_days: int | None = Field(default=30, ge=MIN_KEEP_DAYS, le=MAX_KEEP_DAYS)
    keep_data_days: int | None = Field(default=None, ge=MIN_DATA_DAYS, le=MAX_KEEP_DAYS)

    @field_validator("keep_days", "keep_data_days", mode="before")
    @classmethod
    def _all_is_none(cls, value: object) -> object:
        return None if isinstance(value, str) and value.strip().lower() == "all" else value

    @field_validator("spike_retrain_every")
    @classmethod
    def _positive_duration(cls, value: str) -> str:
        from pipelines.runtime.durations import parse_duration

        parse_duration(value)
        return str(value).strip()

    @field_validator("schedule_timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        if value not in available_timezones():  # the list Prefect checks a schedule's zone against
            raise ValueError("not an IANA time zone (e.g. UTC, Europe/Berlin)")
        if value in ("localtime", "Factory"):  # in that list, but whatever zone the machine reading it is in
            raise ValueError("not a zone's name; give the zone itself (e.g. UTC, Europe/Berlin)")
        return value

    @classmethod
    def from_env(cls, **overrides: object) -> Settings:
        """Settings from HEADROOM_* variables; explicit non-None overrides win."""
        env = {field: os.environ.get(name) for field, name in ENV_NAMES.items()}
        # spaces around a value dropped (a path 'wh.duckdb ' would name another file); blank is unset
        values = {k: v.strip() for k, v in env.items() if v is not None and v.strip()}
        given = {k: v for k, v in overrides.items() if v is not None}
        values.update(given)
        # words are read as typed in any case, with spaces around them dropped; a zone's name keeps its case
        for key in ("task_runner", "unused_spot_markets", "schedule_timezone"):
            if isinstance(values.get(key), str):
                values[key] = values[key].strip() if key == "schedule_timezone" else values[key].strip().lower()
        if values.get("dask_address") and "task_runner" not in values:
            values["task_runner"] = "dask"
        try:
            return cls(**values)
        except ValidationError as exc:
            problems = []
            for err in exc.errors():
                field = str(err["loc"][0]) if err["loc"] else "?"
                name = field if field in given else ENV_NAMES.get(field, field)
                problems.append(f"{name}={err.get('input')!r}: {err['msg'].removeprefix('Value error, ')}")
            raise SettingsError("bad setting: " + "; ".join(problems)) from None
