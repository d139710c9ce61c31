"""Choosing where work fans out: in process, a local pool, or a Dask scheduler."""

from __future__ import annotations

import os
import socket
import time
from concurrent.futures import ProcessPoolExecutor

import pytest
from distributed import LocalCluster

from forecaster.exceptions import ConfigError
from pipelines.executors import make_executor

pytestmark = pytest.mark.timeout(60)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
