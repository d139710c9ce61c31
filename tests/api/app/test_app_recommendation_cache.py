"""GET /recommendation served from the cached ``pools`` array: fresh after every change.

Each test changes one thing the response depends on between two requests (a push, an
invalidation with a new latency adjustment, expiry, another selection) and checks the
second response shows it; a cache that ignored the change would serve the first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.service import RecommendationService, Services
from pipelines.config.pools import PoolConfig
from pipelines.policy import LatencyAdjustment

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
def cached_client(
    make_services: Callable[..., Services],
    make_app: Callable[[Services], FastAPI],
    clock: Any,
    latency: SettableLatency,
) -> Iterator[TestClient]:
    """A client whose service already holds the all-pools array (the first request after
    start computes in a thread; the next one fills the cache)."""
    with TestClient(make_app(make_services(clock=clock, latency=latency))) as test_client:
        for _ in range(2):
            assert test_client.get("/recommendation").status_code == 200
        assert len(service_of(test_client).pool_arrays) == 1
        yield test_client


def service_of(client: TestClient) -> RecommendationService:
    found: RecommendationService = client.app.state.service  # type: ignore[attr-defined]
    return found


def pools_of(client: TestClient, query: str = "") -> list[dict[str, Any]]:
    response = client.get(f"/recommendation{query}")
    assert response.status_code == 200
    pools: list[dict[str, Any]] = response.json()["pools"]
    return pools


def test_repeated_requests_reuse_one_array_equal_to_the_pools_own(
    cached_client: TestClient,
) -> None:
    first = pools_of(cached_client)
    version = service_of(cached_client).version

    second = pools_of(cached_client)

    assert second == first
    assert len(service_of(cached_client).pool_arrays) == 1
    assert service_of(cached_client).pool_arrays.get((), version, service_of(cached_client).now())
    assert first == [cached_client.get(f"/recommendation/{p}").json() for p in ("alpha", "beta")]


def test_generated_at_of_the_set_follows_the_clock_while_cached(
    cached_client: TestClient, clock: Any
) -> None:
    first = cached_client.get("/recommendation").json()
    clock.advance(timedelta(seconds=30))

    second = cached_client.get("/recommendation").json()

    assert second["pools"] == first["pools"]
    assert second["generated_at"] != first["generated_at"]
    assert second["generated_at"] == "2025-03-30T23:55:30Z"
    assert second["pools"][0]["generated_at"] == NEWEST


def test_a_push_changes_the_next_response(cached_client: TestClient) -> None:
    before = pools_of(cached_client)[0]

    # Rewrites the newest samples, so nothing expires: only the push can change it.
    pushed = cached_client.post(
        "/signals/metrics",
        json=[
            {"series_id": "alpha/allocated_gpus", "ts": NEWEST, "value": 200},
            {"series_id": "alpha/queue_gpus", "ts": NEWEST, "value": 120},
            {"series_id": "alpha/nodes", "ts": NEWEST, "value": 12},
        ],
    )
    after = pools_of(cached_client)[0]

    assert pushed.status_code == 200
    assert before["current_nodes"] != 12
    assert after["current_nodes"] == 12
    assert after["explanation"]["inputs"]["live_demand_gpus"]["value"] == 320.0


def test_an_invalidation_changes_the_next_response(
    cached_client: TestClient, latency: SettableLatency
) -> None:
    before = pools_of(cached_client)[0]
    latency.extra_nodes = 3

    unchanged = pools_of(cached_client)[0]
    service_of(cached_client).invalidate(["alpha"])
    after = pools_of(cached_client)[0]

    assert before["explanation"]["latency"]["extra_nodes"] == 0
    # Without an invalidation the answer holds until it expires, cached or not.
    assert unchanged == before
    assert after["explanation"]["latency"]["extra_nodes"] == 3


def test_expiry_recomputes_even_without_a_change(cached_client: TestClient, clock: Any) -> None:
    before = pools_of(cached_client)
    clock.advance(timedelta(minutes=5))

    after = pools_of(cached_client)

    assert [p["valid_until"] for p in before] == [AT, AT]
    assert [p["generated_at"] for p in before] == [NEWEST, NEWEST]
    assert [p["generated_at"] for p in after] == [AT, AT]


def test_selections_are_cached_apart(cached_client: TestClient) -> None:
    everything = pools_of(cached_client)

    beta = pools_of(cached_client, "?pool=beta")
    beta_again = pools_of(cached_client, "?pool=beta")
    again = pools_of(cached_client)

    assert [p["pool"] for p in beta] == ["beta"]
    assert beta_again == beta
    assert again == everything
    assert len(service_of(cached_client).pool_arrays) == 2


def test_an_unknown_pool_is_a_404_and_not_cached(cached_client: TestClient) -> None:
    response = cached_client.get("/recommendation?pool=nope")

    assert response.status_code == 404
    assert len(service_of(cached_client).pool_arrays) == 1
