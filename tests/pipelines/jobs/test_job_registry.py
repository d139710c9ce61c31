"""Jobs by name, the evaluate -> train hand-off through the scheduler, and publish.

The hand-off runs the real jobs (a small seeded data set, MLflow and the store under
tmp_path) through the real scheduler; publish runs the real publisher against a
receiver listening on loopback.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from api.consumers.webhooks import SIGNATURE_HEADER, TIMESTAMP_HEADER, verify
from api.publishing import publish_once
from api.settings import AppSettings
from forecaster.exceptions import ConfigError
from forecaster.types import DS, UID, Y
from pipelines.jobs import run_job
from pipelines.jobs.forecast import run_forecast
from pipelines.jobs.ingest import run_ingest
from pipelines.jobs.publish import Publisher, PublishMode, publishing_runner, run_publish
from pipelines.jobs.report import JobReport
from pipelines.jobs.runtime import finish, utc_now
from pipelines.jobs.train import run_train
from pipelines.scheduler.plan import ScheduledJob, every
from pipelines.scheduler.service import start_scheduler
from pipelines.store.job_runs import JobRun
from pipelines.store.store import Store, open_store
from tests.pipelines.jobs.job_fakes import POOL, START, FakeSource, make_settings, synthetic

NOW = datetime(2025, 3, 2, 12, tzinfo=UTC)
SECRET = "s3cret-for-tests"


def test_unknown_job_names_the_known_ones(settings: AppSettings) -> None:
    with pytest.raises(ConfigError, match="unknown job 'ingets'; known jobs: ingest, train"):
        run_job("ingets", settings)


# --- evaluate -> train, through the scheduler ----------------------------------------


def _wait_for(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def _finished(store: Store, job: str) -> JobRun | None:
    runs = store.job_runs.history(job, limit=1)
    return runs[0] if runs and runs[0].finished_at is not None else None


@pytest.mark.slow
def test_an_evaluation_that_finds_the_champion_degraded_trains_through_the_scheduler(
    tmp_path: Path,
) -> None:
    """A champion trained and forecasting, then demand ten times higher than it saw.

    The scheduler runs ``evaluate`` (the real job, on the wall clock, so the data is
    moved to end now); its report asks for a retraining, and the scheduler's dispatch
    starts ``train``, then the ``forecast`` that follows a training. Nothing else
    schedules them: their intervals are a day.
    """
    settings = make_settings(tmp_path, model_set="fast")
    now = pd.Timestamp.now(tz="UTC").floor("10min")
    cut = now - pd.Timedelta(hours=2)
    data = synthetic()
    data[DS] += cut - (START + pd.Timedelta(days=3))
    source = FakeSource(data)
    with open_store(settings.store_url) as store:
        assert run_ingest(settings, store=store, source=source, now=cut).outcome == "ok"
        first = run_train(settings, store=store)
        assert first.details["promoted"] is True, first.summary
        assert run_forecast(settings, store=store, now=cut).outcome == "ok"
        source.frame = data.assign(**{Y: np.where(data[DS] > cut, data[Y] * 10, data[Y])})
        assert run_ingest(settings, store=store, source=source, now=now).outcome == "ok"

        day = every(timedelta(days=1))
        plan = [ScheduledJob(name, day) for name in ("evaluate", "train", "forecast")]
        running = start_scheduler(settings, store, plan=plan, poll_seconds=0.1)
        try:
            assert running.wait_until_leader(10), "the only scheduler never became leader"
            running.run_soon("evaluate")
            assert _wait_for(lambda: _finished(store, "forecast") is not None, 300), [
                (run.job, run.outcome, run.summary) for run in store.job_runs.history()
            ]
        finally:
            running.stop()

        evaluated, trained, forecast = (
            _finished(store, job) for job in ("evaluate", "train", "forecast")
        )
        assert len(store.job_runs.history("train")) == 1
    assert evaluated is not None
    assert trained is not None
    assert forecast is not None
    assert evaluated.details["retrain"] is True, evaluated.summary
    assert POOL + "/allocated_gpus" in evaluated.details["degraded_series"]
    assert trained.outcome == "ok", trained.summary
    assert trained.details["version"] != first.details["version"]
    assert forecast.outcome == "ok", forecast.summary
    assert evaluated.finished_at is not None
    assert trained.finished_at is not None
    assert evaluated.finished_at <= trained.started_at <= trained.finished_at
    assert trained.finished_at <= forecast.started_at


# --- publish, with the real publisher --------------------------------------------------


@dataclass
class Receiver:
    """A webhook receiver on loopback that keeps every request and answers 204."""

    url: str = ""
    requests: list[tuple[dict[str, str], bytes]] = field(default_factory=list)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    received = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            received.requests.append((dict(self.headers.items()), body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    received.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield received
    server.shutdown()
    server.server_close()
    thread.join(10)


def _publishing(tmp_path: Path, receiver: Receiver, **overrides: Any) -> AppSettings:
    settings = make_settings(
        tmp_path,
        AppSettings,
        webhook_secret=SECRET,
        publish={"webhook_urls": [receiver.url], "kubeconfig": tmp_path / "no-kubeconfig"},
        **overrides,
    )
    assert isinstance(settings, AppSettings)
    return settings


def _publisher(settings: AppSettings) -> Publisher:
    """``publish_once`` bound to ``settings``, as the CLI binds it."""

    def publish(store: Store, *, mode: PublishMode, now: datetime | None) -> object:
        return publish_once(settings, store, mode=mode, now=now)

    return publish


@pytest.fixture
def live_store(settings: AppSettings) -> Iterator[Store]:
    """The settings' store with a quarter hour of live readings of the pool up to NOW."""
    ds = pd.date_range(end=NOW, periods=3, freq="5min", tz="UTC")
    readings = {"allocated_gpus": 30.0, "queue_gpus": 10.0, "nodes": 5.0, "gpu_util": 70.0}
    frame = pd.concat(
        [pd.DataFrame({UID: f"{POOL}/{s}", DS: ds, Y: v}) for s, v in readings.items()],
        ignore_index=True,
    )
    with open_store(settings.store_url) as store:
        store.samples.upsert_with_demand(frame)
        yield store


