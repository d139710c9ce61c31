"""POST /signals/metrics refuses what cannot be real and stays cheap (issue #13, 1 7 8 9).

A sample from the far future must not move a clock; strings, booleans, 1970 times and
impossible utilisations are refused with a message; only the signals a pool declares
are stored; a push neither refits a forecast for a ``gpu_util`` sample nor rewrites
every later demand row for an old sample.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.clock import ReplayClock
from api.services import Services
from pipelines.store.store import Store

AT = "2025-03-31T00:00:00Z"
NEWEST = datetime(2025, 3, 30, 23, 55, tzinfo=UTC)


def _one(series_id: str, ts: str, value: Any) -> list[dict[str, Any]]:
    return [{"series_id": series_id, "ts": ts, "value": value}]


def test_a_far_future_sample_is_refused_and_moves_no_replay_clock(
    make_services: Callable[..., Services],
    make_app: Callable[[Services], FastAPI],
    store: Store,
) -> None:
    wall = datetime(2025, 3, 31, 0, 5, tzinfo=UTC)
    services = make_services(wall_clock=lambda: wall)
    with TestClient(make_app(services)) as client:
        service = client.app.state.service  # type: ignore[attr-defined]
        service.services.clock = ReplayClock(service.live.newest, fallback=lambda: wall)
        before = service.now()

        refused = client.post(
            "/signals/metrics", json=_one("alpha/nodes", "2262-04-01T00:00:00Z", 0)
        )
        answer = client.get("/recommendation/alpha")

    assert refused.status_code == 422
    message = refused.json()["message"]
    assert "later than now + the tolerance" in message
    assert "2025-03-31T00:10:00+00:00" in message  # the limit: wall + 300 s
    assert "max_sample_future_seconds" in message
    assert service.now() == before == NEWEST
    assert answer.status_code == 200
    assert answer.json()["current_nodes"] != 0
    assert store.samples.last_timestamp("alpha/nodes") == pd.Timestamp(NEWEST)


def test_the_replay_clock_never_runs_ahead_of_the_wall_clock() -> None:
    wall = datetime(2026, 1, 1, tzinfo=UTC)
    clock = ReplayClock(lambda: datetime(2262, 4, 1, tzinfo=UTC), fallback=lambda: wall)

    assert clock() == wall + timedelta(minutes=5)


def test_a_sample_within_the_tolerance_is_accepted(
    make_services: Callable[..., Services], make_app: Callable[[Services], FastAPI]
) -> None:
    wall = datetime(2025, 3, 30, 23, 58, tzinfo=UTC)
    with TestClient(make_app(make_services(wall_clock=lambda: wall))) as client:
        response = client.post("/signals/metrics", json=_one("alpha/nodes", AT, 4))

    assert response.status_code == 200


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (_one("alpha/nodes", AT, "12"), "valid number"),
        (_one("alpha/nodes", AT, True), "valid number"),
        (_one("alpha/nodes", 1743379200, 3), "RFC 3339"),
        (_one("alpha/gpu_util", AT, -5), "gpu_util is a percentage in 0-100, got -5.0"),
        (_one("alpha/gpu_util", AT, 1e6), "gpu_util is a percentage in 0-100, got 1000000.0"),
        (_one("alpha/allocated_gpus", AT, 1e12), "above the largest count"),
        (_one("alpha/nodes", "1970-01-01T00:00:00Z", 3), "before the earliest accepted"),
    ],
)
def test_values_that_cannot_be_real_are_refused(
    client: TestClient, store: Store, body: list[dict[str, Any]], fragment: str
) -> None:
    response = client.post("/signals/metrics", json=body)

    assert response.status_code == 422
    assert fragment in response.json()["message"]
    assert store.samples.last_timestamp(body[0]["series_id"]) == pd.Timestamp(NEWEST)


def test_only_declared_signals_are_stored(client: TestClient, store: Store) -> None:
    body = _one("alpha/junk_0001", AT, 1) + _one("alpha/nodes", AT, 3)

    response = client.post("/signals/metrics", json=body)

    assert response.status_code == 422
    message = response.json()["message"]
    assert "pool 'alpha' declares no signals ['junk_0001']" in message
    assert "allocated_gpus, demand_gpus, gpu_util, nodes, queue_gpus" in message
    assert "junk" not in " ".join(store.samples.last_timestamps())
    assert store.samples.last_timestamp("alpha/nodes") == pd.Timestamp(NEWEST)


def test_an_old_sample_rewrites_one_demand_row_not_every_later_one(
    client: TestClient, store: Store
) -> None:
    old = (NEWEST - timedelta(days=1)).isoformat().replace("+00:00", "Z")

    response = client.post("/signals/metrics", json=_one("alpha/queue_gpus", old, 5))

    assert response.status_code == 200
    # The queue sample and the one demand row at its time; the day after is untouched.
    assert response.json()["rows_written"] == 2
