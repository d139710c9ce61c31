"""How the app is served: uvicorn with header and keep-alive timeouts and a connection cap.

Details: docs/api.md, "Notes from the code", `api/server.py`."""

from __future__ import annotations

import asyncio
import math
import sys
from typing import TYPE_CHECKING, Any, Final

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from api.access_log import install_redaction
from api.settings import ServiceSettings

PARSERS: Final = ("auto", "httptools", "h11")
"""HTTP/1.1 parsers the server can use."""

# The deadline is written once and mixed into both of uvicorn's HTTP/1.1 protocols; to
# the type checker it is an h11 protocol, whose attributes (cycle, loop, transport) the
# httptools one has too.
if TYPE_CHECKING:
    _ProtocolBase = H11Protocol
else:
    _ProtocolBase = object


class _HeaderDeadline(_ProtocolBase):
    """Closes a connection slow to send a request head (mixed into uvicorn's protocols)."""

    header_timeout: float = 10.0
    """Seconds allowed to send a complete request head (set per server by a subclass)."""

    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Start the connection with the head's deadline running."""
        super().connection_made(transport)
        self._arm_header_timer()

    def data_received(self, data: bytes) -> None:
        """Feed the parser; stop the deadline once a request head is complete."""
        super().data_received(data)
        if self._awaiting_head():
            if self._header_timer is None:
                self._arm_header_timer()
        else:
            self._cancel_header_timer()

    def on_response_complete(self) -> None:
        """After a response, a pipelined or next request is held to the deadline again."""
        super().on_response_complete()
        if self._awaiting_head() and self._header_timer is None and not self._closing():
            self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        """Drop the timer with the connection."""
        self._cancel_header_timer()
        super().connection_lost(exc)

    def _awaiting_head(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _closing(self) -> bool:
        transport = getattr(self, "transport", None)
        return transport is None or transport.is_closing()

    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        self._header_timer = self.loop.call_later(self.header_timeout, self._header_timed_out)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_timed_out(self) -> None:
        self._header_timer = None
        if self._awaiting_head() and not self._closing():
            self.transport.close()


class HeaderTimeoutProtocol(_HeaderDeadline, H11Protocol):
    """uvicorn's h11 protocol that closes connections slow to send a request head."""


def _httptools_protocol() -> type[_HeaderDeadline] | None:
    """uvicorn's httptools protocol with the head's deadline, None without httptools."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        return None

    class HttpToolsHeaderTimeoutProtocol(_HeaderDeadline, HttpToolsProtocol):  # type: ignore[misc]
        """uvicorn's httptools protocol that closes connections slow to send a request head."""

    return HttpToolsHeaderTimeoutProtocol


def protocol_with_header_timeout(seconds: float, parser: str = "auto") -> type[_HeaderDeadline]:
    """Return the protocol class whose connections must send a request head within ``seconds``.

    Args:
        seconds: the head's deadline.
        parser: ``httptools`` (C parser), ``h11`` (pure Python) or ``auto`` (httptools
            when installed, as it is with Foresight's dependencies).

    Raises:
        ValueError: an unknown parser, or ``httptools`` asked for but not installed.
    """
    if parser not in PARSERS:
        raise ValueError(f"parser must be one of {', '.join(PARSERS)}, got {parser!r}")
    fast = None if parser == "h11" else _httptools_protocol()
    if fast is None and parser == "httptools":
        raise ValueError("the httptools parser is not installed: pip install httptools")
    base = fast or HeaderTimeoutProtocol
    return type(base.__name__, (base,), {"header_timeout": seconds})


def server_config(
    app: Any,
    service: ServiceSettings,
    *,
    host: str,
    port: int,
    log_level: str = "info",
    parser: str = "auto",
) -> uvicorn.Config:
    """Return the uvicorn configuration that serves ``app`` with the service's limits.

    The access log is filtered (:func:`~api.access_log.install_redaction`) once uvicorn
    has configured logging. ``parser``: see :func:`protocol_with_header_timeout`; the
    event loop is uvloop when installed (uvicorn's ``auto``).
    """
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        http=protocol_with_header_timeout(service.header_timeout_s, parser),
        timeout_keep_alive=max(1, math.ceil(service.keep_alive_s)),
        limit_concurrency=service.max_connections,
    )
    install_redaction()
    return config


def use_switch_interval(service: ServiceSettings) -> None:
    """Set this process's GIL switch interval to ``service.gil_switch_ms``.

    Process-wide (``sys.setswitchinterval``): call it from the process that serves,
    once, before serving.
    """
    sys.setswitchinterval(service.gil_switch_ms / 1000)
