"""Fanning per-series work out in a bounded number of tasks."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

import pytest

from forecaster.exceptions import WorkCancelled
from forecaster.fanout import MAX_TASKS, fan_out


def scaled(x: int, label: str, factor: int) -> tuple[str, int]:
    """A per-item call with one item argument and one shared (module level: pickled)."""
    return label, x * factor


def fails_on(x: int, bad: int) -> int:
    if x == bad:
        raise ValueError(f"item {x} is bad")
    return x


class CountingExecutor(Executor):
    """Runs tasks on threads and counts how many were submitted."""

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(2)
        self.submitted = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.submitted += 1
        return self.pool.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.pool.shutdown(wait=wait, cancel_futures=cancel_futures)


def test_results_keep_the_items_order_on_a_process_pool() -> None:
    items = [(i, f"s{i}") for i in range(300)]
    with ProcessPoolExecutor(2) as pool:
        out = fan_out(pool, scaled, items, shared=(3,))
    assert out == [(f"s{i}", 3 * i) for i in range(300)]


@pytest.mark.parametrize("n", [1, 5, MAX_TASKS, MAX_TASKS + 1, 1000])
def test_at_most_max_tasks_are_submitted_and_progress_reaches_the_total(n: int) -> None:
    executor = CountingExecutor()
    calls: list[tuple[int, int]] = []
    with executor:
        out = fan_out(
            executor, scaled, [(i, "x") for i in range(n)], (2,), lambda d, t: calls.append((d, t))
        )
    assert [v for _, v in out] == [2 * i for i in range(n)]
    assert executor.submitted <= MAX_TASKS
    assert executor.submitted == n or n > MAX_TASKS  # one item per task while they fit
    assert calls[-1] == (n, n)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)


def test_no_items_submits_nothing() -> None:
    executor = CountingExecutor()
    with executor:
        assert fan_out(executor, scaled, [], ("x", 1)) == []
    assert executor.submitted == 0


def test_a_failing_item_raises_its_own_error() -> None:
    with ProcessPoolExecutor(2) as pool, pytest.raises(ValueError, match="item 7 is bad"):
        fan_out(pool, fails_on, [(i,) for i in range(20)], shared=(7,))


def test_work_cancelled_on_the_executor_ends_the_fan_out() -> None:
    started, release = threading.Event(), threading.Event()

    def held(x: int) -> int:
        started.set()
        assert release.wait(10), "the test never released the first task"
        return x

    pool = ThreadPoolExecutor(1)
    outcome: list[BaseException | list[int]] = []

    def run() -> None:
        try:
            outcome.append(fan_out(pool, held, [(i,) for i in range(5)]))
        except BaseException as exc:
            outcome.append(exc)

    runner = threading.Thread(target=run)
    runner.start()
    assert started.wait(10)
    pool.shutdown(wait=False, cancel_futures=True)
    release.set()
    runner.join(10)

    [raised] = outcome
    assert isinstance(raised, WorkCancelled)
    assert not isinstance(raised, Exception)  # `except Exception` does not swallow it


def test_fanning_out_to_a_shut_down_executor_is_a_cancellation() -> None:
    pool = ThreadPoolExecutor(1)
    pool.shutdown()
    with pytest.raises(WorkCancelled, match="shut down"):
        fan_out(pool, fails_on, [(1,)], shared=(0,))


class _Refusing(ThreadPoolExecutor):
    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        raise RuntimeError("the workers are gone")


def test_another_failure_to_submit_stays_an_error() -> None:
    with _Refusing(1) as pool, pytest.raises(RuntimeError, match="workers are gone"):
        fan_out(pool, fails_on, [(1,)], shared=(0,))
