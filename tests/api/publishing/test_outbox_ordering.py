"""The outbox queries delivery relies on: latest per URL, blockers, release, dead letters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pipelines.store.store import Store
from tests.pipelines.store.outbox_reads import stored_item

T0 = datetime(2025, 3, 30, 12, 0, tzinfo=UTC)
A, B = "http://a.test", "http://b.test"


def test_latest_is_the_newest_item_of_that_url(store: Store) -> None:
    assert store.outbox.latest(A) is None
    store.outbox.enqueue(A, b"1", "k1", now=T0)
    second = store.outbox.enqueue(A, b"2", "k2", now=T0)
    store.outbox.enqueue(B, b"3", "k3", now=T0)

    latest = store.outbox.latest(A)

    assert latest is not None
    assert (latest.id, latest.idempotency_key, latest.body) == (second, "k2", b"2")


def test_the_blocker_is_the_oldest_unsettled_item_of_the_same_url(store: Store) -> None:
    first = store.outbox.enqueue(A, b"1", "k1", now=T0)
    store.outbox.enqueue(B, b"x", "kb", now=T0)
    second = store.outbox.enqueue(A, b"2", "k2", now=T0)
    third = store.outbox.enqueue(A, b"3", "k3", now=T0)
    items = {item.id: item for item in store.outbox.claim_due(now=T0)}

    blocker = store.outbox.blocker(items[third])
    assert blocker is not None
    assert blocker.id == first
    store.outbox.mark_delivered(first, now=T0)
    blocker = store.outbox.blocker(items[third])
    assert blocker is not None
    assert blocker.id == second
    assert store.outbox.blocker(items[second]) is None


def test_release_undoes_the_claim(store: Store) -> None:
    item_id = store.outbox.enqueue(A, b"1", "k1", now=T0)
    (claimed,) = store.outbox.claim_due(now=T0)
    assert claimed.attempts == 1

    store.outbox.release(item_id, due_at=T0 + timedelta(seconds=7))

    item = stored_item(store, item_id)
    assert item is not None
    assert item.attempts == 0
    assert item.next_attempt_at == T0 + timedelta(seconds=7)
    assert store.outbox.claim_due(now=T0 + timedelta(seconds=6)) == []
    assert len(store.outbox.claim_due(now=T0 + timedelta(seconds=7))) == 1


def test_a_given_up_item_is_settled_and_listed_as_a_dead_letter(store: Store) -> None:
    dead = store.outbox.enqueue(A, b"1", "k1", now=T0)
    done = store.outbox.enqueue(A, b"2", "k2", now=T0)
    store.outbox.claim_due(now=T0)

    store.outbox.give_up(dead, "HTTP 410: gone", now=T0)
    store.outbox.mark_delivered(done, now=T0)
    store.outbox.give_up(done, "too late", now=T0)

    assert [(i.id, i.last_error) for i in store.outbox.dead_letters()] == [(dead, "HTTP 410: gone")]
    assert store.outbox.counts()["pending"] == 0
    assert store.outbox.claim_due(now=T0 + timedelta(days=1)) == []
