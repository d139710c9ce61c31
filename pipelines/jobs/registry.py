"""Jobs by name, for the scheduler and the CLI: :func:`run_job`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from forecaster.exceptions import ConfigError
from pipelines.config.settings import Settings
from pipelines.jobs.evaluate import run_evaluate
from pipelines.jobs.forecast import run_forecast
from pipelines.jobs.ingest import run_ingest
from pipelines.jobs.publish import run_publish
from pipelines.jobs.report import JobReport
from pipelines.jobs.train import run_train

JobFunction = Callable[[Settings], JobReport]

_JOBS: Final[Mapping[str, JobFunction]] = {
    "ingest": run_ingest,
    "train": run_train,
    "forecast": run_forecast,
    "evaluate": run_evaluate,
    "publish": run_publish,
}


def run_job(name: str, settings: Settings) -> JobReport:
    """Run one job by name with its defaults built from ``settings``, and nothing else.

    What follows a job (train after an evaluate that asks for it, forecast after a
    training) is the scheduler's: :func:`pipelines.scheduler.dispatch.follow_up`.
    ``publish`` is skipped here: it needs a publisher, which the CLI hands in through
    :func:`pipelines.jobs.publish.publishing_runner`.

    Args:
        name: ingest, train, forecast, evaluate or publish.
        settings: the deployment's settings.

    Raises:
        ConfigError: ``name`` is not a job; the message lists the known ones.
    """
    job = _JOBS.get(name)
    if job is None:
        raise ConfigError(f"unknown job {name!r}; known jobs: {', '.join(_JOBS)}")
    return job(settings)
