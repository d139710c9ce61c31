"""The job-run history in the store: running first, final last, latest per job."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pipelines.store.store import Store

T0 = datetime(2025, 3, 1, 12, tzinfo=UTC)


def test_a_run_is_running_until_finished(store: Store) -> None:
    run_id = store.job_runs.start("ingest", runner="host:1", started_at=T0)
    [running] = store.job_runs.history()
    assert (running.id, running.job, running.outcome) == (run_id, "ingest", "running")
    assert running.started_at == T0
    assert running.finished_at is None
    store.job_runs.finish(
        run_id,
        "partial",
        "ingested 10 samples",
        finished_at=T0 + timedelta(seconds=3),
        problems={"a/q": "NaN values dropped"},
        details={"rows": 10},
    )
    [done] = store.job_runs.history()
    assert done.outcome == "partial"
    assert done.finished_at == T0 + timedelta(seconds=3)
    assert done.problems == {"a/q": "NaN values dropped"}
    assert done.details == {"rows": 10}
    assert done.runner == "host:1"


def test_latest_is_the_newest_run_of_each_job(store: Store) -> None:
    for minute, job in enumerate(["ingest", "train", "ingest", "publish", "ingest"]):
        run_id = store.job_runs.start(job, runner="h:1", started_at=T0 + timedelta(minutes=minute))
        store.job_runs.finish(run_id, "ok", f"{job} at {minute}")
    latest = store.job_runs.latest()
    assert {job: run.summary for job, run in latest.items()} == {
        "ingest": "ingest at 4",
        "train": "train at 1",
        "publish": "publish at 3",
    }
    assert [run.summary for run in store.job_runs.history("ingest", limit=2)] == [
        "ingest at 4",
        "ingest at 2",
    ]


def test_orphaned_runs_are_marked_interrupted_and_finished_ones_kept(store: Store) -> None:
    done = store.job_runs.start("train", runner="h:1", started_at=T0)
    store.job_runs.finish(done, "ok", "trained")
    orphan = store.job_runs.start("train", runner="h:2", started_at=T0 + timedelta(hours=1))
    assert store.job_runs.mark_interrupted(now=T0 + timedelta(hours=2)) == 1
    runs = {run.id: run for run in store.job_runs.history()}
    assert runs[done].outcome == "ok"
    assert runs[orphan].outcome == "interrupted"
    assert runs[orphan].finished_at == T0 + timedelta(hours=2)
    assert store.job_runs.mark_interrupted() == 0


def test_long_summaries_are_cut_not_rejected(store: Store) -> None:
    run_id = store.job_runs.start("ingest", runner="h:1")
    store.job_runs.finish(run_id, "failed", "x" * 10_000)
    assert len(store.job_runs.history()[0].summary) == 2_000
