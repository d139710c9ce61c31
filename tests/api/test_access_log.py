"""Access-log redaction: refused requests lose their query, token-like values are masked."""

from __future__ import annotations

import logging

import pytest

from api.access_log import RedactQueryStrings, redact_path


@pytest.mark.parametrize(
    ("path", "status", "logged"),
    [
        ("/recommendation?token=abc", 401, "/recommendation"),
        ("/recommendation?pool=a&access_token=abc", 200, "/recommendation?pool=a&access_token=***"),
        ("/recommendation?pool=a&api_key=k", 200, "/recommendation?pool=a&api_key=***"),
        ("/recommendation?pool=a", 200, "/recommendation?pool=a"),
        ("/recommendation", 200, "/recommendation"),
        ("/unknown?x=1", 404, "/unknown"),
    ],
)
def test_redact_path(path: str, status: int, logged: str) -> None:
    assert redact_path(path, status) == logged


def test_the_filter_rewrites_uvicorn_access_records() -> None:
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", "/recommendation?token=abc", "1.1", 401),
        None,
    )

    assert RedactQueryStrings().filter(record)
    assert record.getMessage() == '127.0.0.1:5 - "GET /recommendation HTTP/1.1" 401'
