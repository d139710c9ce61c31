"""A taken port is reported at once, naming the port and how to choose another."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from forecaster.exceptions import ConfigError
from pipelines.ports import ensure_free


def _listening() -> tuple[socket.socket, int]:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    return holder, int(holder.getsockname()[1])


def test_a_taken_port_is_a_config_error_naming_it() -> None:
    holder, port = _listening()
    with holder, pytest.raises(ConfigError, match=f"port {port} on 127.0.0.1 is taken.*--port"):
        ensure_free("127.0.0.1", port, "the API", "--port")


def test_a_free_port_passes() -> None:
    holder, port = _listening()
    holder.close()
    ensure_free("127.0.0.1", port, "the API", "--port")


def test_make_runs_check_names_the_make_variable() -> None:
    holder, port = _listening()
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    free_port = int(free.getsockname()[1])
    free.close()
    with holder:
        done = subprocess.run(
            [sys.executable, "-m", "pipelines.ports", "127.0.0.1", str(free_port), str(port)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    assert done.returncode == 2
    assert f"port {port} on 127.0.0.1 is taken" in done.stderr
    assert "MLFLOW_UI_PORT=" in done.stderr
