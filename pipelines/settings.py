"""Runtime settings: environment variables (HEADROOM_*) and CLI flags, validated at the edge."""
from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, Field

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DB = REPO_ROOT / "data" / "warehouse.duckdb"
SCHEMA_DIR = REPO_ROOT / "data" / "schema"


class Settings(BaseModel):
    """Everything a run needs to know about where things live and how to run them."""

    db_path: Path = Field(default=DEFAULT_DB)
    lock_timeout_s: float = Field(default=30.0, ge=0)
    data_dir: Path = Field(default=REPO_ROOT / "data" / "demo")
    report_dir: Path = Field(default=REPO_ROOT / "reports")
    task_runner: str = Field(default="thread", pattern="^(thread|dask)$")
    dask_address: str | None = None
    max_workers: int = Field(default=2, ge=1)
    alert_jsonl: Path | None = None
    alert_webhook_url: str | None = None
    alertmanager_url: str | None = None
    plan_config: Path | None = None

    @classmethod
    def from_env(cls, **overrides: object) -> "Settings":
        """Settings from HEADROOM_* variables; explicit non-None overrides win."""
        env = {
            "db_path": os.environ.get("HEADROOM_DB"),
            "lock_timeout_s": os.environ.get("HEADROOM_LOCK_TIMEOUT"),
            "data_dir": os.environ.get("HEADROOM_DATA_DIR"),
            "report_dir": os.environ.get("HEADROOM_REPORT_DIR"),
            "task_runner": os.environ.get("HEADROOM_TASK_RUNNER"),
            "dask_address": os.environ.get("HEADROOM_DASK_ADDRESS"),
            "max_workers": os.environ.get("HEADROOM_MAX_WORKERS"),
            "alert_jsonl": os.environ.get("HEADROOM_ALERT_JSONL"),
            "alert_webhook_url": os.environ.get("HEADROOM_ALERT_WEBHOOK"),
            "alertmanager_url": os.environ.get("HEADROOM_ALERTMANAGER_URL"),
            "plan_config": os.environ.get("HEADROOM_PLAN_CONFIG"),
        }
        values = {k: v for k, v in env.items() if v not in (None, "")}
        values.update({k: v for k, v in overrides.items() if v is not None})
        if values.get("dask_address") and "task_runner" not in values:
            values["task_runner"] = "dask"
        return cls(**values)
