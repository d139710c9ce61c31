"""Stabilisation state lives in the store: two app instances sharing it agree."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.ingest import pushed_rows
from api.pool_entry import PoolEntry
from api.service import RecommendationService
from api.services import Services
from pipelines.config.pools import PoolConfig
from pipelines.store.samples import SampleRow
from pipelines.store.store import Store
from policy.state import StabilisationState
from policy.types import NO_LATENCY, LatencyAdjustment

from .conftest import END, FakeClock


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


# -- one pool decided twice at once ---------------------------------------------


class Worker:
    """A thread that runs one call and keeps its exception (threads swallow them)."""

    def __init__(self, call: Callable[[], object]) -> None:
        self.errors: list[BaseException] = []
        self.finished = threading.Event()
        self._call = call
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the worker is stuck"
        assert self.errors == []

    def _run(self) -> None:
        try:
            self._call()
        except BaseException as exc:
            self.errors.append(exc)
        finally:
            self.finished.set()


@dataclass
class HeldLatency:
    """A latency source that holds the next decision of ``pool`` until released, once.

    It is asked in the middle of a decision, after the pool's state was read and
    before the new one is written.
    """

    pool: str = "alpha"
    armed: bool = True
    reached: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def __call__(self, pool: PoolConfig, now: datetime) -> LatencyAdjustment:
        if pool.name == self.pool and self.armed:
            self.armed = False
            self.reached.set()
            assert self.release.wait(60)
        return NO_LATENCY


class HeldStateWrites:
    """The store's pool states, holding the first write that includes ``pool`` until released.

    Reads pass through; a write is any method named ``put...`` or ``replace...``.
    ``written`` keeps the states of ``pool`` handed to ``replace...``, in write order.
    """

    def __init__(self, inner: Any, pool: str) -> None:
        self.reached = threading.Event()
        self.release = threading.Event()
        self.written: list[StabilisationState] = []
        self._inner = inner
        self._pool = pool

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._inner, name)
        if not name.startswith(("put", "replace")):
            return found

        def write(pools: Any, *args: Any, **kwargs: Any) -> Any:
            if self._pool in pools and not self.reached.is_set():
                self.reached.set()
                assert self.release.wait(60)
            if name.startswith("replace") and self._pool in pools:
                self.written.append(StabilisationState.from_dict(pools[self._pool]))
            return found(pools, *args, **kwargs)

        return write


def _live(pool: str, *, allocated: float, nodes: float) -> list[SampleRow]:
    return pushed_rows(
        [
            (f"{pool}/allocated_gpus", END, allocated),
            (f"{pool}/queue_gpus", END, 0.0),
            (f"{pool}/nodes", END, nodes),
        ]
    )


def test_a_replica_deciding_while_another_stores_a_decision_builds_on_it(
    make_services: Callable[..., Services], store: Store
) -> None:
    """Replica A reads alpha's state and decides; B decides and stores meanwhile.

    Without compare-and-set, A then writes its state over B's and B's high value
    leaves the stabilisation window: the next decision may scale down below it.
    """
    clock = FakeClock()
    held = HeldLatency()
    a = RecommendationService(make_services(clock=clock, model=None, latency=held))
    b = RecommendationService(make_services(clock=clock, model=None))
    a.start()
    b.start()

    low = Worker(lambda: a.ingest(_live("alpha", allocated=8, nodes=10)))
    assert held.reached.wait(30), "replica A never decided"
    b.ingest(_live("alpha", allocated=320, nodes=10))  # 40 nodes, the pool's maximum
    held.release.set()
    low.join(30)

    stored = store.state.get("alpha")
    assert stored is not None
    assert max(span["nodes"] for span in stored["spans"]) == 40
    answer = a.recommendation("alpha").recommendation
    assert answer.state.to_dict() == stored
    assert (answer.desired_nodes, answer.explanation.stabilisation_limit) == (40, "window")


def test_a_push_during_a_refresh_of_its_pool_decides_after_it(
    make_services: Callable[..., Services], store: Store
) -> None:
    """The refresh decides alpha (on the stored history) and is held writing its state;
    a push of alpha comes in.

    Without one decision of a pool at a time, the push reads the state the refresh is
    about to replace, and one of the two decisions is lost: the stored state is not
    the one the served answer was decided with.
    """
    held = HeldStateWrites(store.state, "alpha")
    store.state = held  # type: ignore[assignment]
    service = RecommendationService(make_services(clock=FakeClock(), model=None))
    service.start()

    refresh = Worker(service.refresh)
    assert held.reached.wait(30), "the refresh never wrote alpha's state"
    push = Worker(lambda: service.ingest(_live("alpha", allocated=0, nodes=10)))
    # Unheld, the push would finish now; held out by the refresh, it waits (this only
    # bounds how long it is given).
    push.finished.wait(1.0)
    held.release.set()
    refresh.join(30)
    push.join(30)

    refreshed, pushed = held.written
    assert store.state.get("alpha") == pushed.to_dict()
    assert service.recommendation("alpha").recommendation.state == pushed
    # The push's decision is recorded on top of the refresh's, whose higher value
    # stays in the window.
    assert pushed.spans[0] == refreshed.spans[-1]
    assert pushed.spans[-1].nodes < refreshed.spans[-1].nodes


def test_reads_during_a_decision_serve_the_unexpired_answers(
    make_services: Callable[..., Services],
) -> None:
    """A push of alpha is held mid-decision; reads of alpha (its pool being decided) and
    of beta (the service lock taken) answer at once with their unexpired entries."""
    held = HeldLatency(armed=False)
    service = RecommendationService(make_services(clock=FakeClock(), model=None, latency=held))
    service.start()
    service.refresh()
    before, _ = service.recommendations(service.select(None))
    service.invalidate()

    held.armed = True
    push = Worker(lambda: service.ingest(_live("alpha", allocated=320, nodes=10)))
    answers: list[PoolEntry] = []
    try:
        assert held.reached.wait(30), "the push never decided"
        read = Worker(lambda: answers.extend(service.recommendations(service.select(None))[0]))
        assert read.finished.wait(10), "a read waited for the decision in progress"
        read.join(1)
    finally:
        held.release.set()
        push.join(30)

    assert answers == before
    assert service.recommendation("alpha").recommendation.desired_nodes == 40
