"""The jobs that date what they store, run at the time of the process's one clock.

Details: docs/scheduler.md, "Notes from the code", `pipelines/scheduler/clocked.py`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Final

from pipelines.config.settings import Settings
from pipelines.scheduler.dispatch import JobRunner

if TYPE_CHECKING:
    from pipelines.jobs.report import JobReport

ClockedJob = Callable[[Settings, datetime], "JobReport"]
"""Runs one job at a given ``now``."""

CLOCKED_JOBS: Final = ("forecast", "evaluate")
"""The jobs whose stored results are dated by their ``now``."""


def default_clocked_jobs(*, replay: bool = False) -> dict[str, ClockedJob]:
    """The forecast and evaluate jobs, taking ``now`` (imported on first use: heavy).

    Args:
        replay: the clock is the replay's ("now" moves only with new samples): the
            forecast job then does nothing, and says so, while no new sample came
            (``run_forecast(skip_unchanged=True)``) instead of recomputing the same
            forecast at every cadence.
    """
    from pipelines.jobs.evaluate import run_evaluate
    from pipelines.jobs.forecast import run_forecast

    def forecast(settings: Settings, now: datetime) -> JobReport:
        return run_forecast(settings, now=now, skip_unchanged=replay)

    def evaluate(settings: Settings, now: datetime) -> JobReport:
        return run_evaluate(settings, now=now)

    return {"forecast": forecast, "evaluate": evaluate}


def clocked_runner(
    clock: Callable[[], datetime],
    runner: JobRunner,
    *,
    jobs: Mapping[str, ClockedJob] | None = None,
    replay: bool = False,
) -> JobRunner:
    """Return a runner that runs forecast and evaluate at ``clock()``, the rest with ``runner``.

    Args:
        clock: the process's decision clock, read once per run.
        runner: runs every other job (publish, train, ingest).
        jobs: the clocked jobs by name; default :func:`default_clocked_jobs` (tests
            hand in jobs bound to their store and champion).
        replay: ``clock`` is the replay's (see :func:`default_clocked_jobs`).

    Returns:
        The runner to give :func:`~pipelines.scheduler.start_scheduler`.
    """
    chosen: Mapping[str, ClockedJob] | None = jobs

    def run(name: str, settings: Settings) -> JobReport:
        nonlocal chosen
        if name not in CLOCKED_JOBS:
            return runner(name, settings)
        if chosen is None:
            chosen = default_clocked_jobs(replay=replay)
        job = chosen.get(name)
        if job is None:
            return runner(name, settings)
        return job(settings, clock())

    return run
