"""Recommendation bodies from encoded-once pool JSON are the schema's own bytes.

``GET /recommendation`` joins each pool's JSON, encoded once per decision, instead of
serialising the set per request: the bytes must be exactly those of
``RecommendationSet.model_dump_json()``, and a pool's bytes must live no longer than
its decision.
"""

from __future__ import annotations

import gc
from datetime import UTC, datetime, timedelta, timezone

from api.routers import encoded
from api.routers.encoded import pool_json, set_json
from api.schemas import PoolRecommendation, RecommendationSet, UnavailablePool
from tests.api.test_wire_recommendation import decided

NOW = datetime(2024, 5, 1, 12, 0, 30, 123456, tzinfo=UTC)


def bodies(count: int) -> list[PoolRecommendation]:
    """``count`` distinct wire models, one decision a second apart."""
    return [PoolRecommendation.of(decided(NOW + timedelta(seconds=i))) for i in range(count)]


def test_a_pool_is_the_models_own_json() -> None:
    body = bodies(1)[0]

    assert pool_json(body) == body.model_dump_json().encode()


def test_a_set_is_byte_for_byte_the_schemas_serialisation() -> None:
    pools = bodies(3)
    # A reason holding the marker the pools go in must not confuse where they go.
    unavailable = [
        UnavailablePool(pool="late", reason='no samples yet; "pools":[] says nothing'),
        UnavailablePool(pool="other", reason="the store is unreachable"),
    ]

    built = set_json(NOW, pools, unavailable)

    expected = RecommendationSet(generated_at=NOW, pools=pools, unavailable=unavailable)
    assert built == expected.model_dump_json().encode()


def test_an_empty_set_and_a_set_without_unavailable_pools_match_too() -> None:
    pools = bodies(2)

    empty = RecommendationSet(generated_at=NOW, pools=[])
    plain = RecommendationSet(generated_at=NOW, pools=pools)

    assert set_json(NOW, []) == empty.model_dump_json().encode()
    assert set_json(NOW, pools) == plain.model_dump_json().encode()


def test_a_pool_is_encoded_once_and_a_new_decision_anew() -> None:
    first, second = bodies(2)

    once = pool_json(first)

    assert pool_json(first) is once
    # Equal content, another decision: its own bytes, not the first one's.
    again = PoolRecommendation.of(decided(NOW))
    assert pool_json(again) is not once
    assert pool_json(again) == once
    assert pool_json(second) != once


def test_a_decisions_bytes_go_with_it() -> None:
    pools = bodies(5)
    for body in pools:
        pool_json(body)
    held = len(encoded._MEMO)

    del pools, body
    gc.collect()

    assert len(encoded._MEMO) <= held - 5


def test_the_set_is_the_schemas_bytes_at_any_time() -> None:
    pools = bodies(3)
    offset = timezone(timedelta(hours=2))
    # Whole seconds (no fraction written), microseconds, another offset, naive.
    times = [
        NOW.replace(microsecond=0),
        NOW,
        NOW.astimezone(offset),
        NOW.replace(tzinfo=None),
    ]

    for at in times:
        expected = RecommendationSet(generated_at=at, pools=pools).model_dump_json().encode()
        assert set_json(at, pools) == expected
        assert set_json(at, pools[:1]) == (
            RecommendationSet(generated_at=at, pools=pools[:1]).model_dump_json().encode()
        )


def test_a_set_is_joined_once_while_its_pools_hold_their_decisions() -> None:
    pools = bodies(3)

    first = set_json(NOW, pools)
    joined = encoded._JOINED.get(pools)

    assert encoded._JOINED.get(list(pools)) is joined
    assert set_json(NOW + timedelta(seconds=1), pools) != first  # the time is per request
    assert joined in first


def test_a_new_decision_of_one_pool_changes_the_set_at_once() -> None:
    pools = bodies(3)
    before = set_json(NOW, pools)

    # Pool 1 decided again (a push or a refresh): a new model, with other content.
    pools[1] = PoolRecommendation.of(decided(NOW + timedelta(minutes=7)))
    after = set_json(NOW, pools)

    assert after != before
    assert after == RecommendationSet(generated_at=NOW, pools=pools).model_dump_json().encode()


def test_a_selection_and_the_full_set_are_kept_apart() -> None:
    pools = bodies(4)

    every = set_json(NOW, pools)
    some = set_json(NOW, [pools[0], pools[2]])

    assert some == (
        RecommendationSet(generated_at=NOW, pools=[pools[0], pools[2]]).model_dump_json().encode()
    )
    assert set_json(NOW, pools) == every


def test_the_joined_sets_kept_are_bounded_and_the_oldest_go_first() -> None:
    joined = encoded._Joined(size=2)
    sets = [bodies(2) for _ in range(3)]

    for pools in sets:
        joined.get(pools)

    kept = list(joined._sets)
    assert kept == [tuple(map(id, pools)) for pools in sets[1:]]
    # Asked again, the first set is joined anew and the oldest left goes.
    assert joined.get(sets[0]) == b",".join(pool_json(body) for body in sets[0])
    assert list(joined._sets) == [tuple(map(id, pools)) for pools in (sets[2], sets[0])]
