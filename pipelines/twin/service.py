"""The running service the twin drives: a ``foresight serve`` process and its HTTP API.

Details: docs/twin.md, "Notes from the code", `pipelines/twin/service.py`."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Final

import httpx

from forecaster.exceptions import ForesightError

START_TIMEOUT_S: Final = 180.0
_POLL_S: Final = 0.05
_CLI: Final = "from cli import main; main()"
_REPO: Final = Path(__file__).resolve().parents[2]


class TwinError(ForesightError):
    """The twin could not drive the service (it died, or never answered as expected)."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on ``host`` now (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Served:
    """What ``/recommendation/{pool}`` answered, the parts the twin acts on and checks.

    Attributes:
        headroom_pods: placeholder pods (the capacity buffer's replicas).
        generated_at: when the decision was made (the service's clock).
        mode: ``predictive`` or ``reactive``.
        term: the term of the chain that set the number.
        stages: the node count after each stage of the chain.
        forecast_at: when the forecast run it was decided from was made; None when it
            used none.
    """

    desired_nodes: int
    headroom_pods: int
    generated_at: datetime
    mode: str
    term: str
    stages: Mapping[str, int]
    forecast_at: datetime | None = None


class ServiceClient:
    """HTTP access to a running service.

    Args:
        base: the service's base URL, e.g. ``http://127.0.0.1:8000``.
    """

    def __init__(self, base: str, timeout: float = 60.0) -> None:
        self.base = base
        self._http = httpx.Client(base_url=base, timeout=timeout)

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def push(self, samples: Sequence[tuple[str, datetime, float]]) -> None:
        """``POST /signals/metrics``: store samples ``(series id, time, value)``.

        Raises:
            TwinError: the service refused them or is not reachable.
        """
        body = [{"series_id": sid, "ts": ts.isoformat(), "value": v} for sid, ts, v in samples]
        try:
            answer = self._http.post("/signals/metrics", json=body)
        except httpx.HTTPError as exc:
            raise TwinError(f"pushing samples to {self.base} failed: {exc}") from exc
        if answer.status_code != 200:
            raise TwinError(
                f"{self.base} refused the samples ({answer.status_code}): {answer.text}"
            )

    def recommendation(self, pool: str) -> Served | None:
        """``GET /recommendation/{pool}``; None while the pool cannot be decided yet."""
        try:
            answer = self._http.get(f"/recommendation/{pool}")
        except httpx.HTTPError:
            return None
        if answer.status_code != 200:
            return None
        body = answer.json()
        forecast_at = body["explanation"]["inputs"].get("forecast_peak_gpus", {}).get("at")
        return Served(
            forecast_at=None if forecast_at is None else datetime.fromisoformat(forecast_at),
            desired_nodes=int(body["desired_nodes"]),
            headroom_pods=int(body["headroom_pods"]),
            generated_at=datetime.fromisoformat(body["generated_at"]),
            mode=str(body["mode"]),
            term=str(body["explanation"]["term"]),
            stages={
                k: int(v) for k, v in body["explanation"]["stages"].items() if isinstance(v, int)
            },
        )

    def forecast(self, pool: str) -> tuple[datetime, str | None] | None:
        """``GET /forecast/{pool}``: the served run's ``generated_at`` and model version.

        None while the pool has no forecast (or the service does not answer).
        """
        try:
            answer = self._http.get(f"/forecast/{pool}")
        except httpx.HTTPError:
            return None
        if answer.status_code != 200:
            return None
        body = answer.json()
        version = body.get("model_version")
        return datetime.fromisoformat(body["generated_at"]), None if version is None else str(
            version
        )

    def healthy(self) -> bool:
        """True when ``/healthz`` answers 200."""
        try:
            return self._http.get("/healthz", timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False


class ServeProcess:
    """``foresight serve --clock replay`` as a child process on a free loopback port.

    Args:
        config: the YAML settings file both the twin and the service read.
        workdir: the process's working directory; its output goes to ``serve.log`` there.
        env: the environment (the caller drops ``FORESIGHT_*`` variables so the
            config file decides).
    """

    def __init__(self, config: Path, workdir: Path, env: Mapping[str, str]) -> None:
        self.config, self.workdir, self.env = config, workdir, dict(env)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The running process's id, None when it is not running."""
        return None if self._process is None else self._process.pid

    def start(self, client: ServiceClient, timeout: float = START_TIMEOUT_S) -> None:
        """Start the service and wait until ``/healthz`` answers.

        Raises:
            TwinError: it exited early or did not answer within ``timeout`` seconds.
        """
        self._log = (self.workdir / "serve.log").open("ab")
        command = [sys.executable, "-c", _CLI, "serve", "--clock", "replay"]
        command += ["--port", str(self.port), "--config", str(self.config)]
        self._process = subprocess.Popen(
            command, cwd=self.workdir, env=self.env, stdout=self._log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + timeout
        while not client.healthy():
            if self._process.poll() is not None:
                raise TwinError(
                    f"foresight serve exited with {self._process.returncode}; see "
                    f"{self.workdir / 'serve.log'}"
                )
            if time.monotonic() > deadline:
                raise TwinError(f"foresight serve did not answer within {timeout:.0f} s")
            time.sleep(0.2)

    def kill(self) -> None:
        """SIGKILL the service (no clean shutdown: what a crashed leader leaves)."""
        if self._process is not None and self._process.poll() is None:
            os.kill(self._process.pid, signal.SIGKILL)
            self._process.wait()
        self._close_log()

    def stop(self) -> None:
        """Stop the service cleanly (SIGTERM), killing it if it does not stop in 60 s."""
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


def twin_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The service's environment: this one without ``FORESIGHT_*`` (the config file decides)."""
    source = os.environ if base is None else base
    env = {k: v for k, v in source.items() if not k.startswith("FORESIGHT_")}
    env["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"
    # The child imports the same code as this process (a worktree's, when run from one).
    inherited = source.get("PYTHONPATH")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(_REPO), inherited)))
    return env


def wait_until(predicate: Any, timeout: float, what: str) -> None:
    """Poll ``predicate()`` until true (every 50 ms), never a blind sleep.

    Raises:
        TwinError: it stayed false for ``timeout`` seconds; ``what`` says what was awaited.
    """
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TwinError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(_POLL_S)
