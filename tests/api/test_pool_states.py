"""A pool's stabilisation state: decisions take turns in a process, compare-and-set across."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from api.pool_states import ATTEMPTS, PoolLocks, update_states
from pipelines.store.store import Store, open_store
from policy.state import StabilisationState

NOW = datetime(2025, 3, 31, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(f"sqlite:///{tmp_path / 'store.db'}") as opened:
        yield opened


def decided_at(at: datetime) -> StabilisationState:
    return StabilisationState(tracked_since=at, last_decision_at=at)


def test_a_busy_pool_makes_a_non_waiting_hold_give_up_holding_nothing() -> None:
    locks = PoolLocks(["a", "b", "c"])
    with locks.hold(["b"]) as busy:
        assert busy
        with locks.hold(["c", "b", "a"], wait=False) as taken:
            assert not taken
    # Nothing stayed held: every pool can be taken again at once.
    with locks.hold(["a", "b", "c", "a"], wait=False) as taken:
        assert taken


def test_states_are_decided_from_the_stored_ones_and_written_back(store: Store) -> None:
    store.state.put("a", decided_at(NOW).to_dict())
    seen: dict[str, StabilisationState] = {}

    def decide(pool: str, state: StabilisationState) -> tuple[str, StabilisationState | None]:
        seen[pool] = state
        return f"decided {pool}", decided_at(NOW) if pool != "c" else None

    results = update_states(store.state, ["a", "b", "c"], decide, updated_at=NOW)

    assert results == {"a": "decided a", "b": "decided b", "c": "decided c"}
    assert seen == {"a": decided_at(NOW), "b": StabilisationState(), "c": StabilisationState()}
    assert store.state.get("b") == decided_at(NOW).to_dict()
    assert store.state.get("c") is None  # a decision that keeps nothing stores nothing


def test_a_state_written_by_another_replica_meanwhile_is_decided_on_again(store: Store) -> None:
    rival = datetime(2025, 3, 30, tzinfo=UTC)
    calls: list[StabilisationState] = []

    def decide(pool: str, state: StabilisationState) -> tuple[int, StabilisationState]:
        calls.append(state)
        if len(calls) == 1:
            # Another replica stores its decision between this one's read and write.
            store.state.put(pool, decided_at(rival).to_dict())
        return len(calls), StabilisationState(
            tracked_since=state.tracked_since or NOW, last_decision_at=NOW
        )

    assert update_states(store.state, ["a"], decide, updated_at=NOW) == {"a": 2}
    assert calls == [StabilisationState(), decided_at(rival)]
    stored = store.state.get("a")
    assert stored is not None
    assert (stored["tracked_since"], stored["last_decision_at"]) == (
        "2025-03-30T00:00:00Z",
        "2025-03-31T00:00:00Z",
    )


def test_a_pool_always_written_by_others_keeps_its_last_decision_unstored(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[str] = []

    def decide(pool: str, state: StabilisationState) -> tuple[str, StabilisationState]:
        calls.append(pool)
        store.state.put(pool, {"by": "another replica"})
        return "mine", decided_at(NOW)

    with caplog.at_level(logging.WARNING, logger="api.pool_states"):
        assert update_states(store.state, ["a"], decide, updated_at=NOW) == {"a": "mine"}

    assert calls == ["a"] * ATTEMPTS
    assert store.state.get("a") == {"by": "another replica"}
    assert "other replicas kept writing the stabilisation state" in caplog.text


def test_an_unreadable_stored_state_starts_over(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    store.state.put("a", {"spans": "not a list"})
    seen: list[StabilisationState] = []

    def decide(pool: str, state: StabilisationState) -> tuple[None, StabilisationState]:
        seen.append(state)
        return None, decided_at(NOW)

    with caplog.at_level(logging.WARNING, logger="api.pool_states"):
        update_states(store.state, ["a"], decide, updated_at=NOW)

    assert seen == [StabilisationState()]
    assert "ignoring stored stabilisation state" in caplog.text
    assert store.state.get("a") == decided_at(NOW).to_dict()
