"""Issue #37: a 4xx names the field and the rule, never a library's internals."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

INTERNALS = ("sys.set_int_max_str_digits", "Out of bounds nanosecond", "uncompressed", "pandas")


def _sample(ts: str = "2025-03-31T00:00:00Z", value: object = 3) -> dict[str, object]:
    return {"series_id": "alpha/nodes", "ts": ts, "value": value}


@pytest.mark.parametrize("path", ["/signals/metrics", "/signals/spans", "/v1/traces"])
def test_a_five_thousand_digit_number_is_named_as_such(client: TestClient, path: str) -> None:
    body = json.dumps([_sample()]).replace("3}", "1" * 5000 + "}")
    response = client.post(path, content=body, headers={"content-type": "application/json"})

    assert 400 <= response.status_code < 500
    assert "a number of more than 4300 digits" in response.text
    assert not any(words in response.text for words in INTERNALS)


def test_a_sample_time_beyond_what_the_store_holds_names_the_sample(client: TestClient) -> None:
    samples = [_sample(), _sample(ts="9999-12-31T23:59:59Z")]
    response = client.post("/signals/metrics", json=samples)

    assert response.status_code == 422
    assert "samples[1].ts is outside the years 1678-2261" in response.json()["message"]
    assert not any(words in response.text for words in INTERNALS)
