"""Which process leads the scheduler and since when, for ``foresight jobs`` (docs/jobs.md)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from sqlalchemy import delete, select

from pipelines.store.engine import Database
from pipelines.store.schema import SchedulerLeaderRow, as_utc
from pipelines.store.upsert import upsert

_SLOT: Final = 1
MAX_HOLDER_CHARS: Final = 200


@dataclass(frozen=True)
class Leader:
    """The recorded leader.

    Attributes:
        holder: ``host:pid`` of the leading process (as ``job_runs.runner`` names it).
        since: when it took the lock.
    """

    holder: str
    since: datetime


class LeaderRepository:
    """Record and read the scheduler's leader."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def claim(self, holder: str, *, since: datetime | None = None) -> None:
        """Record ``holder`` as the leader from ``since`` (default now), replacing any other."""
        row = {
            "slot": _SLOT,
            "holder": holder[:MAX_HOLDER_CHARS],
            "since": as_utc(since or datetime.now(UTC)),
        }
        with self._db.transaction("record the scheduler leader") as session:
            upsert(
                session,
                self._db.dialect,
                SchedulerLeaderRow,
                [row],
                keys=("slot",),
                update=("holder", "since"),
            )

    def release(self, holder: str) -> None:
        """Delete the record if ``holder`` is still the one recorded."""
        statement = delete(SchedulerLeaderRow).where(
            SchedulerLeaderRow.holder == holder[:MAX_HOLDER_CHARS]
        )
        with self._db.transaction("clear the scheduler leader") as session:
            session.execute(statement)

    def current(self) -> Leader | None:
        """Return the recorded leader, None when no process has recorded itself."""
        statement = select(SchedulerLeaderRow).where(SchedulerLeaderRow.slot == _SLOT)
        with self._db.transaction("read the scheduler leader") as session:
            row = session.scalars(statement).one_or_none()
            return None if row is None else Leader(row.holder, row.since)
