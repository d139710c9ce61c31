"""Fanning per-series work out to an executor in a few dozen tasks, not one per series.

Details: docs/forecasting.md, "Notes from the code", `forecaster/fanout.py`."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, BrokenExecutor, Executor, Future, wait
from typing import Any, Final, TypeVar

from forecaster.exceptions import WorkCancelled

R = TypeVar("R")

CANCEL_CHECK_S: Final = 0.5
"""How often a fan-out waiting for its tasks checks whether they were cancelled."""

MAX_TASKS: Final = 64
"""Most tasks one call submits: enough to keep a process pool or a small Dask cluster
busy to the end (tasks of different series take different times), few enough that the
shared arguments are pickled a few dozen times."""


def fan_out(
    executor: Executor,
    fn: Callable[..., R],
    items: Sequence[tuple[Any, ...]],
    shared: tuple[Any, ...] = (),
    progress: Callable[[int, int], None] | None = None,
) -> list[R]:
    """Return ``[fn(*item, *shared) for item in items]``, computed on ``executor``.

    Args:
        executor: a process pool or a Dask executor.
        fn: a module-level function (executors pickle it by reference).
        items: the per-series arguments, one tuple per call.
        shared: arguments every call gets, pickled once per task.
        progress: called with ``(items done, items total)`` as tasks finish.

    Raises:
        WorkCancelled: the executor was shut down with its queued work cancelled
            (the process is stopping); tasks already running are not waited for.
        Whatever ``fn`` raises, as soon as the task that raised it finishes.
    """
    size = max(1, math.ceil(len(items) / MAX_TASKS))
    chunks = [list(items[i : i + size]) for i in range(0, len(items), size)]
    try:
        futures: dict[Future[list[R]], int] = {
            executor.submit(_run_chunk, fn, chunk, shared): len(chunk) for chunk in chunks
        }
    except BrokenExecutor:
        raise  # a worker died: an error, not a stop
    except RuntimeError as exc:
        # Only the standard executors' refusal after shutdown is a stop; any other
        # failure to submit (a Dask cluster whose workers are gone) stays an error.
        if "after shutdown" not in str(exc) and "interpreter shutdown" not in str(exc):
            raise
        raise WorkCancelled(f"the executor was shut down: {exc}") from exc
    done = 0
    pending = set(futures)
    while pending:
        finished, pending = wait(pending, timeout=CANCEL_CHECK_S, return_when=FIRST_COMPLETED)
        for future in finished:
            if future.cancelled():
                raise WorkCancelled("the executor cancelled the work queued on it")
            future.result()  # surface a worker's error as soon as it happens
            done += futures[future]
            if progress is not None:
                progress(done, len(items))
        # An executor shut down with cancel_futures cancels what is queued without
        # waking a waiter: look for it, rather than wait forever.
        if any(future.cancelled() for future in pending):
            raise WorkCancelled("the executor cancelled the work queued on it")
    return [result for future in futures for result in future.result()]


def _run_chunk(
    fn: Callable[..., R], chunk: list[tuple[Any, ...]], shared: tuple[Any, ...]
) -> list[R]:
    """Run one task's calls in order (module level: executors pickle it)."""
    return [fn(*item, *shared) for item in chunk]
