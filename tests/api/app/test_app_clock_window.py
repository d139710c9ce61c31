"""Under the replay clock a pushed sample past the replay's window is refused (issue #35).

The operator's case: ``make run`` serves the committed sample (ending 2025-03-30) on
the replay clock, and one sample stamped with the wall clock (2026-12-06) moved "now"
twenty months ahead, so every pool went reactive for stale data. The wall clock's own
tolerance let it through; the replay's window (a few steps past the replay's now) does not.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.clock import REPLAY_AHEAD_STEPS, ReplayClock
from api.services import Services
from pipelines.store.store import Store

NEWEST = datetime(2025, 3, 30, 23, 55, tzinfo=UTC)
"""The newest sample of the fixture's history (the replay's now)."""
STEP = timedelta(minutes=5)
WALL = datetime(2026, 12, 6, 21, 0, tzinfo=UTC)
"""The wall clock of the operator's report."""


def _sample(series_id: str, at: datetime, value: float = 3.0) -> list[dict[str, Any]]:
    return [{"series_id": series_id, "ts": at.isoformat(), "value": value}]


def _replaying(client: TestClient, services: Services) -> Any:
    service = client.app.state.service  # type: ignore[attr-defined]
    service.services.clock = ReplayClock(service.live.newest, fallback=lambda: WALL)
    return service


def test_a_wall_clock_sample_is_refused_with_why_and_never_moves_now(
    make_services: Callable[..., Services],
    make_app: Callable[[Services], FastAPI],
    store: Store,
) -> None:
    services = make_services(wall_clock=lambda: WALL)
    with TestClient(make_app(services)) as client:
        service = _replaying(client, services)
        assert service.now() == NEWEST

        refused = client.post("/signals/metrics", json=_sample("alpha/nodes", WALL))
        answer = client.get("/recommendation/alpha").json()
        ready = client.get("/readyz")

    assert refused.status_code == 422
    message = refused.json()["message"]
    assert "alpha/nodes" in message
    assert "outside the replay's window" in message
    assert (NEWEST + REPLAY_AHEAD_STEPS * STEP).isoformat() in message  # where it ends
    assert "--clock replay" in message
    assert service.now() == NEWEST
    assert answer["generated_at"] == "2025-03-30T23:55:00Z"
    assert answer["mode"] == "predictive"
    assert ready.status_code == 200, ready.json()
    assert store.samples.last_timestamp("alpha/nodes") == pd.Timestamp(NEWEST)


def test_the_window_ends_a_few_steps_past_now_and_a_sample_inside_moves_now(
    make_services: Callable[..., Services],
    make_app: Callable[[Services], FastAPI],
) -> None:
    services = make_services(wall_clock=lambda: WALL)
    end = NEWEST + REPLAY_AHEAD_STEPS * STEP
    with TestClient(make_app(services)) as client:
        service = _replaying(client, services)
        past = client.post(
            "/signals/metrics", json=_sample("alpha/nodes", end + timedelta(seconds=1))
        )
        unmoved = service.now()
        inside = client.post("/signals/metrics", json=_sample("alpha/nodes", end))
        moved = service.now()

    assert past.status_code == 422
    assert unmoved == NEWEST
    assert inside.status_code == 200
    assert moved == end


def test_a_backfill_before_now_is_accepted_and_leaves_now(
    make_services: Callable[..., Services],
    make_app: Callable[[Services], FastAPI],
) -> None:
    services = make_services(wall_clock=lambda: WALL)
    with TestClient(make_app(services)) as client:
        service = _replaying(client, services)
        stale = client.post("/signals/metrics", json=_sample("beta/nodes", WALL))
        backfill = client.post(
            "/signals/metrics", json=_sample("beta/nodes", NEWEST - timedelta(days=30))
        )

    assert stale.status_code == 422
    assert backfill.status_code == 200
    assert service.now() == NEWEST
