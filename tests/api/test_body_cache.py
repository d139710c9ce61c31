"""The cache of encoded ``pools`` arrays: hits only at the same version before expiry."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from api.body_cache import PoolsArrayCache

NOW = datetime(2025, 3, 31, tzinfo=UTC)
LATER = NOW + timedelta(minutes=5)


def test_a_put_array_is_the_joined_parts_and_is_found_again() -> None:
    cache = PoolsArrayCache()

    array = cache.put((), 3, [b'{"pool":"a"}', b'{"pool":"b"}'], LATER)

    assert json.loads(array) == [{"pool": "a"}, {"pool": "b"}]
    assert cache.get((), 3, NOW) == array


def test_no_parts_make_an_empty_array() -> None:
    assert PoolsArrayCache().put(("x",), 0, [], LATER) == b"[]"


@pytest.mark.parametrize(
    ("selection", "version", "now"),
    [
        (("a",), 3, NOW),  # another selection
        ((), 4, NOW),  # the service changed since
        ((), 3, LATER),  # a pool's recommendation expired
        ((), 3, LATER + timedelta(seconds=1)),
    ],
)
def test_misses_on_other_selection_version_or_expiry(
    selection: tuple[str, ...], version: int, now: datetime
) -> None:
    cache = PoolsArrayCache()
    cache.put((), 3, [b"{}"], LATER)

    assert cache.get(selection, version, now) is None


def test_a_new_put_replaces_the_selection() -> None:
    cache = PoolsArrayCache()
    cache.put((), 1, [b"1"], LATER)

    cache.put((), 2, [b"2"], LATER)

    assert cache.get((), 1, NOW) is None
    assert cache.get((), 2, NOW) == b"[2]"
    assert len(cache) == 1


def test_the_oldest_selection_is_dropped_past_the_bound() -> None:
    cache = PoolsArrayCache(max_selections=2)
    cache.put(("a",), 1, [b"1"], LATER)
    cache.put(("b",), 1, [b"2"], LATER)
    cache.put(("a",), 1, [b"1"], LATER)  # refreshed: now the newest

    cache.put(("c",), 1, [b"3"], LATER)

    assert len(cache) == 2
    assert cache.get(("b",), 1, NOW) is None
    assert cache.get(("a",), 1, NOW) == b"[1]"
    assert cache.get(("c",), 1, NOW) == b"[3]"


def test_a_bound_below_one_is_rejected() -> None:
    with pytest.raises(ValueError, match="max_selections"):
        PoolsArrayCache(max_selections=0)
