"""The audit trail of the recommendations published per pool."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import select

from pipelines.store.engine import Database
from pipelines.store.schema import RecommendationRow, as_utc


@dataclass(frozen=True)
class Recommendation:
    """One stored recommendation of a pool."""

    id: int
    pool: str
    generated_at: datetime
    desired_nodes: int
    action: str
    payload: dict[str, Any]


class DesiredNodes(NamedTuple):
    """When a recommendation was made and the nodes it asked for (no payload)."""

    generated_at: datetime
    desired_nodes: int


class RecommendationRepository:
    """Append-only history of the recommendations published per pool."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def append(
        self,
        pool: str,
        generated_at: datetime,
        desired_nodes: int,
        action: str,
        payload: Mapping[str, Any],
    ) -> int:
        """Record a recommendation and return its id.

        Args:
            generated_at: when it was computed (tz-aware).
            action: what it asks for (e.g. ``"scale_up"``), as the policy names it.
            payload: the full recommendation as JSON-compatible data (explanation,
                inputs, model version), kept verbatim for audit.

        Raises:
            StoreError: the database failed; nothing was recorded.
        """
        row = RecommendationRow(
            pool=pool,
            generated_at=as_utc(generated_at),
            desired_nodes=int(desired_nodes),
            action=action,
            payload=dict(payload),
        )
        with self._db.transaction("record a recommendation") as session:
            session.add(row)
            session.flush()
            return row.id

    def latest(self, pool: str) -> Recommendation | None:
        """Return the newest recommendation of a pool, or None if it has none."""
        found = self.history(pool, limit=1)
        return found[0] if found else None

    def history(
        self, pool: str | None = None, *, since: datetime | None = None, limit: int = 100
    ) -> list[Recommendation]:
        """Return recommendations newest first.

        Args:
            pool: one pool's, or every pool's when None.
            since: only those generated at or after this time (tz-aware).
        """
        statement = (
            select(RecommendationRow)
            .order_by(RecommendationRow.generated_at.desc(), RecommendationRow.id.desc())
            .limit(limit)
        )
        if pool is not None:
            statement = statement.where(RecommendationRow.pool == pool)
        if since is not None:
            statement = statement.where(RecommendationRow.generated_at >= as_utc(since))
        with self._db.transaction("read recommendations") as session:
            return [_recommendation(row) for row in session.scalars(statement)]

    def desired_in_force(self, pool: str, start: datetime, end: datetime) -> list[DesiredNodes]:
        """Return the nodes asked for over ``[start, end)``, oldest first.

        The one in force at ``start`` (the newest made before it) comes first, then
        every one made in ``[start, end)``; payloads are not read, so a week of them
        stays cheap.

        Args:
            start: first instant (tz-aware).
            end: end, exclusive (tz-aware).

        Raises:
            StoreError: the database failed.
        """
        columns = (RecommendationRow.generated_at, RecommendationRow.desired_nodes)
        of_pool = RecommendationRow.pool == pool
        before = (
            select(*columns)
            .where(of_pool, RecommendationRow.generated_at < as_utc(start))
            .order_by(RecommendationRow.generated_at.desc(), RecommendationRow.id.desc())
            .limit(1)
        )
        during = (
            select(*columns)
            .where(
                of_pool,
                RecommendationRow.generated_at >= as_utc(start),
                RecommendationRow.generated_at < as_utc(end),
            )
            .order_by(RecommendationRow.generated_at, RecommendationRow.id)
        )
        with self._db.transaction("read the recommendations in force") as session:
            rows = [*session.execute(before).all(), *session.execute(during).all()]
        return [DesiredNodes(as_utc(at), int(nodes)) for at, nodes in rows]


def _recommendation(row: RecommendationRow) -> Recommendation:
    return Recommendation(
        id=row.id,
        pool=row.pool,
        generated_at=row.generated_at,
        desired_nodes=row.desired_nodes,
        action=row.action,
        payload=row.payload,
    )
