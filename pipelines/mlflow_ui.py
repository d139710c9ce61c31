"""Start the MLflow UI beside ``foresight serve`` for the embedded default (docs/jobs.md)."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx

from forecaster.exceptions import ConfigError
from pipelines.config.settings import Settings

logger = logging.getLogger(__name__)

START_TIMEOUT_S = 180.0


@contextmanager
def mlflow_ui(settings: Settings, host: str, port: int) -> Iterator[str]:
    """Serve the MLflow UI of ``settings``' tracking store; yield its address.

    The UI starts in the background (a new store takes MLflow a while to migrate);
    whether it came up, or why not, is logged.

    Raises:
        ConfigError: ``mlflow`` is not installed beside Foresight.
    """
    uri = settings.mlflow_tracking_uri
    if uri.startswith(("http://", "https://")):
        yield uri
        return
    command = [
        _mlflow_executable(),
        "ui",
        "--backend-store-uri",
        uri,
        "--default-artifact-root",
        settings.mlflow_artifacts_dir.as_uri(),
        "--host",
        host,
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    address = f"http://{host}:{port}"
    _create_store(settings)
    log_path = settings.models_dir / "mlflow-ui.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=ui_environment(os.environ)
        )
    watcher = threading.Thread(
        target=_report_start,
        args=(process, address, log_path),
        name="mlflow-ui-start",
        daemon=True,
    )
    watcher.start()
    try:
        yield address
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def ui_environment(base: Mapping[str, str]) -> dict[str, str]:
    """The UI's environment: ``base`` without MLflow's job execution.

    By default the MLflow server also starts a job runner and seven job consumer
    processes (GenAI judges, trace roll-ups), about 0.7 GB that reviewing training
    runs never uses; without them the UI is two processes (``mlflow ui`` and its
    uvicorn worker), about 0.5 GB (README, "The two commands").
    """
    return {**base, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


def _create_store(settings: Settings) -> None:
    """Create the local tracking store once, first: two processes creating it race on its tables."""
    from mlflow import MlflowClient

    settings.models_dir.mkdir(parents=True, exist_ok=True)
    MlflowClient(tracking_uri=settings.mlflow_tracking_uri).search_experiments(max_results=1)


def _mlflow_executable() -> str:
    beside = Path(sys.executable).with_name("mlflow")
    if beside.exists():
        return str(beside)
    found = shutil.which("mlflow")
    if found is None:
        raise ConfigError("the mlflow command is not installed; run `make venv` first")
    return found


def _report_start(process: subprocess.Popen[bytes], address: str, log_path: Path) -> None:
    try:
        _wait_until_up(process, address)
    except ConfigError as exc:
        logger.error("%s (its log: %s)", exc, log_path)
    else:
        logger.info("MLflow UI ready at %s", address)


def _wait_until_up(process: subprocess.Popen[bytes], address: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ConfigError(
                f"the MLflow UI exited at start on {address} (code {process.returncode}); "
                "is the port taken? choose another with --mlflow-ui-port"
            )
        try:
            if httpx.get(f"{address}/health", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise ConfigError(f"the MLflow UI did not answer on {address} within {START_TIMEOUT_S:.0f} s")
