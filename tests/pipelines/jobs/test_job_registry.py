"""Jobs by name, the evaluate -> train hand-off, and the publish job's adapter."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from forecaster.config.settings import Settings
from forecaster.exceptions import ConfigError, PublishError
from pipelines.jobs import JOB_NAMES, JobReport, run_job
from pipelines.jobs.publish import run_publish
from pipelines.store import Store

NOW = datetime(2025, 3, 2, 12, tzinfo=UTC)


def _report(job: str, **details: Any) -> JobReport:
    return JobReport(job, "ok", f"{job} done", NOW, NOW, details=details)


def test_job_names_are_the_five_jobs() -> None:
    assert JOB_NAMES == ("ingest", "train", "forecast", "evaluate", "publish")


def test_unknown_job_names_the_known_ones(settings: Settings) -> None:
    with pytest.raises(ConfigError, match="unknown job 'ingets'; known jobs: ingest, train"):
        run_job("ingets", settings)


def test_degraded_evaluation_leaves_retraining_to_the_scheduler(settings: Settings) -> None:
    ran: list[str] = []

    def evaluate(_: Settings) -> JobReport:
        ran.append("evaluate")
        return _report("evaluate", retrain=True)

    def train(_: Settings) -> JobReport:
        ran.append("train")
        return _report("train", version="2")

    report = run_job("evaluate", settings, jobs={"evaluate": evaluate, "train": train})

    assert ran == ["evaluate"]
    assert report.details["retrain"] is True


@dataclass(frozen=True)
class _Outcome:
    generated_at: datetime
    mode: str
    recommendations: tuple[object, ...]
    missing: dict[str, str]


def test_publish_calls_the_publisher_with_the_store_and_clock(
    settings: Settings, store: Store
) -> None:
    calls: list[tuple[Any, ...]] = []

    def publish(settings_: Settings, store_: Store, *, apply: bool, now: datetime) -> _Outcome:
        calls.append((settings_, store_, apply, now))
        return _Outcome(now, "dry_run", (object(), object()), {"l4": "no forecast"})

    report = run_publish(settings, store=store, now=NOW, publish=publish)

    assert calls == [(settings, store, False, NOW)]  # forecast_only by default: dry run
    assert report.outcome == "ok"
    assert report.summary == "published 2 pool recommendations (dry run)"
    assert report.details["mode"] == "dry_run"
    assert report.details["missing"] == {"l4": "no forecast"}
    assert report.details["generated_at"] == NOW.isoformat()
    assert report.details["applied"] is False


def test_publish_apply_follows_forecast_only_unless_told(settings: Settings, store: Store) -> None:
    seen: list[bool] = []

    def publish(_: Settings, __: Store, *, apply: bool, now: datetime) -> dict[str, int]:
        seen.append(apply)
        return {"recommendations": 0}

    live = settings.model_copy(
        update={"service": settings.service.model_copy(update={"forecast_only": False})}
    )
    run_publish(live, store=store, now=NOW, publish=publish)
    run_publish(settings, store=store, now=NOW, publish=publish, apply=True)
    assert seen == [True, True]


def test_publish_error_is_a_failed_report(settings: Settings, store: Store) -> None:
    def publish(*_: Any, **__: Any) -> None:
        raise PublishError("ConfigMap invalid: quoted keys")

    report = run_publish(settings, store=store, now=NOW, publish=publish)
    assert report.outcome == "failed"
    assert report.summary == "ConfigMap invalid: quoted keys"
