"""The scale policy's stabilisation state, one JSON document per pool.

Scale-down waits for a stabilisation window; the state that remembers it must survive
restarts and be shared by replicas, so it lives in the store rather than in memory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from pipelines.store.engine import Database
from pipelines.store.schema import PoolStateRow, as_utc
from pipelines.store.upsert import upsert


class PoolStateRepository:
    """The stabilisation state of the scale policy, one JSON document per pool.

    Args:
        database: the store's database.
    """

    def __init__(self, database: Database) -> None:
        self._db = database

    def get(self, pool: str) -> dict[str, Any] | None:
        """Return the stored state of a pool, or None if none was stored."""
        statement = select(PoolStateRow.state).where(PoolStateRow.pool == pool)
        with self._db.transaction("read pool state") as session:
            return session.execute(statement).scalar_one_or_none()

    def get_many(self, pools: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Return the stored states of ``pools`` (those without one are left out), one read."""
        if not pools:
            return {}
        statement = select(PoolStateRow.pool, PoolStateRow.state).where(
            PoolStateRow.pool.in_(list(pools))
        )
        with self._db.transaction("read pool states") as session:
            return {str(pool): dict(state) for pool, state in session.execute(statement).all()}

    def put(
        self, pool: str, state: Mapping[str, Any], *, updated_at: datetime | None = None
    ) -> None:
        """Replace the state of a pool (insert it the first time).

        Args:
            pool: the node pool's name.
            state: JSON-compatible data.
            updated_at: when it changed (tz-aware); default now.
        """
        row = {
            "pool": pool,
            "updated_at": as_utc(updated_at or datetime.now(UTC)),
            "state": dict(state),
        }
        with self._db.transaction("write pool state") as session:
            upsert(
                session,
                self._db.dialect,
                PoolStateRow,
                [row],
                keys=("pool",),
                update=("updated_at", "state"),
            )

    def put_many(
        self, states: Mapping[str, Mapping[str, Any]], *, updated_at: datetime | None = None
    ) -> None:
        """Replace the states of several pools in one transaction (one commit).

        Args:
            states: JSON-compatible data per pool name.
            updated_at: when they changed (tz-aware); default now.
        """
        if not states:
            return
        at = as_utc(updated_at or datetime.now(UTC))
        rows = [
            {"pool": pool, "updated_at": at, "state": dict(state)} for pool, state in states.items()
        ]
        with self._db.transaction("write pool states") as session:
            upsert(
                session,
                self._db.dialect,
                PoolStateRow,
                rows,
                keys=("pool",),
                update=("updated_at", "state"),
            )
