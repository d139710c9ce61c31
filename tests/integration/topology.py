"""Processes of the production topology, started from the command line as docs/deploy.md says.

An ``mlflow server`` with proxied artifacts on PostgreSQL, a ``dask scheduler`` with
``dask worker`` processes on pinned ports, and ``foresight serve`` replicas sharing a
PostgreSQL store, each with its own models directory. Each process runs in its own
process group with its output in a log file, so a failure names the log to read.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest

BIN = Path(sys.executable).parent
STEP = pd.Timedelta(minutes=10)

POOLS_YAML = """
pools:
  - name: gpu-a
    node_group_id: ng-gpu-a
    gpus_per_node: 8
    min_nodes: 1
    max_nodes: 20
    lead_time: 10m
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def require(executable: str) -> Path:
    """The path of a command of this environment; skip (fail under CI=true) without it."""
    path = BIN / executable
    if not path.exists():
        message = f"{executable} is not installed at {path}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message}; CI must run the topology test")
        pytest.skip(message)
    return path


def wait_for(condition: Callable[[], bool], timeout: float, what: str, every: float = 0.2) -> float:
    """Poll until ``condition`` holds; return the seconds it took, fail after ``timeout``."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            if condition():
                return time.monotonic() - started
        except (httpx.HTTPError, OSError, KeyError, ValueError):
            pass
        time.sleep(every)
    pytest.fail(f"{what}: not within {timeout:.0f} s")


class Process:
    """A command in its own process group, its output in ``log``."""

    def __init__(
        self, command: Sequence[str], log: Path, *, cwd: Path, env: dict[str, str] | None = None
    ) -> None:
        self.command = list(command)
        self.log = log
        self._cwd = cwd
        self._env = env
        self.popen = self._start()

    def _start(self) -> subprocess.Popen[bytes]:
        with self.log.open("ab") as out:
            return subprocess.Popen(
                self.command,
                cwd=self._cwd,
                env=self._env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def check_alive(self) -> None:
        if not self.alive():
            pytest.fail(f"{self.command[0]} exited {self.popen.returncode}; see {self.log}")

    def restart(self) -> None:
        self.stop()
        self.popen = self._start()

    def kill(self) -> None:
        """SIGKILL the process alone (as a crashed pod), not its group."""
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
            self.popen.wait(10)

    def stop(self) -> None:
        if not self.alive():
            return
        os.killpg(self.pid, signal.SIGTERM)
        try:
            self.popen.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.pid, signal.SIGKILL)
            self.popen.wait(10)


def write_sample(directory: Path, *, days: int = 3, seed: int = 4) -> pd.Timestamp:
    """One pool's signals at 10 min, ending at the current step; return the newest time."""
    rng = np.random.default_rng(seed)
    end = pd.Timestamp.now(tz="UTC").floor(STEP)
    n = days * 144
    ds = pd.date_range(end=end, periods=n, freq=STEP)
    phase = np.arange(n) % 144 / 144
    demand = np.round(40 + 25 * np.sin(2 * np.pi * phase) + rng.normal(0, 2, n)).clip(0)
    queue = np.round(demand * 0.2)
    signals = {
        "allocated_gpus": demand - queue,
        "queue_gpus": queue,
        "nodes": np.ceil((demand - queue) / 8) + 1,
        "gpu_util": np.full(n, 70.0),
    }
    frame = pd.concat(
        pd.DataFrame({"unique_id": f"gpu-a/{name}", "ds": ds, "y": values})
        for name, values in signals.items()
    )
    frame["ds"] = frame["ds"].dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    directory.mkdir(parents=True)
    frame.to_csv(directory / "metrics.csv.gz", index=False)
    (directory / "pools.yaml").write_text(POOLS_YAML)
    return end
