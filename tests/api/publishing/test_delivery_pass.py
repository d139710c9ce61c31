"""The delivery loop over a mock transport: settle rules, backoff, order, dead letters."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from api.consumers.delivery import DeliveryPolicy, deliver_due
from api.consumers.webhooks import (
    IDEMPOTENCY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    verify,
)
from pipelines.store.store import Store
from tests.pipelines.store.outbox_reads import stored_item

T0 = datetime(2025, 3, 30, 12, 0, tzinfo=UTC)
SECRET = b"s3cret-for-tests"
A, B = "http://a.test/hook", "http://b.test/hook"
POLICY = DeliveryPolicy(secret=SECRET, timeout_s=1.0, batch=10)

Reply = Callable[[httpx.Request], httpx.Response]


@dataclass
class Clock:
    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Receiver:
    """Answers each request with the next scripted reply per URL (then 204), records all."""

    script: dict[str, list[Reply | int]] = field(default_factory=dict)
    seen: list[httpx.Request] = field(default_factory=list)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        queue = self.script.get(str(request.url), [])
        reply = queue.pop(0) if queue else 204
        return reply(request) if callable(reply) else httpx.Response(reply)

    def client(self) -> httpx.Client:
        return httpx.Client(transport=httpx.MockTransport(self))

    def keys(self, url: str | None = None) -> list[str]:
        return [r.headers[IDEMPOTENCY_HEADER] for r in self.seen if url in (None, str(r.url))]


def refused(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


def timed_out(request: httpx.Request) -> httpx.Response:
    raise httpx.ReadTimeout("timed out", request=request)


def run(
    store: Store, receiver: Receiver, clock: Clock, policy: DeliveryPolicy = POLICY
) -> list[str]:
    results = deliver_due(
        store.outbox, receiver.client(), policy, clock=clock, rng=random.Random(0)
    )
    return [r.outcome for r in results]


def test_a_2xx_delivers_the_raw_body_signed_and_keyed(store: Store) -> None:
    body = b'{"generated_at":"x","pools":[]}'
    store.outbox.enqueue(A, body, "key-1", now=T0)
    receiver = Receiver()

    assert run(store, receiver, Clock()) == ["delivered"]

    (request,) = receiver.seen
    assert request.content == body
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers[IDEMPOTENCY_HEADER] == "key-1"
    assert request.headers[TIMESTAMP_HEADER] == str(int(T0.timestamp()))
    assert verify(
        body, request.headers[SIGNATURE_HEADER], SECRET, request.headers[TIMESTAMP_HEADER], now=T0
    )
    assert store.outbox.counts()["pending"] == 0
    assert run(store, receiver, Clock(T0 + timedelta(days=1))) == []


@pytest.mark.parametrize("failure", [503, 500, 408, 429, 302, refused, timed_out])
def test_transient_failures_retry_after_a_backoff_then_deliver(
    store: Store, failure: Reply | int
) -> None:
    item_id = store.outbox.enqueue(A, b"{}", "k", now=T0)
    receiver = Receiver({A: [failure]})
    clock = Clock()

    assert run(store, receiver, clock) == ["retry"]
    item = stored_item(store, item_id)
    assert item is not None
    assert item.last_error
    delay = item.next_attempt_at - T0
    # The first failure waits within the upper half of the base delay (2 s).
    assert timedelta(seconds=1) <= delay <= timedelta(seconds=2)
    clock.now = item.next_attempt_at - timedelta(milliseconds=1)
    assert run(store, receiver, clock) == []
    clock.now = item.next_attempt_at
    assert run(store, receiver, clock) == ["delivered"]
    assert receiver.keys() == ["k", "k"]


def test_backoff_grows_exponentially_up_to_the_cap(store: Store) -> None:
    item_id = store.outbox.enqueue(A, b"{}", "k", now=T0)
    receiver = Receiver({A: [503] * 12})
    policy = DeliveryPolicy(secret=SECRET, max_delay=timedelta(seconds=60))
    clock = Clock()
    delays = []
    for _ in range(10):
        run(store, receiver, clock, policy)
        item = stored_item(store, item_id)
        assert item is not None
        delays.append((item.next_attempt_at - clock.now).total_seconds())
        clock.now = item.next_attempt_at

    ceilings = [min(60.0, 2.0 * 2**n) for n in range(10)]
    assert all(c / 2 <= d <= c for d, c in zip(delays, ceilings, strict=True))
    assert delays[-1] >= 30


def test_retry_after_is_honoured(store: Store) -> None:
    item_id = store.outbox.enqueue(A, b"{}", "k", now=T0)
    busy = httpx.Response(429, headers={"Retry-After": "120"})
    run(store, Receiver({A: [lambda _: busy]}), Clock())

    item = stored_item(store, item_id)
    assert item is not None
    assert item.next_attempt_at - T0 == timedelta(seconds=120)


@pytest.mark.parametrize("status", [400, 401, 404, 410, 422])
def test_a_permanent_4xx_becomes_a_dead_letter_and_is_logged(
    store: Store, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    item_id = store.outbox.enqueue(A, b"{}", "k", now=T0)
    receiver = Receiver({A: [lambda _: httpx.Response(status, text="bad secret")]})

    with caplog.at_level(logging.ERROR, logger="api.consumers.delivery"):
        assert run(store, receiver, Clock()) == ["dead_letter"]

    assert "dead letter" in caplog.text
    (dead,) = store.outbox.dead_letters()
    assert dead.id == item_id
    assert dead.last_error == f"HTTP {status}: bad secret"
    assert store.outbox.counts()["pending"] == 0
    assert run(store, receiver, Clock(T0 + timedelta(days=365))) == []
    assert len(receiver.seen) == 1


def test_a_dead_letter_does_not_hold_back_later_sets(store: Store) -> None:
    store.outbox.enqueue(A, b"1", "k1", now=T0)
    store.outbox.enqueue(A, b"2", "k2", now=T0)
    receiver = Receiver({A: [400]})

    assert run(store, receiver, Clock()) == ["dead_letter", "delivered"]


def test_order_is_kept_per_url_while_other_urls_proceed(store: Store) -> None:
    for n in range(3):
        store.outbox.enqueue(A, f"a{n}".encode(), f"a{n}", now=T0)
        store.outbox.enqueue(B, f"b{n}".encode(), f"b{n}", now=T0)
    receiver = Receiver({A: [503]})
    clock = Clock()

    outcomes = deliver_due(store.outbox, receiver.client(), POLICY, clock=clock)

    by_url = {url: [r.outcome for r in outcomes if r.target_url == url] for url in (A, B)}
    assert by_url == {A: ["retry", "waiting", "waiting"], B: ["delivered"] * 3}
    for _ in range(5):
        clock.now += timedelta(seconds=3)
        run(store, receiver, clock)
    assert receiver.keys(A) == ["a0", "a0", "a1", "a2"]
    assert store.outbox.counts()["pending"] == 0


def test_a_later_set_waits_for_an_earlier_one_in_backoff_without_counting_an_attempt(
    store: Store,
) -> None:
    first = store.outbox.enqueue(A, b"1", "k1", now=T0)
    receiver = Receiver({A: [503]})
    clock = Clock()
    run(store, receiver, clock)
    earlier = stored_item(store, first)
    assert earlier is not None
    clock.now += timedelta(milliseconds=500)
    second = store.outbox.enqueue(A, b"2", "k2", now=clock.now)

    assert run(store, receiver, clock) == ["waiting"]

    held = stored_item(store, second)
    assert held is not None
    assert held.attempts == 0
    assert held.next_attempt_at == earlier.next_attempt_at
    clock.now = earlier.next_attempt_at
    assert run(store, receiver, clock) == ["delivered", "delivered"]
    assert receiver.keys() == ["k1", "k1", "k2"]


def test_without_a_secret_deliveries_are_unsigned(store: Store) -> None:
    store.outbox.enqueue(A, b"{}", "k", now=T0)
    receiver = Receiver()

    run(store, receiver, Clock(), DeliveryPolicy(secret=None))

    assert SIGNATURE_HEADER not in receiver.seen[0].headers
    assert receiver.seen[0].headers[IDEMPOTENCY_HEADER] == "k"


@pytest.mark.parametrize("url", ["ftp://receiver.test/hook", "http://"])
def test_an_unusable_url_is_a_dead_letter(store: Store, url: str) -> None:
    store.outbox.enqueue(url, b"{}", "k", now=T0)

    # A real client: the URL is refused before any connection is tried.
    with httpx.Client() as client:
        results = deliver_due(store.outbox, client, POLICY, clock=Clock())

    assert [r.outcome for r in results] == ["dead_letter"]
    assert "invalid webhook URL" in (results[0].error or "")


def test_the_lease_outlasts_a_whole_batch_of_timeouts() -> None:
    policy = DeliveryPolicy(secret=SECRET, timeout_s=10.0, batch=10)

    assert policy.lease > timedelta(seconds=10.0 * 10)
