"""The mixed scenario's load client: answers parsed in any pieces, latency from the schedule."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import numpy as np
import pytest

from benchmarks.api_client import (
    LOST,
    Records,
    ResponseError,
    ResponseReader,
    Stream,
    parse_head,
    run_streams,
    summarise,
)

OK = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 5\r\n\r\nhello"
MISSING = b"HTTP/1.1 404 Not Found\r\ncontent-length: 2\r\n\r\nno"
EMPTY = b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n"


def test_answers_split_anywhere_come_out_whole_and_in_order() -> None:
    stream = OK + MISSING + EMPTY + OK
    for cut in range(1, len(stream)):
        for second in (cut, min(len(stream), cut + 7)):
            reader = ResponseReader()
            pieces = (stream[:cut], stream[cut:second], stream[second:])
            found = [answer for piece in pieces for answer in reader.feed(piece)]
            assert found == [(200, 5), (404, 2), (204, 0), (200, 5)], (cut, second)


@pytest.mark.parametrize(
    ("head", "words"),
    [
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked", "chunked"),
        (b"HTTP/1.1 200 OK\r\nserver: x", "without Content-Length"),
        (b"HTTP/1.0 200 OK\r\ncontent-length: 1", "not an HTTP/1.1 status line"),
        (b"garbage", "not an HTTP/1.1 status line"),
    ],
)
def test_answers_it_cannot_read_are_refused_not_misread(head: bytes, words: str) -> None:
    with pytest.raises(ResponseError, match=words):
        parse_head(head)


def test_header_names_are_read_in_any_case() -> None:
    assert parse_head(b"HTTP/1.1 503 Busy\r\nContent-Length: 12") == (503, 12)


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _serve(handler: Handler) -> tuple[asyncio.Server, int]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def _read_requests(reader: asyncio.StreamReader) -> None:
    await reader.readuntil(b"\r\n\r\n")


def test_a_request_due_while_its_connection_is_busy_counts_from_when_it_was_due() -> None:
    delay = 0.03

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                await _read_requests(reader)
                await asyncio.sleep(delay)
                writer.write(OK)
        except asyncio.IncompleteReadError:
            writer.close()

    async def run() -> tuple[Records, float]:
        server, port = await _serve(slow)
        async with server:
            # Four requests due 1 ms apart on one connection: each waits for the last.
            stream = Stream("reads", [b"GET / HTTP/1.1\r\nHost: t\r\n\r\n"], 1000.0, 4)
            records, start, _ = await run_streams("127.0.0.1", port, [stream], drain_s=10)
        return records["reads"], start

    records, start = asyncio.run(run())

    assert records.status.tolist() == [200] * 4
    np.testing.assert_allclose(records.intended - start, [0.0, 0.001, 0.002, 0.003])
    latency = records.done - records.intended
    # The fourth was sent only after three answers (3 x 30 ms) and took its own 30 ms:
    # open loop, its latency holds all of it, not just its own round trip.
    assert records.sent[3] - records.intended[3] >= 3 * delay - 0.003
    assert latency[3] >= 4 * delay - 0.003
    assert np.all(np.diff(records.sent) > 0)


def test_a_request_on_a_connection_that_breaks_is_lost_and_the_rest_go_on() -> None:
    answered = 0

    async def breaks_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal answered
        try:
            while True:
                await _read_requests(reader)
                answered += 1
                if answered == 2:
                    writer.close()  # the second request gets no answer
                    return
                writer.write(OK)
                await writer.drain()
        except asyncio.IncompleteReadError:
            writer.close()

    async def run() -> Records:
        server, port = await _serve(breaks_once)
        async with server:
            stream = Stream("reads", [b"GET / HTTP/1.1\r\nHost: t\r\n\r\n"], 20.0, 5)
            records, _, _ = await run_streams("127.0.0.1", port, [stream], drain_s=10)
        return records["reads"]

    records = asyncio.run(run())

    assert records.status.tolist() == [200, LOST, 200, 200, 200]


def test_the_summary_leaves_out_the_warm_up_and_counts_errors() -> None:
    records = Records(np.array([0.0, 1.0, 2.0, 3.0, 4.0]))
    records.sent[:] = records.intended + 0.001
    records.done[:] = records.intended + np.array([0.5, 0.002, 0.004, 0.010, 0.020])
    records.status[:] = [200, 200, 200, 503, 200]
    records.size[:] = 7

    found = summarise([records], since=1.0)

    assert found["requests"] == 4
    assert found["errors"] == 1
    assert found["errors_by_status"] == {"503": 1}
    assert found["first_errors"] == [{"at_s": 2.0, "status": 503}]
    assert found["max"] == pytest.approx(20.0)  # the warm-up's 500 ms is not counted
    assert found["p50"] == pytest.approx(4.0)
    assert found["send_lag_max"] == pytest.approx(1.0)
    assert found["worst"][0] == {"at_s": 3.0, "ms": 20.0}
    assert found["achieved_rps"] == pytest.approx(3 / 3.02)
