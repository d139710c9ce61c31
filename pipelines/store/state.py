"""The scale policy's stabilisation state, one JSON document per pool (docs/jobs.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import CursorResult, Table, bindparam, select, update
from sqlalchemy.orm import Session

from pipelines.store.engine import Database
from pipelines.store.schema import PoolStateRow, as_utc
from pipelines.store.upsert import insert


@dataclass(frozen=True)
class StoredState:
    """A pool's stored state and its version (bumped by every write)."""

    state: dict[str, Any]
    version: int


class PoolStateRepository:
    """The stabilisation state of the scale policy, one JSON document per pool."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def get(self, pool: str) -> dict[str, Any] | None:
        """Return the stored state of a pool, or None if none was stored."""
        statement = select(PoolStateRow.state).where(PoolStateRow.pool == pool)
        with self._db.transaction("read pool state") as session:
            return session.execute(statement).scalar_one_or_none()

    def read(self, pools: Sequence[str]) -> dict[str, StoredState]:
        """Return the stored states of ``pools`` with their versions, in one read.

        Pools without a stored state are left out.
        """
        if not pools:
            return {}
        statement = select(PoolStateRow.pool, PoolStateRow.state, PoolStateRow.version).where(
            PoolStateRow.pool.in_(list(pools))
        )
        with self._db.transaction("read pool states") as session:
            return {
                str(pool): StoredState(dict(state), int(version))
                for pool, state, version in session.execute(statement).all()
            }

    def put(
        self, pool: str, state: Mapping[str, Any], *, updated_at: datetime | None = None
    ) -> None:
        """Replace the state of a pool whatever is stored (insert it the first time).

        For a writer that owns its key (the readiness probe); a decision, which builds
        on the stored state, uses :meth:`replace_if_unchanged`.

        Args:
            state: JSON-compatible data.
            updated_at: when it changed (tz-aware); default now.
        """
        at = as_utc(updated_at or datetime.now(UTC))
        statement = insert(self._db.dialect, PoolStateRow).values(
            pool=pool, updated_at=at, state=dict(state), version=1
        )
        statement = statement.on_conflict_do_update(
            index_elements=["pool"],
            set_={
                "updated_at": statement.excluded.updated_at,
                "state": statement.excluded.state,
                "version": PoolStateRow.version + 1,
            },
        )
        with self._db.transaction("write pool state") as session:
            session.execute(statement)

    def replace_if_unchanged(
        self,
        states: Mapping[str, Mapping[str, Any]],
        read: Mapping[str, StoredState],
        *,
        updated_at: datetime | None = None,
    ) -> set[str]:
        """Write each pool's new state if its stored one is still the one ``read``.

        A pool absent from ``read`` is written only if it still has no state. One
        transaction (one commit) when no pool changed since ``read``; otherwise that
        one is rolled back and the pools are written one by one (in a second
        transaction), so a pool written meanwhile by another replica does not hold
        back the others.

        Args:
            states: the new JSON-compatible state per pool name.
            read: what :meth:`read` returned before the new states were computed.
            updated_at: when they changed (tz-aware); default now.

        Returns:
            The pools not written because another writer changed them since ``read``:
            read them again and recompute.
        """
        if not states:
            return set()
        at = as_utc(updated_at or datetime.now(UTC))
        # In name order: two writers lock rows in the same order (PostgreSQL would
        # otherwise find them deadlocked).
        ordered = sorted(states.items())
        new = [
            {"pool": pool, "updated_at": at, "state": dict(state), "version": 1}
            for pool, state in ordered
            if pool not in read
        ]
        known = [
            {"p": pool, "seen": read[pool].version, "s": dict(state), "at": at}
            for pool, state in ordered
            if pool in read
        ]
        try:
            with self._db.transaction("write pool states") as session:
                written = self._insert(session, new) + self._replace(session, known)
                if written != len(states):
                    raise _StateChangedError
            return set()
        except _StateChangedError:
            pass
        with self._db.transaction("write pool states") as session:
            return {str(row["pool"]) for row in new if not self._insert(session, [row])} | {
                str(row["p"]) for row in known if not self._replace(session, [row])
            }

    def _insert(self, session: Session, rows: Sequence[Mapping[str, Any]]) -> int:
        """Insert the states of pools that have none; return how many were inserted."""
        if not rows:
            return 0
        statement = (
            insert(self._db.dialect, PoolStateRow)
            .values(list(rows))
            .on_conflict_do_nothing(index_elements=["pool"])
            .returning(_TABLE.c.pool)
        )
        # RETURNING, not rowcount: drivers do not all report an INSERT's row count.
        return len(session.execute(statement).all())

    @staticmethod
    def _replace(session: Session, rows: Sequence[Mapping[str, Any]]) -> int:
        """Replace the states still at their ``seen`` version; return how many were."""
        if not rows:
            return 0
        result = session.execute(_REPLACE, list(rows))
        return cast(CursorResult[Any], result).rowcount


class _StateChangedError(Exception):
    """Another writer changed a pool's state since it was read (rolls the batch back)."""


_TABLE = cast(Table, PoolStateRow.__table__)
# One statement for every pool of a batch (executemany): a total row count short of the
# batch means some pool changed (a driver that under-reports only costs the slow path).
_REPLACE = (
    update(_TABLE)
    .where(_TABLE.c.pool == bindparam("p"), _TABLE.c.version == bindparam("seen"))
    .values(state=bindparam("s"), updated_at=bindparam("at"), version=_TABLE.c.version + 1)
)
