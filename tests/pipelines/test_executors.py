"""Choosing where work fans out: in process, a local pool, or a Dask scheduler."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from concurrent.futures import BrokenExecutor, Executor, ProcessPoolExecutor

import pytest
from distributed import LocalCluster

from forecaster.exceptions import ConfigError, WorkCancelled
from forecaster.fanout import fan_out
from pipelines.executors import cancel_local_work, make_executor, stop_local_pools

pytestmark = pytest.mark.timeout(60)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(autouse=True)
def _no_pools_of_earlier_tests() -> None:
    """Stop what earlier tests left open: the forecast job keeps its pool between runs."""
    cancel_local_work()


def test_one_worker_runs_in_process() -> None:
    with make_executor(1) as executor:
        assert executor is None


def test_several_workers_get_a_process_pool() -> None:
    with make_executor(2) as executor:
        assert isinstance(executor, ProcessPoolExecutor)
        pids = {executor.submit(os.getpid).result() for _ in range(4)}
    assert os.getpid() not in pids


def _thread_settings() -> tuple[str | None, list[int]]:
    from threadpoolctl import threadpool_info  # type: ignore[import-untyped]

    return os.environ.get("OMP_NUM_THREADS"), [int(i["num_threads"]) for i in threadpool_info()]


def test_pool_workers_run_numerical_libraries_on_one_thread() -> None:
    # numpy's BLAS is loaded in this process, so forked workers inherit it loaded.
    import numpy as np

    assert np.ones(2).sum() == 2.0
    with make_executor(2) as executor:
        assert executor is not None
        variable, threads = executor.submit(_thread_settings).result()
    assert variable == "1"
    assert threads
    assert set(threads) == {1}


def test_an_unreachable_dask_scheduler_fails_fast_naming_the_address() -> None:
    address = f"tcp://127.0.0.1:{_free_port()}"
    began = time.monotonic()
    with (
        pytest.raises(ConfigError, match=address) as caught,
        make_executor(2, address, connect_timeout_s=2),
    ):
        pytest.fail("connected to a closed port")
    assert time.monotonic() - began < 15
    assert "--dask-address" in str(caught.value)


def test_a_dask_scheduler_without_workers_is_an_error_not_a_hang() -> None:
    with (
        LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster,
        pytest.raises(ConfigError, match="no workers"),
        make_executor(2, cluster.scheduler_address, connect_timeout_s=1),
    ):
        pytest.fail("an executor without workers was handed out")


def test_cancelling_local_work_ends_a_fan_out_on_the_pool() -> None:
    outcome: list[BaseException | list[float]] = []

    with make_executor(2) as executor:
        assert executor is not None

        def run() -> None:
            try:
                outcome.append(fan_out(executor, time.sleep, [(0.5,)] * 40))
            except BaseException as exc:
                outcome.append(exc)

        runner = threading.Thread(target=run)
        runner.start()
        time.sleep(1.0)
        assert cancel_local_work() == 1
        runner.join(20)

    [raised] = outcome
    assert isinstance(raised, WorkCancelled)
    assert cancel_local_work() == 0  # the pool is forgotten once closed


def test_pool_workers_do_not_inherit_the_callers_sockets() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        with make_executor(2) as executor:
            assert executor is not None
            fds = executor.submit(_open_socket_inodes).result(timeout=30)
        inode = os.fstat(listening.fileno()).st_ino
        assert f"socket:[{inode}]" not in fds


def _open_socket_inodes() -> list[str]:
    """The socket descriptors open in this (worker) process, as /proc names them."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:"):
            found.append(target)
    return found


def test_a_kept_pool_serves_the_next_run_of_its_name_with_the_same_workers() -> None:
    with make_executor(2, keep="cycle") as first:
        assert isinstance(first, ProcessPoolExecutor)
        pids = {first.submit(os.getpid).result() for _ in range(4)}
    with make_executor(2, keep="cycle") as second:
        assert second is first
        assert {second.submit(os.getpid).result() for _ in range(4)} <= pids
    with make_executor(2, keep="other") as other:
        assert other is not first
    assert cancel_local_work() == 2  # both kept pools stopped
    with make_executor(2, keep="cycle") as after:
        assert after is not first  # a stopped pool is never handed out again
        assert after is not None
        assert after.submit(int, 3).result() == 3
    assert cancel_local_work() == 1


def test_a_kept_pool_of_another_size_is_replaced() -> None:
    with make_executor(2, keep="cycle") as first:
        assert first is not None
    with make_executor(3, keep="cycle") as second:
        assert second is not first
    cancel_local_work()


def test_a_kept_pool_whose_worker_died_between_runs_is_replaced() -> None:
    with make_executor(2, keep="cycle") as first:
        assert first is not None
        victim = first.submit(os.getpid).result()
    os.kill(victim, signal.SIGKILL)
    _wait_until_broken(first)
    with make_executor(2, keep="cycle") as second:
        assert second is not first
        assert second is not None
        assert second.submit(int, 5).result(timeout=30) == 5
    cancel_local_work()


def test_a_run_whose_worker_died_leaves_a_fresh_pool_for_the_next() -> None:
    with pytest.raises(BrokenExecutor), make_executor(2, keep="cycle") as first:
        _kill_a_worker_and_submit(first)
    with make_executor(2, keep="cycle") as second:
        assert second is not first
        assert second is not None
        assert second.submit(int, 5).result(timeout=30) == 5
    cancel_local_work()


def _kill_a_worker_and_submit(pool: Executor | None) -> None:
    """A run during which one of the pool's workers dies: its next task is refused."""
    assert isinstance(pool, ProcessPoolExecutor)
    pool.submit(os.kill, pool.submit(os.getpid).result(), signal.SIGKILL)
    _wait_until_broken(pool)
    pool.submit(int).result()


def _wait_until_broken(pool: ProcessPoolExecutor) -> None:
    """Until the pool has noticed its dead worker (its management thread does it)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            pool.submit(int)
        except BrokenExecutor:
            return
        time.sleep(0.05)
    pytest.fail("the pool never noticed its dead worker")


def test_stopping_local_pools_ends_their_workers_even_one_still_busy() -> None:
    import multiprocessing

    with make_executor(2, keep="cycle") as idle:
        assert idle is not None
        idle.submit(int).result(timeout=30)
    with make_executor(2) as busy:
        assert busy is not None
        busy.submit(time.sleep, 120)
        time.sleep(1.0)  # the task is running in a worker
        began = time.monotonic()
        assert stop_local_pools(grace_s=2.0) >= 1  # the busy worker had to be ended
    assert time.monotonic() - began < 20
    assert multiprocessing.active_children() == []
    assert cancel_local_work() == 0
