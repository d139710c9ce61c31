"""Where training and backtests fan out: nowhere, a local process pool, or Dask (docs/jobs.md)."""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import BrokenExecutor, Executor, ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any, Final

from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from forecaster.exceptions import ConfigError

logger = logging.getLogger(__name__)

DASK_CONNECT_TIMEOUT_S: Final = 10.0
"""Seconds to wait for a Dask scheduler before saying it is unreachable."""
THREAD_VARIABLES: Final = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
"""Thread-count variables of the numerical runtimes, set to 1 in pool workers."""
WORKER_PRELOAD: Final = (
    "numpy",
    "pandas",
    "statsmodels.tsa.api",
    "sklearn.ensemble",
    "forecaster.series_tasks",
    "forecaster.models.catalog",
    "forecaster.models.guarded",
    "forecaster.peak.online",
)
"""Imported once by the fork server, so each new worker starts with them loaded (the
forecast job's tasks and the models they unpickle; ``forecaster.series_tasks``)."""

_pools: set[ProcessPoolExecutor] = set()
"""The local pools open in this process (:func:`cancel_local_work` stops them)."""
_kept: dict[str, tuple[int, ProcessPoolExecutor]] = {}
"""Kept pools (with their size) by the name they were asked for with, open between runs."""
_pools_lock = threading.Lock()


def cancel_local_work() -> int:
    """Cancel the work queued on every local pool of this process; return how many pools.

    For a process that is stopping (``foresight serve`` on Ctrl-C) while a scheduled
    training or forecast fans out: the run ends with
    :class:`~forecaster.exceptions.WorkCancelled` once the tasks already running in
    the workers finish, instead of after all of its work. Nothing it would have
    written is half-written: a training registers and promotes only at its end.
    """
    with _pools_lock:
        pools = list(_pools)
        _pools.clear()
        _kept.clear()  # a stopped pool is never handed out again
    for pool in pools:
        pool.shutdown(wait=False, cancel_futures=True)
    return len(pools)


def stop_local_pools(grace_s: float = 5.0) -> int:
    """Stop every local pool of this process for good, worker processes included.

    For a process about to exit (``foresight serve`` after its scheduler stopped, the
    test session's end): :func:`cancel_local_work`, then every ``multiprocessing``
    child of this process still alive after ``grace_s`` is terminated (the pools'
    workers; whatever else this process started that way goes too). A pool shut down
    without waiting leaves its manager thread to stop the workers, and the interpreter
    joins that thread at exit; where a worker died earlier (a broken pool, dropped)
    that thread was seen never to finish, holding the exit for good after a test
    session had printed its summary.
    Returns how many worker processes had to be terminated.
    """
    cancel_local_work()
    deadline = time.monotonic() + grace_s
    stuck = 0
    for process in multiprocessing.active_children():
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            stuck += 1
            process.terminate()
            process.join(1.0)
            if process.is_alive():
                process.kill()
                process.join(1.0)
    if stuck:
        logger.warning("stopped %d local worker process(es) that did not exit", stuck)
    return stuck


def single_threaded_worker() -> None:
    """Pool initializer: one thread per numerical runtime in this worker process.

    The variables cover runtimes loaded later; ``threadpool_limits`` caps the ones a
    forked worker inherited already loaded.
    """
    for name in THREAD_VARIABLES:
        os.environ[name] = "1"
    threadpool_limits(limits=1)


@contextmanager
def make_executor(
    workers: int,
    dask_address: str | None = None,
    *,
    connect_timeout_s: float = DASK_CONNECT_TIMEOUT_S,
    keep: str | None = None,
) -> Iterator[Executor | None]:
    """Yield the executor work fans out to, and shut it down afterwards.

    Args:
        workers: local processes when no Dask address is given; ``1`` (or less)
            yields ``None``, i.e. run in this process.
        dask_address: a Dask scheduler address (``tcp://host:8786``); when set, work
            goes to that cluster and ``workers`` is ignored (the cluster's workers
            decide the parallelism).
        connect_timeout_s: how long to wait for the Dask scheduler.
        keep: keep the local pool open after the run under this name, and reuse the
            one kept under it (replaced when broken or of another size); for a job
            run every few minutes. Ignored with Dask or a single worker.

    Raises:
        ConfigError: the Dask scheduler at ``dask_address`` cannot be reached (the
            message names the address and what to check).
    """
    if dask_address:
        with _dask_executor(dask_address, connect_timeout_s) as executor:
            yield executor
        return
    if workers <= 1:
        yield None
        return
    if keep is not None:
        with _kept_pool(keep, workers) as pool:
            yield pool
        return
    pool = _new_pool(workers)
    try:
        with pool:
            yield pool
    finally:
        with _pools_lock:
            _pools.discard(pool)


