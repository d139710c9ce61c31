"""Grouped settings of the pipelines around the forecaster: the metric source, the scheduler.

Details: docs/jobs.md, "Notes from the code", `pipelines/config/sections.py`."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr


class Section(BaseModel):
    """A group of settings: plain values, unknown keys refused, immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class PrometheusSettings(Section):
    """Where the metric history comes from when it is not a file (``url`` unset: files)."""

    url: str | None = Field(
        default=None,
        description="the Prometheus base URL, e.g. http://prometheus:9090 (unset: use files)",
    )
    timeout_s: float = Field(default=30.0, gt=0, description="seconds per request, positive")
    max_attempts: int = Field(default=4, ge=1, description="tries per request, at least 1")
    bearer_token: SecretStr | None = Field(default=None, description="a bearer token to send")
    username: str | None = Field(default=None, description="a basic-auth user (needs password)")
    password: SecretStr | None = Field(default=None, description="the basic-auth password")
    verify_tls: bool = Field(default=True, description="check the server's TLS certificate")
    ca_file: Path | None = Field(default=None, description="a PEM CA bundle for the server")
    step: str = Field(
        default="5min",
        description="the query step (a pandas offset such as '5min'); align it with the "
        "scrape interval or coarser",
    )
    backfill_days: int = Field(
        default=14, gt=0, description="days of history the first ingest fetches, positive"
    )


class SchedulerSettings(Section):
    """When the scheduled jobs run (APScheduler in the ``foresight`` process)."""

    ingest_every_minutes: int = Field(default=5, gt=0, description="minutes between ingests")
    train_cron: str = Field(
        default="0 3 * * *",
        description="a five-field crontab expression for the daily training (UTC)",
    )
    forecast_every_minutes: int = Field(
        default=5,
        gt=0,
        description="minutes between forecasts (also run after each training); the API "
        "serves only stored forecasts, so about one series step",
    )
    evaluate_every_minutes: int = Field(
        default=60, gt=0, description="minutes between evaluations of stored forecasts"
    )
    publish_every_minutes: int = Field(
        default=5, gt=0, description="minutes between recommendation publishes"
    )
    misfire_grace_seconds: int = Field(
        default=300, ge=0, description="how late a missed run may still start, in seconds"
    )
    retrain_mase_ratio: float = Field(
        default=1.5,
        gt=0,
        description="live MASE over the backtest MASE past which the champion counts as "
        "degraded and a retraining is triggered",
    )
    dask_address: str | None = Field(
        default=None,
        description="a Dask scheduler address (tcp://host:8786) training fans out to "
        "(unset: a local process pool)",
    )
    workers: int = Field(
        default=2, ge=1, description="local processes training and the forecast job fan out to"
    )
