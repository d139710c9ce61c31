"""The real uvicorn server as ``foresight serve`` configures it (#13 items 11 and 13).

Each test runs with both HTTP parsers the server can use: httptools (what it uses when
installed, as with Foresight's dependencies) and h11 (the fallback).

Slow-header connections are dropped after the header timeout, idle keep-alive ones
after the keep-alive timeout, connections beyond the cap are answered 503, and the
access log never shows a refused request's query string.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from api.server import server_config
from api.settings import ServiceSettings


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _app() -> FastAPI:
    app = FastAPI()

    @app.get("/ping")
    async def ping(request: Request) -> JSONResponse:
        if "token" in request.query_params:
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        return JSONResponse({"ok": True})

    return app


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture(params=["httptools", "h11"])
def served(request: pytest.FixtureRequest) -> Iterator[tuple[int, _Lines]]:
    port = _free_port()
    limits = ServiceSettings(header_timeout_s=0.5, keep_alive_s=1, max_connections=20)
    config = server_config(_app(), limits, host="127.0.0.1", port=port, parser=request.param)
    server = uvicorn.Server(config)
    lines = _Lines()
    logging.getLogger("uvicorn.access").addHandler(lines)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield port, lines
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        logging.getLogger("uvicorn.access").removeHandler(lines)


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """True when the server closes ``sock`` within ``seconds``.

    Bytes still in flight (a response body sent in a segment of its own after the
    head) are read past: only the end of the stream counts.
    """
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            if sock.recv(1024) == b"":
                return True
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True
    return False


@pytest.mark.timeout(60)
def test_a_slow_header_connection_is_dropped(served: tuple[int, _Lines]) -> None:
    port, _ = served
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n")  # never ends its head
        started = time.monotonic()
        assert _closed_within(sock, 5.0)
        assert time.monotonic() - started < 3.0


@pytest.mark.timeout(60)
def test_a_complete_request_is_answered_and_idle_keep_alive_is_closed(
    served: tuple[int, _Lines],
) -> None:
    port, _ = served
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.settimeout(5)
        assert sock.recv(1024).startswith(b"HTTP/1.1 200")
        assert _closed_within(sock, 5.0)


@pytest.mark.timeout(60)
def test_connections_beyond_the_cap_are_answered_503(served: tuple[int, _Lines]) -> None:
    port, _ = served
    held = [socket.create_connection(("127.0.0.1", port)) for _ in range(20)]
    try:
        time.sleep(0.2)
        with socket.create_connection(("127.0.0.1", port)) as extra:
            extra.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
            extra.settimeout(5)
            assert extra.recv(1024).startswith(b"HTTP/1.1 503")
    finally:
        for sock in held:
            sock.close()


@pytest.mark.timeout(60)
def test_the_access_log_never_shows_a_refused_query_string(served: tuple[int, _Lines]) -> None:
    port, lines = served
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"GET /ping?token=s3cret-value HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.settimeout(5)
        assert sock.recv(1024).startswith(b"HTTP/1.1 401")
    deadline = time.monotonic() + 5
    while not lines.lines and time.monotonic() < deadline:
        time.sleep(0.05)

    assert any('"GET /ping HTTP/1.1" 401' in line for line in lines.lines)
    assert not any("s3cret" in line for line in lines.lines)


def test_the_server_parses_with_httptools_when_installed() -> None:
    limits = ServiceSettings()
    config = server_config(_app(), limits, host="127.0.0.1", port=1)
    assert isinstance(config.http, type)
    assert "HttpToolsProtocol" in [base.__name__ for base in config.http.__mro__]


def test_an_unknown_parser_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="auto, httptools, h11"):
        server_config(_app(), ServiceSettings(), host="127.0.0.1", port=1, parser="picohttp")
