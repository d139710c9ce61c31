"""The one place a job's fan-out executor is made from the settings.

Training fans out per series through a :class:`concurrent.futures.Executor`: a local
process pool of ``scheduler.workers``, or the Dask cluster at
``scheduler.dask_address``, through the same code path (:mod:`pipelines.executors`).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Executor
from contextlib import contextmanager

from forecaster.config.settings import Settings
from pipelines.executors import make_executor as _make_executor


@contextmanager
def make_executor(settings: Settings) -> Iterator[Executor | None]:
    """Yield the executor training fans out to, shut down on exit.

    ``None`` (work in this process) when ``scheduler.workers`` is 1 and no Dask
    address is set.

    Raises:
        ConfigError: the Dask scheduler at ``scheduler.dask_address`` is unreachable.
    """
    with _make_executor(settings.scheduler.workers, settings.scheduler.dask_address) as executor:
        yield executor
