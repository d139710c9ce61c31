"""An open-loop HTTP/1.1 load client light enough to share 2 cores with the server it loads.

The load generator of ``benchmarks/api_mixed.py``. At 1,000 requests a second on the
same 2 cores as the server, a client that builds each request, opens a stream reader
and a task per request, and times with the loop's cached clock spends a good part of
a core of its own and charges its own lateness to the server. This one

- sends pre-built request bytes over keep-alive connections opened before the run,
  one request at a time per connection (no pipelining), each connection an
  ``asyncio.Protocol`` that parses answers in ``data_received``
  (:class:`ResponseReader`: status line and ``Content-Length`` bodies, no copies of
  the body);
- follows a fixed schedule (open loop): request ``i`` of a stream is due at
  ``start + offset + i / rate``, and its latency runs from that *intended* time, so a
  slow answer cannot hide the requests queued behind it (no coordinated omission); a
  request due while every connection of its stream is busy waits in a backlog, its
  latency still counted from when it was due;
- records each request's intended, sent and done times (``time.monotonic``) in
  preallocated numpy arrays, so the measured phase makes almost no garbage, and runs
  with the garbage collector off;
- runs on uvloop when installed.

The client's own lateness (sent minus intended, the ``send_lag`` percentiles) and its
CPU time are reported with the latencies: when the lag is large, the client or the
machine, not the server, made the tail.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

TIMED_OUT = -1
"""Status of a request still unanswered when the run's drain time ran out."""
LOST = 0
"""Status of a request whose connection failed or closed before its answer."""


class ResponseError(ValueError):
    """An answer the reader cannot parse (not HTTP/1.1, or no ``Content-Length``)."""


class ResponseReader:
    """Parses HTTP/1.1 responses fed in arbitrary pieces: status and body size of each.

    Only what the benchmark's server sends: a status line, headers, and a body of
    ``Content-Length`` bytes (uvicorn sets it on every answer here). Chunked bodies are
    refused (:class:`ResponseError`) rather than misread.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._status = 0
        self._body_left = -1  # -1: reading a head; else body bytes still to come
        self._body_size = 0

    def feed(self, data: bytes) -> list[tuple[int, int]]:
        """Take the next bytes; return ``(status, body bytes)`` of each answer completed."""
        done: list[tuple[int, int]] = []
        view = memoryview(data)
        while view:
            if self._body_left < 0:
                view = self._take_head(view)
                if self._body_left < 0:
                    break
            take = min(self._body_left, len(view))
            self._body_left -= take
            view = view[take:]
            if self._body_left == 0:
                done.append((self._status, self._body_size))
                self._body_left = -1
        return done

    def _take_head(self, view: memoryview) -> memoryview:
        """Buffer ``view`` until a head is complete; parse it; return the bytes after it."""
        start = max(0, len(self._buffer) - 3)
        self._buffer += view
        end = self._buffer.find(b"\r\n\r\n", start)
        if end < 0:
            return view[len(view) :]
        head = bytes(self._buffer[:end])
        rest = memoryview(bytes(self._buffer[end + 4 :]))
        self._buffer.clear()
        self._status, self._body_size = parse_head(head)
        self._body_left = self._body_size
        return rest


def parse_head(head: bytes) -> tuple[int, int]:
    """Return the status and ``Content-Length`` of a response head (without its blank line).

    Raises:
        ResponseError: not an HTTP/1.1 status line, chunked, or no ``Content-Length``.
    """
    lines = head.split(b"\r\n")
    status_line = lines[0]
    if not status_line.startswith(b"HTTP/1.1 ") or not status_line[9:12].isdigit():
        raise ResponseError(f"not an HTTP/1.1 status line: {status_line[:40]!r}")
    length = None
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value.strip())
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            raise ResponseError("chunked answers are not read by this client")
    if length is None:
        raise ResponseError("an answer without Content-Length")
    return int(status_line[9:12]), length


@dataclass(frozen=True)
class Stream:
    """Requests sent at a fixed rate over connections of their own.

    Request ``i`` is ``requests[i % len(requests)]``, due at ``offset + i / rate``
    seconds after the run's start; ``count`` requests in all.
    """

    name: str
    requests: Sequence[bytes]
    rate: float
    count: int
    connections: int = 1
    offset: float = 0.0

    def due(self) -> np.ndarray:
        """The intended send times of the stream's requests, seconds from the start."""
        return self.offset + np.arange(self.count) / self.rate


