"""The live index: batch and per-pool polls, demand derived when its series lags."""

from __future__ import annotations

from datetime import timedelta

import pandas as pd

from api.live import LiveIndex
from pipelines.config.pools import PoolsConfig
from pipelines.store.store import Store


def _rows(*items: tuple[str, str, float]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "unique_id": [i[0] for i in items],
            "ds": pd.to_datetime([i[1] for i in items], utc=True),
            "y": [i[2] for i in items],
        }
    )


def test_poll_reports_only_changed_pools(store: Store, pools: PoolsConfig) -> None:
    index = LiveIndex(store, pools.pools)
    assert index.poll() == {"alpha", "beta"}
    assert index.poll() == set()

    store.samples.upsert(_rows(("beta/nodes", "2025-03-31T00:00:00Z", 3.0)))

    assert index.poll() == {"beta"}
    assert index.readings("beta").latest["nodes"].value == 3.0
    assert index.newest() == pd.Timestamp("2025-03-31T00:00:00Z")


def test_a_lagging_pool_is_read_on_its_own(store: Store, pools: PoolsConfig) -> None:
    index = LiveIndex(store, pools.pools)
    index.poll()
    # alpha moves two hours ahead: beta now lags by more than the lookback.
    store.samples.upsert(_rows(("alpha/nodes", "2025-03-31T02:00:00Z", 5.0)))
    index.poll()
    store.samples.upsert(_rows(("beta/nodes", "2025-03-31T00:05:00Z", 7.0)))

    assert index.poll() == {"beta"}
    assert index.readings("beta").latest["nodes"].value == 7.0


def test_demand_is_allocated_plus_queue_when_its_series_lags(
    store: Store, pools: PoolsConfig
) -> None:
    at = "2025-03-31T00:00:00Z"
    store.samples.upsert(_rows(("alpha/allocated_gpus", at, 30.0), ("alpha/queue_gpus", at, 12.0)))
    index = LiveIndex(store, pools.pools)
    index.poll()

    demand = index.readings("alpha").demand()

    assert demand is not None
    assert demand.value == 42.0
    assert demand.at == pd.Timestamp(at)
    live = index.readings("alpha").live_signals()
    assert live is not None
    assert live.ready_nodes.at == pd.Timestamp(at) - timedelta(minutes=5)


def test_moved_by_names_the_pools_a_write_can_have_changed(
    store: Store, pools: PoolsConfig
) -> None:
    # Every signal has a reading at 23:55; alpha's parts move on to 00:00, its demand not.
    at = "2025-03-31T00:00:00Z"
    store.samples.upsert(_rows(("alpha/allocated_gpus", at, 30.0), ("alpha/queue_gpus", at, 12.0)))
    index = LiveIndex(store, pools.pools)
    index.poll()
    older, same, newer = (
        pd.Timestamp(t) for t in ("2025-03-30T23:50:00Z", "2025-03-30T23:55:00Z", at)
    )

    # A backfill older than every reading it could touch changes nothing.
    assert index.moved_by([("beta/nodes", older), ("alpha/allocated_gpus", older)]) == []
    # The same time may rewrite the reading's value; a newer one replaces it.
    assert index.moved_by([("beta/nodes", same)]) == ["beta"]
    assert index.moved_by([("beta/nodes", newer), ("alpha/nodes", newer)]) == ["beta", "alpha"]
    # A part older than its own reading still moves demand, which is older still.
    assert index.moved_by([("alpha/queue_gpus", same)]) == ["alpha"]
    # Other pools and signals are not the index's; a pool never read is always moved.
    assert index.moved_by([("gamma/nodes", newer), ("alpha/other_signal", newer)]) == []
    assert LiveIndex(store, pools.pools).moved_by([("beta/nodes", older)]) == ["beta"]
