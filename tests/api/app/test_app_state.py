"""Stabilisation state lives in the store: two app instances sharing it agree."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.service import Services
from pipelines.store import Store


def _push(client: TestClient, at: str, demand: float, nodes: float) -> None:
    response = client.post(
        "/signals/metrics",
        json=[
            {"series_id": "alpha/allocated_gpus", "ts": at, "value": demand},
            {"series_id": "alpha/queue_gpus", "ts": at, "value": 0},
            {"series_id": "alpha/nodes", "ts": at, "value": nodes},
        ],
    )
    assert response.status_code == 200, response.text


def test_replicas_share_the_stabilisation_state(
    make_services: Callable[..., Services],
    make_app: Callable[[Services], FastAPI],
    new_clock: Callable[..., Any],
    store: Store,
) -> None:
    clock_a, clock_b = new_clock(), new_clock()
    app_a = make_app(make_services(clock=clock_a, model=None))
    app_b = make_app(make_services(clock=clock_b, model=None))
    with TestClient(app_a) as a, TestClient(app_b) as b:
        # Replica A decides first: 80 GPUs on 10 ready nodes need 10 nodes.
        clock_a.advance(timedelta(minutes=5))
        _push(a, "2025-03-31T00:00:00Z", demand=80, nodes=10)
        first = a.get("/recommendation/alpha").json()
        stored = store.state.get("alpha")

        # Eleven minutes later demand drops; replica B, which never decided, answers.
        clock_b.advance(timedelta(minutes=16))
        _push(b, "2025-03-31T00:11:00Z", demand=16, nodes=10)
        second = b.get("/recommendation/alpha").json()

        # Another eleven minutes on, A answers from the history B extended.
        clock_a.advance(timedelta(minutes=22))
        _push(a, "2025-03-31T00:22:00Z", demand=16, nodes=10)
        third = a.get("/recommendation/alpha").json()

    assert first["desired_nodes"] == 10
    assert stored is not None
    assert stored["tracked_since"] == "2025-03-31T00:00:00Z"
    # B knows A's history: the window holds at A's 10 (a fresh state would say
    # "warming_up" instead, as the next test shows).
    assert second["explanation"]["stabilisation_limit"] == "window"
    assert second["desired_nodes"] == 10
    # A sees B's decision: the 10 ended at 00:11, so by 00:22 it left the window and
    # the scale-down goes by the one-node step.
    assert third["explanation"]["stabilisation_limit"] == "step"
    assert third["desired_nodes"] == 9
    final_state = store.state.get("alpha")
    assert final_state is not None
    assert final_state["last_decision_at"] == "2025-03-31T00:22:00Z"


def test_a_fresh_store_state_waits_a_window_before_scaling_down(
    make_services: Callable[..., Services],
    make_app: Callable[[Services], FastAPI],
    new_clock: Callable[..., Any],
) -> None:
    clock = new_clock()
    with TestClient(make_app(make_services(clock=clock, model=None))) as client:
        clock.advance(timedelta(minutes=5))
        _push(client, "2025-03-31T00:00:00Z", demand=16, nodes=10)
        answer = client.get("/recommendation/alpha").json()

    assert answer["explanation"]["stabilisation_limit"] == "warming_up"
    assert answer["desired_nodes"] == 10