@dataclass
class Records:
    """Per request of one stream: times (monotonic seconds), status and body size."""

    intended: np.ndarray
    sent: np.ndarray = field(init=False)
    done: np.ndarray = field(init=False)
    status: np.ndarray = field(init=False)
    size: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        count = len(self.intended)
        self.sent = np.full(count, np.nan)
        self.done = np.full(count, np.nan)
        self.status = np.full(count, TIMED_OUT, dtype=np.int32)
        self.size = np.zeros(count, dtype=np.int64)


class _Connection(asyncio.Protocol):
    """One keep-alive connection of a stream; one request in flight at a time."""

    def __init__(self, lane: _Lane) -> None:
        self.lane = lane
        self.reader = ResponseReader()
        self.transport: asyncio.Transport | None = None
        self.current = -1
        self.dead = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, only alike.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            answers = self.reader.feed(data)
        except ResponseError:
            self._fail()
            return
        for status, size in answers:
            self.lane.finished(self, status, size)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self._fail()

    def _fail(self) -> None:
        if self.dead:
            return
        self.dead = True
        if self.transport is not None:
            self.transport.close()
            self.transport = None
        self.lane.lost(self)


class _Lane:
    """One stream's connections, its backlog of due requests and its records."""

    def __init__(self, stream: Stream, records: Records, host: str, port: int) -> None:
        self.stream, self.records = stream, records
        self.host, self.port = host, port
        self.idle: deque[_Connection] = deque()
        self.connections: list[_Connection] = []
        self.backlog: deque[int] = deque()
        self.outstanding = 0
        self.drained = asyncio.Event()
        self.closing = False

    async def connect(self) -> None:
        """Open one more connection and make it available."""
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(lambda: _Connection(self), self.host, self.port)
        self.connections.append(conn)
        self._give(conn)

    def due(self, index: int) -> None:
        """Request ``index`` is due: send it now, or queue it behind the busy connections."""
        self.outstanding += 1
        self.drained.clear()
        if self.idle:
            self._send(self.idle.popleft(), index)
        else:
            self.backlog.append(index)

    def finished(self, conn: _Connection, status: int, size: int) -> None:
        """A connection's answer came."""
        index, conn.current = conn.current, -1
        if index >= 0:
            self.records.done[index] = time.monotonic()
            self.records.status[index] = status
            self.records.size[index] = size
            self._settle()
        self._give(conn)

    def lost(self, conn: _Connection) -> None:
        """A connection failed: its request is lost; a new connection replaces it."""
        if conn.current >= 0:
            self.records.done[conn.current] = time.monotonic()
            self.records.status[conn.current] = LOST
            conn.current = -1
            self._settle()
        if conn in self.idle:
            self.idle.remove(conn)
        if self.closing:
            return
        task = asyncio.ensure_future(self.connect())
        task.add_done_callback(lambda t: t.exception())  # a refused reconnect is seen as lag

    def _give(self, conn: _Connection) -> None:
        if conn.transport is None:
            return
        if self.backlog:
            self._send(conn, self.backlog.popleft())
        else:
            self.idle.append(conn)

    def _send(self, conn: _Connection, index: int) -> None:
        assert conn.transport is not None
        conn.current = index
        self.records.sent[index] = time.monotonic()
        requests = self.stream.requests
        conn.transport.write(requests[index % len(requests)])

    def _settle(self) -> None:
        self.outstanding -= 1
        if self.outstanding == 0:
            self.drained.set()


