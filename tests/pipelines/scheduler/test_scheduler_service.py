"""The scheduler on a SQLite store with a scripted job runner (intervals in seconds)."""

from __future__ import annotations

import pickle
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text

from forecaster.exceptions import WorkCancelled
from pipelines.config.settings import Settings
from pipelines.jobs.report import JobReport
from pipelines.scheduler.dispatch import (
    DISPATCH_REF,
    JobContext,
    register,
    run_scheduled_job,
    runner_identity,
    unregister,
)
from pipelines.scheduler.leader import ProcessLock
from pipelines.scheduler.plan import ScheduledJob, every
from pipelines.scheduler.service import RunningScheduler, start_scheduler
from pipelines.store.store import Store

pytestmark = pytest.mark.timeout(60)

FAST = timedelta(seconds=0.3)
NEVER = timedelta(days=1)  # fires only when made due by a follow-up
POLL = 0.1


def plan(**intervals: timedelta) -> list[ScheduledJob]:
    return [ScheduledJob(name, every(interval)) for name, interval in intervals.items()]


@pytest.fixture
def start(settings: Settings, store: Store) -> Iterator[Callable[..., RunningScheduler]]:
    started: list[RunningScheduler] = []

    def run(jobs: list[ScheduledJob], runner: Any, **options: Any) -> RunningScheduler:
        running = start_scheduler(
            settings, store, plan=jobs, runner=runner, poll_seconds=POLL, **options
        )
        started.append(running)
        assert running.wait_until_leader(10), "the only scheduler never became leader"
        return running

    yield run
    for running in started:
        running.stop()


def stored_jobs(store: Store) -> dict[str, dict[str, Any]]:
    with store.engine.connect() as connection:
        rows = connection.execute(text("SELECT id, job_state FROM apscheduler_jobs")).all()
    return {row[0]: pickle.loads(row[1]) for row in rows}


def test_jobs_are_persisted_in_the_store_with_safe_options(
    start: Callable[..., RunningScheduler], store: Store, runner: Any
) -> None:
    start(plan(ingest=NEVER, train=NEVER), runner)
    jobs = stored_jobs(store)
    assert set(jobs) == {"foresight.ingest", "foresight.train"}
    for name in ("ingest", "train"):
        state = jobs[f"foresight.{name}"]
        assert state["func"] == DISPATCH_REF
        assert state["max_instances"] == 1
        assert state["coalesce"] is True
        assert state["misfire_grace_time"] == 42  # settings.scheduler.misfire_grace_seconds
        # Only the job's name and a context key reach the database: no settings, no secrets.
        key, job_name = state["args"]
        assert job_name == name
        assert isinstance(key, str)
        assert state["kwargs"] == {}


def test_every_run_is_recorded_with_its_outcome(
    start: Callable[..., RunningScheduler],
    store: Store,
    make_runner: Any,
    wait_until: Callable[..., bool],
) -> None:
    runner = make_runner(outcomes={"publish": "partial"}, raises={"evaluate": RuntimeError("boom")})
    start(plan(ingest=FAST, publish=FAST, evaluate=FAST), runner)
    assert wait_until(lambda: set(store.job_runs.latest()) == {"ingest", "publish", "evaluate"})
    assert wait_until(lambda: all(r.finished_at for r in store.job_runs.latest().values()))
    latest = store.job_runs.latest()
    assert latest["ingest"].outcome == "ok"
    assert latest["ingest"].summary == "ingest done"
    assert latest["publish"].outcome == "partial"
    assert latest["publish"].problems == {"pool/x": "vanished"}
    assert latest["evaluate"].outcome == "failed"
    assert latest["evaluate"].summary == "RuntimeError: boom"
    for run in latest.values():
        assert run.finished_at is not None
        assert run.finished_at >= run.started_at


def test_a_run_is_recorded_running_before_it_ends(
    start: Callable[..., RunningScheduler],
    store: Store,
    make_runner: Any,
    wait_until: Callable[..., bool],
) -> None:
    release = threading.Event()
    runner = make_runner(release=release)
    start(plan(ingest=FAST), runner)
    assert wait_until(lambda: "ingest" in store.job_runs.latest())
    running = store.job_runs.latest()["ingest"]
    assert (running.outcome, running.finished_at) == ("running", None)
    release.set()
    assert wait_until(lambda: store.job_runs.history("ingest", limit=1)[0].outcome == "ok")


def test_no_job_runs_twice_at_once(
    start: Callable[..., RunningScheduler], make_runner: Any, wait_until: Callable[..., bool]
) -> None:
    # Due every 0.1 s, takes 0.5 s: without max_instances=1 runs would overlap.
    runner = make_runner(seconds=0.5)
    start(plan(ingest=timedelta(seconds=0.1)), runner)
    assert wait_until(lambda: runner.count("ingest") >= 3)
    assert runner.most_active == 1


def test_a_successful_training_is_followed_by_a_forecast(
    start: Callable[..., RunningScheduler], runner: Any, wait_until: Callable[..., bool]
) -> None:
    running = start(plan(train=NEVER, forecast=NEVER), runner)
    running.run_soon("train")
    assert wait_until(lambda: runner.count("forecast") == 1)
    assert runner.calls == ["train", "forecast"]


