"""The framework's own errors answer the documented ``{"error", "message"}`` shape (#13, 14)."""

from __future__ import annotations

import gzip

import pytest
from fastapi.testclient import TestClient

JSON = {"content-type": "application/json"}


@pytest.mark.parametrize(
    ("method", "path", "body", "headers", "status", "error", "fragment"),
    [
        ("GET", "/no/such/route", None, {}, 404, "not_found", "no route /no/such/route"),
        ("DELETE", "/recommendation", None, {}, 405, "method_not_allowed", "DELETE is not"),
        ("POST", "/signals/metrics", b'[{"series_id": "\xff"}]', JSON, 400, "bad_request", "UTF-8"),
        (
            "POST",
            "/signals/metrics",
            gzip.compress(b"[]"),
            {**JSON, "content-encoding": "gzip"},
            400,
            "bad_request",
            "uncompressed",
        ),
    ],
)
def test_framework_errors_have_the_error_shape(
    client: TestClient,
    method: str,
    path: str,
    body: bytes | None,
    headers: dict[str, str],
    status: int,
    error: str,
    fragment: str,
) -> None:
    response = client.request(method, path, content=body, headers=headers)

    assert response.status_code == status
    payload = response.json()
    assert set(payload) == {"error", "message"}
    assert payload["error"] == error
    assert fragment in payload["message"]