async def run_streams(
    host: str, port: int, streams: Sequence[Stream], drain_s: float = 30.0
) -> tuple[dict[str, Records], float, float]:
    """Send every stream's requests on schedule; return the records, start and CPU seconds.

    The run starts 50 ms after every connection is open; requests still unanswered
    ``drain_s`` after the last one was due keep the status :data:`TIMED_OUT`.

    Returns:
        The records by stream name, the run's start (monotonic seconds; each intended
        time is relative to it plus the stream's own offset), and the client's CPU
        seconds over the run.
    """
    lanes = []
    for stream in streams:
        lane = _Lane(stream, Records(stream.due()), host, port)
        for _ in range(stream.connections):
            await lane.connect()
        lanes.append(lane)
    # One schedule for all streams: (time, lane, index), in time order.
    times = np.concatenate([lane.records.intended for lane in lanes])
    which = np.concatenate([np.full(s.count, i) for i, s in enumerate(streams)])
    index = np.concatenate([np.arange(s.count) for s in streams])
    order = np.argsort(times, kind="stable")
    times, which, index = times[order].tolist(), which[order].tolist(), index[order].tolist()
    start = time.monotonic() + 0.05
    for lane in lanes:
        lane.records.intended += start
    cpu = time.process_time()
    gc_was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        at = 0
        while at < len(times):
            now = time.monotonic() - start
            while at < len(times) and times[at] <= now:
                lanes[which[at]].due(index[at])
                at += 1
            if at < len(times):
                await asyncio.sleep(max(0.0, times[at] - (time.monotonic() - start)))
        waiting = [lane.drained.wait() for lane in lanes if lane.outstanding]
        if waiting:
            await asyncio.wait_for(asyncio.gather(*waiting), drain_s)
    except TimeoutError:
        pass
    finally:
        cpu = time.process_time() - cpu
        if gc_was:
            gc.enable()
        for lane in lanes:
            lane.closing = True
            for conn in lane.connections:
                if conn.transport is not None:
                    conn.transport.close()
    return {lane.stream.name: lane.records for lane in lanes}, start, cpu


def event_loop() -> asyncio.AbstractEventLoop:
    """A new event loop: uvloop's when installed (less CPU per request), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


def summarise(records: Sequence[Records], since: float, worst: int = 8) -> dict[str, Any]:
    """Latency (ms from intended), rate, errors and client lag of requests due from ``since``.

    Args:
        records: the records of one or more streams, summarised together.
        since: monotonic time; requests due earlier (the warm-up) are left out.
        worst: how many of the slowest requests to list.
    """
    intended = np.concatenate([r.intended for r in records])
    keep = intended >= since
    intended = intended[keep]
    sent = np.concatenate([r.sent for r in records])[keep]
    done = np.concatenate([r.done for r in records])[keep]
    status = np.concatenate([r.status for r in records])[keep]
    size = np.concatenate([r.size for r in records])[keep]
    ok = status == 200
    latency = (done - intended) * 1000
    lag = (sent - intended) * 1000
    answered = np.isfinite(done)
    span = float(np.nanmax(done) - since) if answered.any() else float("nan")
    summary: dict[str, Any] = {
        "requests": len(intended),
        "errors": int((~ok).sum()),
        "errors_by_status": {str(s): int((status == s).sum()) for s in np.unique(status[~ok])},
        "first_errors": [
            {"at_s": round(float(intended[i] - since), 3), "status": int(status[i])}
            for i in np.flatnonzero(~ok)[:worst]
        ],
        "achieved_rps": float(ok.sum() / span) if span > 0 else 0.0,
    }
    for name, values in (("", latency[ok]), ("send_lag_", lag[np.isfinite(lag)])):
        for q in (50, 90, 99):
            summary[f"{name}p{q}"] = float(np.percentile(values, q)) if values.size else None
        summary[f"{name}max"] = float(values.max()) if values.size else None
    summary["mean"] = float(latency[ok].mean()) if ok.any() else None
    summary["body_bytes"] = int(np.median(size[ok])) if ok.any() else 0
    slowest = np.argsort(-np.where(ok, latency, -np.inf))[: min(worst, int(ok.sum()))]
    summary["worst"] = [
        {"at_s": round(float(intended[i] - since), 3), "ms": round(float(latency[i]), 2)}
        for i in slowest
    ]
    return summary
