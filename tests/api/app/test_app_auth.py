"""Bearer tokens: open without tokens, read and write scopes, open probes, guarded metrics."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import SecretStr

from api.auth import (
    InsufficientScopeError,
    InvalidTokenError,
    MissingTokenError,
    TokenGuard,
    token_problems,
)
from api.services import Services
from api.settings import ServiceSettings
from forecaster.exceptions import ConfigError

READ, WRITE = "r-token-1", "w-token-1"
SPANS = [
    {
        "trace_id": "t",
        "span_id": "s",
        "service": "gw",
        "start": 1_714_564_800_000_000_000,
        "duration_ms": 1,
    }
]


def guarded(services: Services, *, read: tuple[str, ...], write: tuple[str, ...]) -> Services:
    tokens = ServiceSettings(
        read_tokens=tuple(SecretStr(t) for t in read),
        write_tokens=tuple(SecretStr(t) for t in write),
    )
    services.settings = services.settings.model_copy(update={"service": tokens})
    return services


@pytest.fixture
def both(services: Services, make_app: Callable[[Services], FastAPI]) -> Iterator[TestClient]:
    with TestClient(make_app(guarded(services, read=(READ,), write=(WRITE,)))) as client:
        yield client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_without_tokens_everything_is_open_and_one_warning_says_so(
    services: Services, make_app: Callable[[Services], FastAPI], caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.WARNING, logger="api.auth"),
        TestClient(make_app(services)) as client,
    ):
        reads = [client.get("/pools").status_code, client.get("/recommendation").status_code]
        write = client.post("/signals/spans", json=SPANS).status_code

    assert reads == [200, 200]
    assert write == 200
    warnings = [r for r in caplog.records if "no API tokens are configured" in r.message]
    assert len(warnings) == 1


def test_a_read_without_a_token_is_401_with_a_bearer_challenge(both: TestClient) -> None:
    response = both.get("/recommendation/alpha")

    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer realm="foresight"'
    assert response.json()["error"] == "unauthorized"
    assert "Authorization: Bearer" in response.json()["message"]


def test_an_unknown_token_is_401_invalid_token(both: TestClient) -> None:
    response = both.get("/pools", headers=bearer("r-token-2"))

    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


def test_a_basic_auth_header_counts_as_no_token(both: TestClient) -> None:
    response = both.get("/pools", headers={"Authorization": f"Basic {READ}"})

    assert response.status_code == 401


@pytest.mark.parametrize("token", [READ, WRITE])
def test_read_and_write_tokens_may_read(both: TestClient, token: str) -> None:
    assert both.get("/pools", headers=bearer(token)).status_code == 200
    assert both.get("/integrations/priority-expander", headers=bearer(token)).status_code == 200


def test_a_read_token_may_not_write(both: TestClient) -> None:
    response = both.post("/signals/spans", json=SPANS, headers=bearer(READ))

    assert response.status_code == 403
    assert response.json()["error"] == "insufficient_scope"
    assert 'error="insufficient_scope"' in response.headers["www-authenticate"]


def test_a_write_needs_a_token_and_a_write_token_may(both: TestClient) -> None:
    assert both.post("/signals/spans", json=SPANS).status_code == 401
    assert both.post("/signals/metrics", json=[]).status_code == 401
    assert both.post("/v1/traces", json={}).status_code == 401
    assert both.post("/signals/spans", json=SPANS, headers=bearer(WRITE)).status_code == 200


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/openapi.json"])
def test_probes_and_docs_stay_open(both: TestClient, path: str) -> None:
    assert both.get(path).status_code == 200


def test_metrics_reveal_recommendations_so_they_need_a_read_token_by_default(
    both: TestClient,
) -> None:
    anonymous = both.get("/metrics")
    read = both.get("/metrics", headers=bearer(READ))

    assert anonymous.status_code == 401
    assert anonymous.json()["error"] == "unauthorized"
    assert "foresight_desired_nodes" not in anonymous.text
    assert read.status_code == 200
    assert "foresight_desired_nodes{" in read.text


def test_metrics_public_opens_metrics_and_nothing_else(
    services: Services, make_app: Callable[[Services], FastAPI]
) -> None:
    guarded(services, read=(READ,), write=(WRITE,))
    public = services.settings.service.model_copy(update={"metrics_public": True})
    services.settings = services.settings.model_copy(update={"service": public})
    with TestClient(make_app(services)) as client:
        metrics = client.get("/metrics").status_code
        recommendation = client.get("/recommendation").status_code

    assert (metrics, recommendation) == (200, 401)


def test_with_only_write_tokens_reads_are_open_and_writes_are_not(
    services: Services, make_app: Callable[[Services], FastAPI]
) -> None:
    with TestClient(make_app(guarded(services, read=(), write=(WRITE,)))) as client:
        read = client.get("/pools").status_code
        anonymous_write = client.post("/signals/spans", json=SPANS).status_code
        write = client.post("/signals/spans", json=SPANS, headers=bearer(WRITE)).status_code

    assert (read, anonymous_write, write) == (200, 401, 200)


def test_with_only_read_tokens_no_write_is_possible(
    services: Services, make_app: Callable[[Services], FastAPI]
) -> None:
    with TestClient(make_app(guarded(services, read=(READ,), write=()))) as client:
        response = client.post("/signals/spans", json=SPANS, headers=bearer(READ))

    assert response.status_code == 403


def test_the_openapi_document_declares_the_bearer_scheme(both: TestClient) -> None:
    document = both.get("/openapi.json").json()

    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert "401" in document["paths"]["/pools"]["get"]["responses"]
    assert "security" not in document["paths"]["/healthz"]["get"]


def test_guard_rules_directly() -> None:
    guard = TokenGuard(read_tokens=["a"], write_tokens=["b"])

    assert guard.scopes("a") == {"read"}
    assert guard.scopes("b") == {"read", "write"}
    assert guard.scopes("c") == frozenset()
    guard.check("read", "a")
    guard.check("write", "b")
    with pytest.raises(MissingTokenError):
        guard.check("read", None)
    with pytest.raises(InvalidTokenError):
        guard.check("write", "a-but-longer")
    with pytest.raises(InsufficientScopeError):
        guard.check("write", "a")
    assert TokenGuard().is_open


@pytest.mark.parametrize("token", ["", " padded "])
def test_unusable_tokens_are_a_config_error(token: str) -> None:
    with pytest.raises(ConfigError, match="empty or has surrounding whitespace"):
        TokenGuard(write_tokens=[token])


def test_readyz_without_a_token_gives_status_and_cause_codes_only(
    services: Services, make_app: Callable[[Services], FastAPI]
) -> None:
    services.model = None
    services.model_problem = "pickle data was truncated in /srv/models/champion.pkl"
    with TestClient(make_app(guarded(services, read=(READ,), write=(WRITE,)))) as client:
        anonymous = client.get("/readyz")
        wrong = client.get("/readyz", headers=bearer("not-a-token"))
        reader = client.get("/readyz", headers=bearer(READ))

    assert anonymous.status_code == reader.status_code == 503
    body = anonymous.json()
    assert body["ready"] is False
    assert "model_missing" in body["reasons"]
    assert all(set(check) == {"ok"} for check in body["checks"].values())
    for leaked in ("pickle", "/srv/models", "sqlite", "store.db"):
        assert leaked not in anonymous.text
    assert wrong.json() == body
    assert "pickle data was truncated" in reader.json()["reasons"][0]
    assert "url" in reader.json()["checks"]["store"]


def test_weak_tokens_are_refused_beyond_loopback_with_the_reason() -> None:
    def problems(*tokens: str, exposed: bool) -> list[str]:
        settings = ServiceSettings(write_tokens=tuple(SecretStr(t) for t in tokens))
        return token_problems(settings, exposed=exposed)

    assert problems("CHANGE-ME-write-token", "short", exposed=False) == []
    found = problems("CHANGE-ME-write-token", "short", "x" * 16, exposed=True)
    assert found == [
        "service.write_tokens[0] is a well-known placeholder (such as CHANGE-ME-...); "
        "replace it with a random token, e.g. `openssl rand -hex 32`",
        "service.write_tokens[1] has 5 characters; a token must have at least 16 when "
        "serving beyond loopback",
    ]
    assert problems("", exposed=False) == [
        "service.write_tokens[0] is empty or has surrounding whitespace"
    ]
    assert all("CHANGE-ME-write" not in p for p in found)  # a token is never echoed
