"""Span batches decoded and added to the window by threads of their own, off the event loop.

Details: docs/api.md, "Notes from the code", `api/callchain/feed.py`."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from typing import Final, NamedTuple, Protocol, TypeVar

from api.callchain.types import Span, SpanQueueFullError
from api.callchain.window import AddResult
from policy.types import require_aware

logger = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_MAX_QUEUED_SPANS: Final = 50_000
"""Spans waiting to be added at most (25 s of 2,000 spans/s; a few tens of MB)."""


class SpanSink(Protocol):
    """Where spans go: :class:`~api.callchain.incremental.ChainWindow` in the service."""

    def add(self, spans: Sequence[Span], now: datetime) -> AddResult:
        """Take in a batch of spans that arrived at ``now``."""
        ...

    def __len__(self) -> int:
        """Spans counted in the window now."""
        ...


class Fed(NamedTuple):
    """What adding one batch did."""

    added: int
    """spans of the batch taken in."""
    evicted: int
    """older spans dropped to keep the window bounded."""
    window_spans: int
    """spans in the window right after the batch."""


class _Batch(NamedTuple):
    spans: Sequence[Span]
    arrived: datetime
    result: Future[Fed]


class SpanFeed:
    """Adds span batches to a sink from one thread, through a queue bounded in spans.

    Args:
        max_queued_spans: the most spans waiting at once, >= 1.
    """

    def __init__(self, sink: SpanSink, *, max_queued_spans: int = DEFAULT_MAX_QUEUED_SPANS) -> None:
        if max_queued_spans < 1:
            raise ValueError(f"max_queued_spans must be >= 1, got {max_queued_spans}")
        self.sink = sink
        self.max_queued_spans = max_queued_spans
        self._queue: queue.SimpleQueue[_Batch | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._queued = 0
        self._open = False
        self._thread: threading.Thread | None = None
        self._decoder: ThreadPoolExecutor | None = None

    def start(self) -> None:
        """Start the ingestion thread (once)."""
        with self._lock:
            if self._thread is not None:
                raise RuntimeError("the span feed was already started")
            self._thread = threading.Thread(target=self._run, name="span-feed", daemon=True)
            self._decoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="span-decode")
            self._open = True
        self._thread.start()

    def decode(self, work: Callable[[], T]) -> Future[T]:
        """Run ``work`` (a request's decoding) on the decoding thread, after those queued.

        Raises:
            SpanQueueFullError: the feed is not running.
        """
        with self._lock:
            decoder = self._decoder
            if not self._open or decoder is None:
                raise SpanQueueFullError("span ingestion is not running; send the spans again")
            return decoder.submit(work)

    def submit(self, spans: Sequence[Span], now: datetime) -> Future[Fed]:
        """Queue a batch that arrived at ``now``; the future resolves once it is added.

        Cancelling the future before the thread reaches the batch (the client went
        away) skips it: the client had no answer, so it sends the batch again.

        Raises:
            SpanQueueFullError: the batch would overflow the queue, or the feed is not
                running; nothing of it was taken.
            ValueError: ``now`` is naive.
        """
        require_aware(now, "now")
        result: Future[Fed] = Future()
        with self._lock:
            if not self._open:
                raise SpanQueueFullError("span ingestion is not running; send the spans again")
            if self._queued and self._queued + len(spans) > self.max_queued_spans:
                raise SpanQueueFullError(
                    f"span ingestion is behind ({self._queued} spans queued, at most "
                    f"{self.max_queued_spans}); send the {len(spans)} spans again shortly"
                )
            self._queued += len(spans)
            self._queue.put(_Batch(spans, now, result))
        return result

    def stop(self, timeout: float | None = 30.0) -> None:
        """Refuse new batches, add those already queued, and end the thread."""
        with self._lock:
            thread, self._open = self._thread, False
            decoder, self._decoder = self._decoder, None
            if decoder is not None:
                decoder.shutdown(wait=False)
            if thread is None or not thread.is_alive():
                return
            self._queue.put(None)
        thread.join(timeout)
        if thread.is_alive():
            logger.warning("span ingestion did not finish its queue within %s s", timeout)

    def _run(self) -> None:
        while (batch := self._queue.get()) is not None:
            try:
                if batch.result.set_running_or_notify_cancel():
                    done = self.sink.add(batch.spans, batch.arrived)
                    batch.result.set_result(Fed(done.added, done.evicted, len(self.sink)))
            # One bad batch must not stop ingestion: its request answers with the error.
            except Exception as exc:
                batch.result.set_exception(exc)
            finally:
                with self._lock:
                    self._queued -= len(batch.spans)
