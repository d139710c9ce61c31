"""Webhook delivery to a real HTTP receiver on loopback that is down, then failing, then up.

The receiver is ``http.server`` in a thread, on a port chosen up front: while "down"
nothing listens there (connection refused), then it answers 503, then 200. It checks
each signature with :func:`api.consumers.webhooks.verify` on its own (test) clock and
keeps the idempotency keys it has acted on, as a receiver is told to. The sender's
clock is a fake advanced past each backoff, so the test does not sleep through them.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.clock import system_clock
from api.consumers.delivery import DeliveryPolicy, deliver_due
from api.consumers.webhooks import (
    IDEMPOTENCY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    encode,
    idempotency_key,
    verify,
)
from pipelines.store.outbox import OutboxRepository
from pipelines.store.store import Store, open_store

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

T0 = datetime(2025, 3, 30, 12, 0, tzinfo=UTC)
SECRET = b"integration-secret"


@dataclass
class Clock:
    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Arrival:
    path: str
    key: str
    body: bytes
    status: int


@dataclass
class Receiver:
    """What the receiver answers and what it has seen."""

    clock: Callable[[], datetime]
    answer: int = 200
    delay_s: float = 0.0
    arrivals: list[Arrival] = field(default_factory=list)
    processed: dict[str, list[str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def accepted(self, path: str) -> list[str]:
        return [a.key for a in self.arrivals if a.path == path and 200 <= a.status < 300]


def handler_for(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            key = self.headers[IDEMPOTENCY_HEADER]
            genuine = verify(
                body,
                self.headers.get(SIGNATURE_HEADER, ""),
                SECRET,
                self.headers.get(TIMESTAMP_HEADER, ""),
                now=receiver.clock(),
            )
            status = receiver.answer if genuine else 401
            if 200 <= status < 300:
                with receiver.lock:
                    seen = receiver.processed.setdefault(self.path, [])
                    # Act on each key once, whatever the number of arrivals.
                    if key not in seen:
                        seen.append(key)
            time.sleep(receiver.delay_s)
            with receiver.lock:
                receiver.arrivals.append(Arrival(self.path, key, body, status))
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

    return Handler


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    """Starts and stops the receiver on a fixed port."""

    receiver: Receiver
    port: int = field(default_factory=free_port)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def up(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), handler_for(self.receiver))
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )
        self._thread.start()

    def down(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=5)
            self._server = None


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(f"sqlite:///{tmp_path / 'outbox.db'}") as opened:
        yield opened


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def server(clock: Clock) -> Iterator[Server]:
    running = Server(Receiver(clock))
    yield running
    running.down()


def enqueue_sets(
    store: Store,
    url: str,
    count: int,
    clock: Callable[[], datetime],
    after: list[str] | None = None,
) -> list[str]:
    """Queue ``count`` successive sets for ``url`` (chained after ``after``); return their keys."""
    keys: list[str] = list(after or [])
    for n in range(len(keys), len(keys) + count):
        body = {
            "generated_at": clock().isoformat(),
            "pools": [{"pool": "a100", "desired_nodes": n}],
        }
        key = idempotency_key(body, keys[-1] if keys else None)
        store.outbox.enqueue(url, encode(body), key, now=clock())
        keys.append(key)
    return keys[len(after or []) :]


def drain(
    store: Store, client: httpx.Client, policy: DeliveryPolicy, clock: Clock, passes: int
) -> None:
    """Run delivery passes, moving the clock to the next due time in between."""
    for _ in range(passes):
        deliver_due(store.outbox, client, policy, clock=clock)
        if store.outbox.counts()["pending"] == 0:
            return
        clock.now += policy.max_delay


def test_down_then_failing_then_up_delivers_every_set_once_in_order(
    store: Store, server: Server, clock: Clock
) -> None:
    receiver = server.receiver
    a, b = server.url("/a"), server.url("/b")
    keys_a = enqueue_sets(store, a, 4, clock)
    keys_b = enqueue_sets(store, b, 3, clock)
    policy = DeliveryPolicy(secret=SECRET, timeout_s=2.0, max_delay=timedelta(seconds=30))

    with httpx.Client() as client:
        # Down: nothing listens on the port.
        for _ in range(3):
            results = deliver_due(store.outbox, client, policy, clock=clock)
            assert {r.outcome for r in results} <= {"retry", "waiting"}
            clock.now += policy.max_delay
        assert receiver.arrivals == []
        # Up, but failing.
        receiver.answer = 503
        server.up()
        for _ in range(2):
            deliver_due(store.outbox, client, policy, clock=clock)
            clock.now += policy.max_delay
        assert {a.status for a in receiver.arrivals} == {503}
        # A new set is queued while the receiver is still failing.
        keys_a += enqueue_sets(store, a, 1, clock, after=keys_a)
        # Healthy.
        receiver.answer = 200
        drain(store, client, policy, clock, passes=20)

    assert store.outbox.counts()["pending"] == 0
    assert receiver.accepted("/a") == keys_a
    assert receiver.accepted("/b") == keys_b
    assert receiver.processed == {"/a": keys_a, "/b": keys_b}
    # Every failed attempt was of the oldest unsettled set of its URL: order never broke.
    for path, keys in (("/a", keys_a), ("/b", keys_b)):
        sent = [x.key for x in receiver.arrivals if x.path == path]
        assert sent == sorted(sent, key=keys.index)
    bodies = {x.key: json.loads(x.body) for x in receiver.arrivals}
    assert [bodies[k]["pools"][0]["desired_nodes"] for k in keys_a] == [0, 1, 2, 3, 4]


def test_a_lost_response_resends_the_same_key_and_the_receiver_acts_once(
    store: Store, server: Server, clock: Clock
) -> None:
    receiver = server.receiver
    url = server.url("/slow")
    (key,) = enqueue_sets(store, url, 1, clock)
    server.up()
    receiver.delay_s = 1.0
    policy = DeliveryPolicy(secret=SECRET, timeout_s=0.3, max_delay=timedelta(seconds=10))

    with httpx.Client() as client:
        (first,) = deliver_due(store.outbox, client, policy, clock=clock)
        assert first.outcome == "retry"
        receiver.delay_s = 0.0
        time.sleep(1.2)  # the receiver finishes the first request it already acted on
        drain(store, client, policy, clock, passes=5)

    assert [x.key for x in receiver.arrivals] == [key, key]
    assert receiver.processed == {"/slow": [key]}


def test_two_replicas_never_send_the_same_set_twice(tmp_path: Path) -> None:
    # Real time here: each replica's leases and rechecks must run out on their own.
    server = Server(Receiver(system_clock))
    receiver = server.receiver
    server.up()
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    paths = ["/r0", "/r1", "/r2"]
    with open_store(url) as first, open_store(url) as second:
        expected: dict[str, list[str]] = {p: [] for p in paths}
        for _ in range(8):
            # Interleaved, so both replicas' claims span several receivers.
            for p in paths:
                expected[p] += enqueue_sets(first, server.url(p), 1, system_clock, expected[p])
        policy = DeliveryPolicy(
            secret=SECRET, timeout_s=2.0, batch=4, recheck=timedelta(milliseconds=100)
        )
        stop = threading.Event()
        clients = [httpx.Client(), httpx.Client()]

        def deliver(outbox: OutboxRepository, client: httpx.Client) -> None:
            # One replica's delivery: a pass, then a short pause, until stopped.
            while not stop.is_set():
                deliver_due(outbox, client, policy)
                stop.wait(0.05)

        threads = [
            threading.Thread(target=deliver, args=(replica.outbox, client))
            for replica, client in zip((first, second), clients, strict=True)
        ]
        for thread in threads:
            thread.start()
        try:
            deadline = time.monotonic() + 60
            while first.outbox.counts()["pending"] and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=10)
            for client in clients:
                client.close()

        assert first.outbox.counts()["pending"] == 0
    server.down()
    for path in paths:
        assert receiver.accepted(path) == expected[path]
        assert [x.key for x in receiver.arrivals if x.path == path] == expected[path]
