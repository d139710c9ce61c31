"""How the app is served: uvicorn with header and keep-alive timeouts and a connection cap.

uvicorn's defaults leave a slow-loris open: a connection that sends its request
headers a byte at a time is never dropped (its keep-alive timer only starts after a
response), so a few thousand of them hold the server's sockets for as long as they
like. :func:`server_config` therefore serves with

- a header timeout (``service.header_timeout_s``): a connection that has not sent a
  complete request head this long after connecting, or after its previous response,
  is closed (:class:`HeaderTimeoutProtocol`, uvicorn's h11 protocol plus one timer);
- a keep-alive timeout (``service.keep_alive_s``) for idle connections;
- a connection cap (``service.max_connections``, uvicorn's ``limit_concurrency``):
  beyond it, requests are answered 503 at once;
- the access log without secrets (:mod:`api.access_log`).
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from api.access_log import install_redaction
from api.settings import ServiceSettings


class HeaderTimeoutProtocol(H11Protocol):
    """uvicorn's h11 protocol that closes connections slow to send a request head."""

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


def protocol_with_header_timeout(seconds: float) -> type[HeaderTimeoutProtocol]:
    """Return the protocol class whose connections must send a request head within ``seconds``."""
    return type("HeaderTimeoutProtocol", (HeaderTimeoutProtocol,), {"header_timeout": seconds})


def server_config(
    app: Any, service: ServiceSettings, *, host: str, port: int, log_level: str = "info"
) -> uvicorn.Config:
    """Return the uvicorn configuration that serves ``app`` with the service's limits.

    The access log is filtered (:func:`~api.access_log.install_redaction`) once uvicorn
    has configured logging.
    """
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        http=protocol_with_header_timeout(service.header_timeout_s),
        timeout_keep_alive=max(1, math.ceil(service.keep_alive_s)),
        limit_concurrency=service.max_connections,
    )
    install_redaction()
    return config