@pytest.fixture
def settings(tmp_path: Path, receiver: Receiver) -> AppSettings:
    return _publishing(tmp_path, receiver)


@pytest.mark.slow  # the publisher opens the MLflow registry (seconds)
def test_publish_is_a_dry_run_by_default_and_sends_nothing(
    settings: AppSettings, live_store: Store, receiver: Receiver
) -> None:
    report = run_publish(settings, publish=_publisher(settings), store=live_store, now=NOW)

    assert report.outcome == "ok", report.summary
    assert report.summary == "published 1 pool recommendations (dry run)"
    assert report.details["mode"] == "dry_run"
    assert report.details["applied"] is False
    assert report.details["generated_at"] == NOW.isoformat()
    assert report.details["missing"] == {}
    assert receiver.requests == []
    assert live_store.outbox.counts()["pending"] == 0


@pytest.mark.slow  # the publisher opens the MLflow registry (seconds)
def test_publish_with_apply_delivers_a_signed_set_to_the_receiver(
    settings: AppSettings, live_store: Store, receiver: Receiver
) -> None:
    report = run_publish(
        settings, publish=_publisher(settings), store=live_store, now=NOW, mode="apply"
    )

    assert report.outcome == "ok", report.summary
    assert report.details["applied"] is True
    # forecast_only (the default) keeps the cluster untouched; webhooks are still served.
    assert report.details["mode"] == "dry_run"
    [(headers, body)] = receiver.requests
    signature, timestamp = headers[SIGNATURE_HEADER], headers[TIMESTAMP_HEADER]
    assert verify(body, signature, SECRET.encode(), timestamp, now=NOW)
    [pool] = json.loads(body)["pools"]
    assert (pool["pool"], pool["current_nodes"]) == (POOL, 5)
    assert live_store.outbox.counts() == {"pending": 0, "delivered": 1, "dead": 0}


@pytest.mark.slow  # the publisher opens the MLflow registry (seconds)
def test_publish_that_cannot_reach_a_cluster_is_a_failed_report(
    tmp_path: Path, live_store: Store, receiver: Receiver
) -> None:
    live = _publishing(tmp_path, receiver, service={"forecast_only": False})

    # Not forecast_only: the CLI's runner publishes in apply mode.
    report = run_publish(live, publish=_publisher(live), store=live_store, now=NOW, mode="apply")

    assert report.outcome == "failed"
    assert "publish.kubeconfig" in report.summary
    assert "does not exist" in report.summary
    assert receiver.requests == []


def test_publish_by_name_alone_has_no_publisher_and_is_skipped(settings: AppSettings) -> None:
    report = run_job("publish", settings)

    assert report.outcome == "skipped"
    assert "no publisher" in report.summary


def test_the_publishing_runner_hands_publish_its_publisher_and_passes_the_rest_on(
    settings: AppSettings,
) -> None:
    calls: list[tuple[PublishMode, datetime | None]] = []

    def publish(store: Store, *, mode: PublishMode, now: datetime | None) -> dict[str, int]:
        calls.append((mode, now))
        return {"recommendations": 2}

    def others(name: str, given: AppSettings) -> JobReport:
        return finish(name, utc_now(), "ok", f"ran {name}")

    runner = publishing_runner(lambda: publish, others, mode="apply")

    report = runner("publish", settings)
    assert (report.outcome, report.summary) == ("ok", "published 2 pool recommendations (applied)")
    assert calls == [("apply", None)]  # the runner's mode, and the publisher's own clock
    assert runner("ingest", settings).summary == "ran ingest"
