"""Fixtures that start real servers for integration tests."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import URL, create_engine, text

_START_TIMEOUT_S = 90.0
PG_HOST, PG_PORT, PG_ADMIN_DATABASE = "127.0.0.1", 5432, "test"
PG_USERS = ("postgres", "root")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=1) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Start ``mlflow server`` on a free local port and yield its tracking URI.

    The server has its own sqlite backend store and proxies artifacts to a local
    directory (``mlflow-artifacts:/``), as a deployment's tracking server does.
    """
    mlflow_bin = Path(sys.executable).parent / "mlflow"
    if not mlflow_bin.exists():
        pytest.skip(f"mlflow CLI not found at {mlflow_bin}")
    root = tmp_path_factory.mktemp("mlflow-server")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = (root / "server.log").open("wb")
    proc = subprocess.Popen(
        [
            str(mlflow_bin),
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
            "--backend-store-uri",
            f"sqlite:///{root}/mlflow.db",
            "--artifacts-destination",
            str(root / "artifacts"),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=root,
        # Own process group, so teardown stops the server's worker processes too.
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while not _healthy(url):
            if proc.poll() is not None:
                pytest.fail(f"mlflow server exited with {proc.returncode}; see {root}/server.log")
            if time.monotonic() > deadline:
                pytest.fail(f"mlflow server not healthy after {_START_TIMEOUT_S:.0f} s")
            time.sleep(0.25)
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
        log.close()


def _url(user: str, database: str) -> URL:
    return URL.create(
        "postgresql+psycopg", username=user, host=PG_HOST, port=PG_PORT, database=database
    )


def _unavailable(reason: str) -> None:
    where = f"PostgreSQL at {PG_HOST}:{PG_PORT} (database {PG_ADMIN_DATABASE!r})"
    message = f"{where} is not usable: {reason}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message}; CI must run the PostgreSQL integration tests")
    pytest.skip(message)


@pytest.fixture(scope="session")
def pg_admin() -> URL:
    """The URL of a superuser connection to the server's admin database."""
    if importlib.util.find_spec("psycopg") is None:
        _unavailable("the psycopg driver is not installed (pip install 'psycopg[binary]>=3.2')")
    errors = []
    for user in PG_USERS:
        url = _url(user, PG_ADMIN_DATABASE)
        engine = create_engine(url, connect_args={"connect_timeout": 3})
        try:
            with engine.connect() as connection:
                connection.execute(text("SELECT 1"))
            return url
        except Exception as exc:  # any failure means: try the next user, then skip
            errors.append(f"{user}: {' '.join(str(exc).split())[:200]}")
        finally:
            engine.dispose()
    _unavailable("; ".join(errors))
    raise AssertionError("unreachable")
