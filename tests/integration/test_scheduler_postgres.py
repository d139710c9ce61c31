"""The scheduler against the real PostgreSQL on this machine (127.0.0.1:5432).

APScheduler's job store and the run history in PostgreSQL, the advisory-lock leader
election, two scheduler processes of which only one runs jobs, and the takeover when
the leader is SIGKILLed. Each test works in a fresh, uniquely named database (advisory
locks are per database, so tests cannot see each other's leader) dropped afterwards.
Without a reachable server the tests skip, except in CI (``CI=true``) where they fail.
"""

from __future__ import annotations

import importlib.util
import pickle
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from sqlalchemy import URL, create_engine, text

from api.settings import AppSettings, load_app_settings
from pipelines.jobs.report import JobReport
from pipelines.scheduler.dispatch import DISPATCH_REF
from pipelines.scheduler.election import LeaderElector
from pipelines.scheduler.leader import PostgresAdvisoryLock, lock_for
from pipelines.scheduler.plan import ScheduledJob, every
from pipelines.scheduler.service import start_scheduler
from pipelines.scheduler.status import job_statuses
from pipelines.store.store import Store, open_store

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

WORKER = Path(__file__).resolve().parents[1] / "pipelines" / "scheduler" / "scheduler_worker.py"


def _load_worker() -> ModuleType:
    name = "foresight_scheduler_worker"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, WORKER)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


worker = _load_worker()


@pytest.fixture
def pg_url(pg_admin: URL) -> Iterator[URL]:
    """A fresh database for one test, dropped (with its sessions) afterwards."""
    admin = create_engine(pg_admin, isolation_level="AUTOCOMMIT")
    name = f"foresight_sched_{uuid.uuid4().hex[:12]}"
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield pg_admin.set(database=name)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def pg_settings(pg_url: URL, tmp_path: Path) -> AppSettings:
    return load_app_settings(
        root=tmp_path,
        store_url=pg_url.render_as_string(hide_password=False),
        scheduler={"misfire_grace_seconds": 30},
    )


@pytest.fixture
def pg_store(pg_settings: AppSettings) -> Iterator[Store]:
    with open_store(pg_settings.store_url) as store:
        yield store


def _runner(calls: list[str]) -> Callable[[str, AppSettings], JobReport]:
    def run(name: str, _settings: AppSettings) -> JobReport:
        calls.append(name)
        now = datetime.now(UTC)
        return JobReport(name, "ok", f"{name} ran", now, now, details={"rows": 3})

    return run


def _wait(condition: Callable[[], bool], timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def _terminate_lock_sessions(url: URL) -> int:
    """Kill the lock holder's connection server-side, as a database restart would."""
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            return len(
                connection.execute(
                    text(
                        "SELECT pg_terminate_backend(pid) FROM pg_locks "
                        "WHERE locktype = 'advisory' AND granted "
                        "AND database = (SELECT oid FROM pg_database "
                        "WHERE datname = current_database())"
                    )
                ).all()
            )
    finally:
        engine.dispose()


def test_jobs_and_their_runs_are_persisted_in_postgresql(
    pg_settings: AppSettings, pg_store: Store
) -> None:
    calls: list[str] = []
    plan = [
        ScheduledJob("ingest", every(timedelta(seconds=0.3))),
        ScheduledJob("train", every(timedelta(days=1))),
        ScheduledJob("forecast", every(timedelta(days=1))),
    ]
    running = start_scheduler(
        pg_settings, pg_store, plan=plan, runner=_runner(calls), poll_seconds=0.2
    )
    try:
        assert isinstance(lock_for(pg_store), PostgresAdvisoryLock)
        assert running.wait_until_leader(15)
        running.run_soon("train")
        assert _wait(lambda: "forecast" in calls and calls.count("ingest") >= 2)
    finally:
        running.stop()
    with pg_store.engine.connect() as connection:
        rows = connection.execute(text("SELECT id, job_state FROM apscheduler_jobs")).all()
    states: dict[str, Any] = {row.id: pickle.loads(row.job_state) for row in rows}
    assert set(states) == {"foresight.ingest", "foresight.train", "foresight.forecast"}
    for state in states.values():
        assert state["func"] == DISPATCH_REF
        assert (state["max_instances"], state["coalesce"], state["misfire_grace_time"]) == (
            1,
            True,
            30,
        )
    statuses = {status.name: status for status in job_statuses(pg_store, plan)}
    assert all(status.scheduled and status.next_run for status in statuses.values())
    last_train = statuses["train"].last_run
    assert last_train is not None
    assert (last_train.outcome, last_train.summary, last_train.details) == (
        "ok",
        "train ran",
        {"rows": 3},
    )
    assert last_train.finished_at is not None
    assert last_train.finished_at.tzinfo is not None


def test_only_one_advisory_lock_holder_and_a_dropped_connection_frees_it(pg_url: URL) -> None:
    first, second = PostgresAdvisoryLock(pg_url), PostgresAdvisoryLock(pg_url)
    try:
        assert first.try_acquire()
        assert not second.try_acquire()
        assert first.still_held()
        assert _terminate_lock_sessions(pg_url) >= 1
        # The server released the lock with the session; the old holder notices.
        assert not first.still_held()
        assert second.try_acquire()
        assert not first.try_acquire()
    finally:
        first.close()
        second.close()


def test_a_leader_that_loses_its_connection_steps_down(
    pg_settings: AppSettings, pg_store: Store, pg_url: URL, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[str] = []
    plan = [ScheduledJob("ingest", every(timedelta(seconds=0.2)))]
    running = start_scheduler(
        pg_settings, pg_store, plan=plan, runner=_runner(calls), poll_seconds=0.2
    )
    try:
        assert running.wait_until_leader(15)
        assert _wait(lambda: len(calls) >= 1)
        caplog.set_level("INFO", logger="pipelines.scheduler")
        assert _terminate_lock_sessions(pg_url) == 1
        # Demoted within a poll (its jobs stopped); then, the lock being free, it leads again.
        assert _wait(lambda: "stepping down" in caplog.text, 5)
        assert _wait(lambda: caplog.text.count("leading the scheduler") >= 1, 5)
        assert running.wait_until_leader(15)
        runs_before = len(calls)
        assert _wait(lambda: len(calls) > runs_before)
    finally:
        running.stop()


def test_an_elector_on_a_lost_lock_calls_demote_before_leading_again(pg_url: URL) -> None:
    events: list[str] = []
    lock = PostgresAdvisoryLock(pg_url)
    elector = LeaderElector(
        lock, lambda: events.append("elected"), lambda: events.append("demoted"), poll_seconds=1
    )
    try:
        elector.poll_once()
        assert elector.is_leader
        _terminate_lock_sessions(pg_url)
        elector.poll_once()
        assert not elector.is_leader
        elector.poll_once()
        assert elector.is_leader
        assert events == ["elected", "demoted", "elected"]
    finally:
        lock.close()


@pytest.mark.slow
def test_two_scheduler_processes_one_leader_and_takeover_after_sigkill(
    pg_url: URL, tmp_path: Path
) -> None:
    worker.prepare(pg_url)
    replicas = [worker.Replica(pg_url, tmp_path, tmp_path / f"{name}.log") for name in "ab"]
    try:
        worker.check_takeover(pg_url, replicas)
    finally:
        for replica in replicas:
            replica.close()