def test_a_failed_training_is_not_followed_by_a_forecast(
    start: Callable[..., RunningScheduler], make_runner: Any, wait_until: Callable[..., bool]
) -> None:
    runner = make_runner(outcomes={"train": "failed"}, details={"ingest": {}})
    running = start(plan(train=NEVER, forecast=NEVER, ingest=FAST), runner)
    running.run_soon("train")
    # Let a few other runs pass: a forecast would have had time to start.
    assert wait_until(lambda: runner.count("ingest") >= 3)
    assert runner.count("train") == 1
    assert runner.count("forecast") == 0


def test_evaluate_asking_for_a_retrain_starts_training(
    start: Callable[..., RunningScheduler], make_runner: Any, wait_until: Callable[..., bool]
) -> None:
    runner = make_runner(details={"evaluate": {"retrain": True}})
    running = start(plan(evaluate=NEVER, train=NEVER, forecast=NEVER), runner)
    running.run_soon("evaluate")
    assert wait_until(lambda: runner.count("forecast") == 1)
    assert runner.calls == ["evaluate", "train", "forecast"]


def test_evaluate_without_a_retrain_flag_does_not_train(
    start: Callable[..., RunningScheduler], make_runner: Any, wait_until: Callable[..., bool]
) -> None:
    runner = make_runner(details={"evaluate": {"retrain": False}})
    running = start(plan(evaluate=NEVER, train=NEVER, ingest=FAST), runner)
    running.run_soon("evaluate")
    assert wait_until(lambda: runner.count("ingest") >= 3 and runner.count("evaluate") == 1)
    assert runner.count("train") == 0


def test_a_new_leader_keeps_the_stored_schedule_and_drops_retired_jobs(
    settings: Settings, store: Store, runner: Any
) -> None:
    first = start_scheduler(
        settings, store, plan=plan(train=NEVER, old=NEVER), runner=runner, poll_seconds=POLL
    )
    assert first.wait_until_leader(10)
    planned = first.next_run_times()["foresight.train"]
    first.stop()
    second = start_scheduler(
        settings, store, plan=plan(train=NEVER), runner=runner, poll_seconds=POLL
    )
    try:
        assert second.wait_until_leader(10)
        # Same trigger: the persisted next run survives (a missed cron run still fires).
        assert second.next_run_times() == {"foresight.train": planned}
    finally:
        second.stop()
    assert set(stored_jobs(store)) == {"foresight.train"}


def test_runs_left_running_by_a_dead_leader_are_marked_interrupted(
    start: Callable[..., RunningScheduler], store: Store, runner: Any
) -> None:
    orphan = store.job_runs.start("train", runner="gone:1")
    start(plan(ingest=NEVER), runner)
    [run] = [run for run in store.job_runs.history("train") if run.id == orphan]
    assert run.outcome == "interrupted"
    assert run.finished_at is not None


def test_a_job_stored_by_a_scheduler_that_is_gone_is_skipped(store: Store) -> None:
    run_scheduled_job("no-such-context", "ingest")
    assert store.job_runs.history() == []


def test_stop_ends_leadership_and_no_job_starts_afterwards(
    settings: Settings, store: Store, runner: Any, wait_until: Callable[..., bool]
) -> None:
    running = start_scheduler(
        settings,
        store,
        plan=plan(ingest=FAST),
        runner=runner,
        lock=ProcessLock(),
        poll_seconds=POLL,
    )
    assert running.wait_until_leader(10)
    assert wait_until(lambda: runner.count("ingest") >= 1)
    running.stop()
    assert not running.is_leader
    assert running.next_run_times() == {}  # no APScheduler instance left to fire
    # Were a stored job fired anyway (by a scheduler still holding it), its context
    # is gone: it is skipped, not run.
    key, name = stored_jobs(store)["foresight.ingest"]["args"]
    count, runs = runner.count("ingest"), len(store.job_runs.history("ingest"))
    run_scheduled_job(key, name)
    assert runner.count("ingest") == count
    assert len(store.job_runs.history("ingest")) == runs


def test_the_leader_records_itself_and_clears_the_record_when_it_steps_down(
    settings: Settings, store: Store, runner: Any
) -> None:
    assert store.leader.current() is None
    running = start_scheduler(
        settings, store, plan=plan(ingest=NEVER), runner=runner, poll_seconds=POLL
    )
    try:
        assert running.wait_until_leader(10)
        leader = store.leader.current()
        assert leader is not None
        assert leader.holder == runner_identity()
        assert leader.since.tzinfo is not None
    finally:
        running.stop()
    assert store.leader.current() is None


def test_a_run_whose_work_is_cancelled_is_recorded_interrupted_and_follows_up_nothing(
    settings: Settings, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    follow_ups: list[str] = []

    class Recorder:
        def run_soon(self, name: str) -> None:
            follow_ups.append(name)

    def cancelled(name: str, settings: Settings) -> JobReport:
        raise WorkCancelled("the executor cancelled the work queued on it")

    register("k-cancel", JobContext(settings, store, cancelled, Recorder()))
    try:
        run_scheduled_job("k-cancel", "train")  # does not raise
    finally:
        unregister("k-cancel")

    [run] = store.job_runs.history("train")
    assert run.outcome == "interrupted"
    assert follow_ups == []
    assert "job train stopped early: the process is stopping" in caplog.text