def _new_pool(workers: int) -> ProcessPoolExecutor:
    """A local pool of ``workers`` processes, registered for :func:`cancel_local_work`."""
    # Workers come from a fork server, not forked from this process: a fork would
    # inherit its sockets (the port `foresight serve` listens on stayed taken while a
    # worker lived) and whatever locks its threads held at that instant.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(WORKER_PRELOAD))
    pool = ProcessPoolExecutor(
        max_workers=workers, initializer=single_threaded_worker, mp_context=context
    )
    with _pools_lock:
        _pools.add(pool)
    return pool


@contextmanager
def _kept_pool(name: str, workers: int) -> Iterator[ProcessPoolExecutor]:
    """The pool kept under ``name``, healthy and of ``workers``; dropped if it breaks."""
    with _pools_lock:
        size, pool = _kept.pop(name, (workers, None))
    if pool is not None and (size != workers or not _usable(pool)):
        _drop(pool)
        pool = None
    pool = pool or _new_pool(workers)
    try:
        yield pool
    except BaseException:
        # A worker died, the run failed with tasks still queued, or it was cancelled:
        # the next run starts on a fresh pool, never behind this run's leftovers.
        _drop(pool)
        raise
    _keep(name, workers, pool)


def _usable(pool: ProcessPoolExecutor) -> bool:
    """Whether a kept pool can take work: not shut down, no worker died."""
    try:
        # Raises at once when a worker died since the last run (BrokenExecutor) or the
        # pool was shut down (RuntimeError); otherwise a no-op task.
        pool.submit(int)
    except (BrokenExecutor, RuntimeError):
        return False
    return True


def _keep(name: str, workers: int, pool: ProcessPoolExecutor) -> None:
    with _pools_lock:
        if pool in _pools:  # not stopped by cancel_local_work meanwhile
            _kept[name] = (workers, pool)


def _drop(pool: ProcessPoolExecutor) -> None:
    with _pools_lock:
        _pools.discard(pool)
    pool.shutdown(wait=False, cancel_futures=True)


@contextmanager
def _dask_executor(address: str, timeout_s: float) -> Iterator[Executor]:
    # Imported here: distributed is heavy and only a Dask deployment needs it.
    from distributed import Client

    try:
        # Not the default client: a global would leak into unrelated dask calls.
        client = Client(address, timeout=timeout_s, set_as_default=False)  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError, ValueError) as exc:
        raise ConfigError(
            f"could not connect to the Dask scheduler at {address} within {timeout_s:g} s "
            f"({type(exc).__name__}: {exc}). Start the scheduler and its workers "
            "(`dask scheduler`, `dask worker <address>`), or fix --dask-address / "
            "scheduler.dask_address (FORESIGHT_SCHEDULER__DASK_ADDRESS); unset it to use "
            "a local process pool."
        ) from exc
    try:
        _require_workers(client, address, timeout_s)
        # pure=False: every submission is its own task, never a cached result of an
        # earlier identical-looking one, as with a process pool.
        executor = client.get_executor(pure=False)  # type: ignore[no-untyped-call]
        try:
            yield executor
        except BaseException:
            executor.shutdown(wait=False)  # a failed run must not wait for the rest
            raise
        executor.shutdown(wait=True)
    finally:
        client.close()  # type: ignore[no-untyped-call]


def _require_workers(client: Any, address: str, timeout_s: float) -> None:
    """Fail now, not hang later, when the scheduler has no worker to run tasks."""
    try:
        client.wait_for_workers(1, timeout=timeout_s)
    except TimeoutError as exc:
        raise ConfigError(
            f"the Dask scheduler at {address} has no workers after {timeout_s:g} s; start "
            f"some (`dask worker {address}`) or unset --dask-address to use a local pool."
        ) from exc
    workers = len(client.scheduler_info().get("workers", {}))
    logger.info("fanning out to the Dask cluster at %s (%d workers)", address, workers)
