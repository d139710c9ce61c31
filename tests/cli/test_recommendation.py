"""``foresight recommendation``: the running service's answer, else the store's newest."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cli import app
from cli.support import console
from pipelines.store.store import open_store

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2025, 3, 30, 23, 55, tzinfo=UTC)


def payload(pool: str, desired: int, summary: str) -> dict[str, Any]:
    return {
        "pool": pool,
        "current_nodes": 4,
        "desired_nodes": desired,
        "action": "scale_up",
        "mode": "predictive",
        "generated_at": "2025-03-30T23:55:00Z",
        "explanation": {"summary": summary},
    }


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(console, "width", 200)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "foresight.yaml"
    path.write_text(f"root: {tmp_path}\npools_file: {ROOT / 'data' / 'sample' / 'pools.yaml'}\n")
    return path


@pytest.fixture
def stored(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 'data' / 'foresight.db'}") as store:
        for pool, desired in (("a100-train", 9), ("l4-infer", 3)):
            store.recommendations.append(
                pool, T0, desired, "scale_up", payload(pool, desired, f"{pool} from the store")
            )


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def service() -> Iterator[str]:
    """A stand-in service on a free local port answering ``/recommendation`` like the API."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            pools = [payload("a100-train", 12, "a100-train from the service")]
            if self.path == "/recommendation":
                self._send(200, {"pools": pools})
            elif self.path == "/recommendation/a100-train":
                self._send(200, pools[0])
            else:
                self._send(404, {"message": "no pool 'nope'; pools: a100-train"})

        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def run(*args: str) -> Any:
    return CliRunner().invoke(app, ["recommendation", *args])


def test_the_running_service_is_read_first(config: Path, stored: None, service: str) -> None:
    result = run("--config", str(config), "--url", service)

    assert result.exit_code == 0, result.output
    assert f"from the service at {service}" in result.output
    assert "a100-train from the service" in result.output
    assert "from the store" not in result.output


def test_json_of_one_pool_is_the_services_answer(config: Path, service: str) -> None:
    result = run("--config", str(config), "--url", service, "--pool", "a100-train", "--json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["pools"][0]["desired_nodes"] == 12


def test_without_a_service_the_store_is_read_and_the_output_says_so(
    config: Path, stored: None
) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    result = run("--config", str(config), "--url", url)

    assert result.exit_code == 0, result.output
    assert f"no service answered at {url}" in result.output
    assert "read from the store instead" in result.output
    assert "a100-train from the store" in result.output
    assert "l4-infer from the store" in result.output


def test_from_the_store_one_pool_as_json(config: Path, stored: None) -> None:
    result = run("--config", str(config), "--from", "store", "--pool", "l4-infer", "--json")

    assert result.exit_code == 0, result.output
    assert [entry["desired_nodes"] for entry in json.loads(result.output)["pools"]] == [3]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from", "cache"], "--from must be one of auto, service, store, not 'cache'"),
        (["--url", "localhost:8000"], "--url must start with http:// or https://"),
        (["--from", "store", "--pool", "nope"], "no pool 'nope'"),
        (["--from", "store"], "the store holds no recommendation yet"),
    ],
)
def test_bad_input_is_a_clear_error(config: Path, args: list[str], message: str) -> None:
    result = run("--config", str(config), *args)

    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


def test_asking_only_the_service_when_none_answers_fails_clearly(config: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    result = run("--config", str(config), "--from", "service", "--url", url)

    assert result.exit_code == 2
    assert f"no service answered at {url}" in " ".join(result.output.split())
