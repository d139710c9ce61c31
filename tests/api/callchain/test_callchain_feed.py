"""SpanFeed: batches added from one thread, in order; a full queue refuses, never drops."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from datetime import UTC, datetime

import pytest

from api.callchain.feed import Fed, SpanFeed
from api.callchain.types import Span, SpanQueueFullError
from api.callchain.window import AddResult

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
WAIT_S = 10  # a safety net against a hang, never a timing assertion


def spans(n: int, trace: str = "t") -> list[Span]:
    return [Span(trace, f"s{i}", None, "svc", "op", 1_000_000 + i, 2_000_000 + i) for i in range(n)]


class GatedSink:
    """A sink that records what it is given and, while closed, holds each batch."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, datetime]] = []
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.gate.set()
        self.fail_next = False

    def add(self, batch: Sequence[Span], now: datetime) -> AddResult:
        self.entered.set()
        assert self.gate.wait(WAIT_S), "the test never opened the gate"
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("a bug in the window")
        self.batches.append((len(batch), now))
        return AddResult(added=len(batch), evicted=0)

    def __len__(self) -> int:
        return sum(n for n, _ in self.batches)


@pytest.fixture
def sink() -> GatedSink:
    return GatedSink()


@pytest.fixture
def feed(sink: GatedSink) -> Iterator[SpanFeed]:
    started = SpanFeed(sink, max_queued_spans=10)
    started.start()
    yield started
    sink.gate.set()
    started.stop(WAIT_S)


def test_batches_are_added_in_order_and_answered_with_the_window_size(
    feed: SpanFeed, sink: GatedSink
) -> None:
    first = feed.submit(spans(3), NOW)
    second = feed.submit(spans(4), NOW.replace(minute=1))

    assert first.result(WAIT_S) == Fed(added=3, evicted=0, window_spans=3)
    assert second.result(WAIT_S) == Fed(added=4, evicted=0, window_spans=7)
    assert sink.batches == [(3, NOW), (4, NOW.replace(minute=1))]


def test_a_batch_that_would_overflow_the_queue_is_refused_whole(
    feed: SpanFeed, sink: GatedSink
) -> None:
    sink.gate.clear()
    held = feed.submit(spans(6), NOW)  # taken by the thread, held in the sink
    assert sink.entered.wait(WAIT_S)
    waiting = feed.submit(spans(4), NOW)  # 10 of 10 queued

    with pytest.raises(SpanQueueFullError, match="10 spans queued, at most 10"):
        feed.submit(spans(1), NOW)

    sink.gate.set()
    assert held.result(WAIT_S).added == 6
    assert waiting.result(WAIT_S).added == 4
    # Drained, a batch larger than the whole bound is still taken: none waits forever.
    assert feed.submit(spans(25), NOW).result(WAIT_S).added == 25


def test_a_failing_batch_answers_with_its_error_and_the_feed_goes_on(
    feed: SpanFeed, sink: GatedSink
) -> None:
    sink.fail_next = True
    failed = feed.submit(spans(2), NOW)
    after = feed.submit(spans(1), NOW)

    with pytest.raises(RuntimeError, match="a bug in the window"):
        failed.result(WAIT_S)
    assert after.result(WAIT_S).added == 1


def test_stop_adds_what_is_queued_then_refuses(sink: GatedSink) -> None:
    feed = SpanFeed(sink, max_queued_spans=100)
    with pytest.raises(SpanQueueFullError, match="not running"):
        feed.submit(spans(1), NOW)
    feed.start()
    sink.gate.clear()
    queued: list[Future[Fed]] = [feed.submit(spans(2, trace=f"t{i}"), NOW) for i in range(3)]
    assert sink.entered.wait(WAIT_S)

    stopping = threading.Thread(target=feed.stop, args=(WAIT_S,))
    stopping.start()
    sink.gate.set()
    stopping.join(WAIT_S)

    assert [f.result(0).added for f in queued] == [2, 2, 2]
    with pytest.raises(SpanQueueFullError, match="not running"):
        feed.submit(spans(1), NOW)


def test_a_cancelled_batch_is_skipped(feed: SpanFeed, sink: GatedSink) -> None:
    sink.gate.clear()
    held = feed.submit(spans(1), NOW)
    assert sink.entered.wait(WAIT_S)
    gone = feed.submit(spans(2), NOW)
    assert gone.cancel()  # the client went away before its batch was reached

    sink.gate.set()
    assert held.result(WAIT_S).added == 1
    assert feed.submit(spans(1), NOW).result(WAIT_S).window_spans == 2
    assert sink.batches == [(1, NOW), (1, NOW)]


def test_decodes_run_one_at_a_time_on_the_feeds_own_thread(feed: SpanFeed) -> None:
    running = 0
    most = 0
    threads: set[str] = set()
    lock = threading.Lock()
    first_started = threading.Event()
    release = threading.Event()

    def decode(n: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
            threads.add(threading.current_thread().name)
        first_started.set()
        assert release.wait(WAIT_S), "the test never released the decode"
        with lock:
            running -= 1
        return n

    futures = [feed.decode(lambda n=n: decode(n)) for n in range(4)]
    assert first_started.wait(WAIT_S)
    release.set()
    assert [f.result(WAIT_S) for f in futures] == [0, 1, 2, 3]
    assert most == 1
    assert len(threads) == 1
    assert next(iter(threads)).startswith("span-decode")


def test_a_decode_error_reaches_the_caller(feed: SpanFeed) -> None:
    def broken() -> None:
        raise ValueError("not an ExportTraceServiceRequest")

    with pytest.raises(ValueError, match="ExportTraceServiceRequest"):
        feed.decode(broken).result(WAIT_S)
    assert feed.decode(lambda: 7).result(WAIT_S) == 7


def test_decode_is_refused_when_the_feed_is_not_running(sink: GatedSink) -> None:
    idle = SpanFeed(sink)
    with pytest.raises(SpanQueueFullError, match="not running"):
        idle.decode(lambda: 1)
    idle.start()
    idle.stop(WAIT_S)
    with pytest.raises(SpanQueueFullError, match="not running"):
        idle.decode(lambda: 1)
