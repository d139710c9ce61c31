"""GET /recommendation answered from the pools' decided entries: fresh after every change.

Each test changes one thing the response depends on between two requests (a push, an
invalidation with a new latency adjustment, expiry, another selection) and checks the
second response shows it; an entry that outlived the change would serve the first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.service import RecommendationService
from api.services import Services
from pipelines.config.pools import PoolConfig
from policy.types import LatencyAdjustment

AT = "2025-03-31T00:00:00Z"
NEWEST = "2025-03-30T23:55:00Z"
"""The newest sample of the fixtures' history, and the clock's time."""


@dataclass
class SettableLatency:
    """A latency source whose extra nodes the test sets."""

    extra_nodes: int = 0

    def __call__(self, pool: PoolConfig, now: datetime) -> LatencyAdjustment:
        return LatencyAdjustment(self.extra_nodes, "test")


@pytest.fixture
def latency() -> SettableLatency:
    return SettableLatency()


@pytest.fixture
def warm_client(
    make_services: Callable[..., Services],
    make_app: Callable[[Services], FastAPI],
    clock: Any,
    latency: SettableLatency,
) -> Iterator[TestClient]:
    """A client whose service already holds every pool's entry (the first request after
    start decides in a thread)."""
    with TestClient(make_app(make_services(clock=clock, latency=latency))) as test_client:
        assert test_client.get("/recommendation").status_code == 200
        assert service_of(test_client).peek(service_of(test_client).select(None))
        yield test_client


def service_of(client: TestClient) -> RecommendationService:
    found: RecommendationService = client.app.state.service  # type: ignore[attr-defined]
    return found


def pools_of(client: TestClient, query: str = "") -> list[dict[str, Any]]:
    response = client.get(f"/recommendation{query}")
    assert response.status_code == 200
    pools: list[dict[str, Any]] = response.json()["pools"]
    return pools


def test_repeated_requests_answer_the_same_pools_as_the_per_pool_route(
    warm_client: TestClient,
) -> None:
    first = pools_of(warm_client)

    second = pools_of(warm_client)

    assert second == first
    assert first == [warm_client.get(f"/recommendation/{p}").json() for p in ("alpha", "beta")]


def test_generated_at_of_the_set_follows_the_clock_while_entries_hold(
    warm_client: TestClient, clock: Any
) -> None:
    first = warm_client.get("/recommendation").json()
    clock.advance(timedelta(seconds=30))

    second = warm_client.get("/recommendation").json()

    assert second["pools"] == first["pools"]
    assert second["generated_at"] != first["generated_at"]
    assert second["generated_at"] == "2025-03-30T23:55:30Z"
    assert second["pools"][0]["generated_at"] == NEWEST


def test_a_push_changes_the_next_response(warm_client: TestClient) -> None:
    before = pools_of(warm_client)[0]

    # Rewrites the newest samples, so nothing expires: only the push can change it.
    pushed = warm_client.post(
        "/signals/metrics",
        json=[
            {"series_id": "alpha/allocated_gpus", "ts": NEWEST, "value": 200},
            {"series_id": "alpha/queue_gpus", "ts": NEWEST, "value": 120},
            {"series_id": "alpha/nodes", "ts": NEWEST, "value": 12},
        ],
    )
    after = pools_of(warm_client)[0]

    assert pushed.status_code == 200
    assert before["current_nodes"] != 12
    assert after["current_nodes"] == 12
    assert after["explanation"]["inputs"]["live_demand_gpus"]["value"] == 320.0


def test_an_invalidation_changes_the_next_response(
    warm_client: TestClient, latency: SettableLatency
) -> None:
    before = pools_of(warm_client)[0]
    latency.extra_nodes = 3

    unchanged = pools_of(warm_client)[0]
    service_of(warm_client).invalidate(["alpha"])
    after = pools_of(warm_client)[0]

    assert before["explanation"]["latency"]["extra_nodes"] == 0
    # Without an invalidation the answer holds until it expires.
    assert unchanged == before
    assert after["explanation"]["latency"]["extra_nodes"] == 3


def test_expiry_recomputes_even_without_a_change(warm_client: TestClient, clock: Any) -> None:
    before = pools_of(warm_client)
    clock.advance(timedelta(minutes=5))

    after = pools_of(warm_client)

    assert [p["valid_until"] for p in before] == [AT, AT]
    assert [p["generated_at"] for p in before] == [NEWEST, NEWEST]
    assert [p["generated_at"] for p in after] == [AT, AT]


def test_a_selection_answers_its_pools_only(warm_client: TestClient) -> None:
    everything = pools_of(warm_client)

    beta = pools_of(warm_client, "?pool=beta")
    beta_again = pools_of(warm_client, "?pool=beta")
    again = pools_of(warm_client)

    assert [p["pool"] for p in beta] == ["beta"]
    assert beta_again == beta
    assert again == everything
    assert beta == [p for p in everything if p["pool"] == "beta"]


def test_an_unknown_pool_is_a_404(warm_client: TestClient) -> None:
    response = warm_client.get("/recommendation?pool=nope")

    assert response.status_code == 404
