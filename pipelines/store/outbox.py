"""The persistent webhook outbox: nothing is lost while a receiver is down (docs/jobs.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final, Literal, cast

from sqlalchemy import case, func, select, update

from pipelines.store.engine import Database
from pipelines.store.schema import OutboxRow, as_utc
from pipelines.store.upsert import upsert

MAX_ERROR_CHARS: Final = 2_000

Status = Literal["pending", "delivered", "dead"]
"""An item's state: to send (or retry), accepted, or rejected for good."""

PENDING: Final = "pending"
DELIVERED: Final = "delivered"
DEAD: Final = "dead"


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff between delivery attempts.

    The n-th failed attempt (n >= 1) waits ``base * factor ** (n - 1)``, capped at
    ``cap``; retries never stop, because a recommendation set must reach a receiver
    that comes back.
    """

    base: timedelta = timedelta(seconds=10)
    factor: float = 2.0
    cap: timedelta = timedelta(hours=1)

    def delay(self, attempts: int) -> timedelta:
        """Return the wait after ``attempts`` failed attempts."""
        exponent = max(attempts, 1) - 1
        cap = self.cap.total_seconds()
        # Cap the exponent and compare in float seconds: a long outage must not overflow.
        seconds = self.base.total_seconds() * self.factor ** min(exponent, 64)
        return timedelta(seconds=min(seconds, cap))


DEFAULT_BACKOFF: Final = Backoff()
DEFAULT_LEASE: Final = timedelta(minutes=2)


@dataclass(frozen=True)
class OutboxItem:
    """A webhook delivery as stored."""

    id: int
    target_url: str
    idempotency_key: str
    body: bytes
    created_at: datetime
    attempts: int
    next_attempt_at: datetime
    delivered_at: datetime | None
    last_error: str | None
    status: Status = "pending"
    dead_at: datetime | None = None


@dataclass(frozen=True)
class RetryOutcome:
    """What :meth:`OutboxRepository.retry` did.

    Attributes:
        retried: the dead letters made pending again, due at once.
        refused: per id, why it was left dead (not a dead letter; a newer set was
            delivered to that URL since, so resending would deliver an outdated one).
    """

    retried: tuple[int, ...]
    refused: dict[int, str]


class OutboxRepository:
    """Enqueue, claim and settle webhook deliveries."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def enqueue(
        self,
        target_url: str,
        body: bytes,
        idempotency_key: str,
        *,
        now: datetime | None = None,
    ) -> int:
        """Queue a delivery, due at once, and return its id.

        Enqueueing the same ``(target_url, idempotency_key)`` again is a no-op that
        returns the existing id, so a retried publish job does not send twice.

        Args:
            body: the exact bytes to POST (the HMAC signature is over these bytes).
            idempotency_key: the key the receiver uses to drop repeats.
            now: the current time (tz-aware); default the clock.
        """
        created = as_utc(now or datetime.now(UTC))
        row = {
            "target_url": target_url,
            "idempotency_key": idempotency_key,
            "body": bytes(body),
            "created_at": created,
            "attempts": 0,
            "next_attempt_at": created,
            "status": PENDING,
        }
        lookup = select(OutboxRow.id).where(
            OutboxRow.target_url == target_url, OutboxRow.idempotency_key == idempotency_key
        )
        with self._db.transaction("enqueue a webhook") as session:
            upsert(
                session,
                self._db.dialect,
                OutboxRow,
                [row],
                keys=("target_url", "idempotency_key"),
                update=(),
            )
            return session.execute(lookup).scalar_one()

    def claim_due(
        self,
        *,
        now: datetime | None = None,
        limit: int = 10,
        lease: timedelta = DEFAULT_LEASE,
    ) -> list[OutboxItem]:
        """Claim up to ``limit`` undelivered items that are due, oldest due first.

        Each claimed item counts one more attempt and is hidden from other claims
        until ``now + lease``; settle it with :meth:`mark_delivered` or
        :meth:`mark_failed` before then, or it becomes due again (the sender died).

        Args:
            now: the current time (tz-aware); default the clock.
            lease: how long the claim hides the items.
        """
        current = as_utc(now or datetime.now(UTC))
        due = (OutboxRow.status == PENDING, OutboxRow.next_attempt_at <= current)
        pick = (
            select(OutboxRow.id)
            .where(*due)
            .order_by(OutboxRow.next_attempt_at, OutboxRow.id)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        with self._db.transaction("claim webhooks") as session:
            ids = list(session.scalars(pick))
            if not ids:
                return []
            claim = (
                update(OutboxRow)
                .where(OutboxRow.id.in_(ids), *due)
                .values(attempts=OutboxRow.attempts + 1, next_attempt_at=current + lease)
                .returning(OutboxRow)
                .execution_options(synchronize_session=False)
            )
            claimed = {row.id: _item(row) for row in session.scalars(claim)}
        return [claimed[item_id] for item_id in ids if item_id in claimed]

    def mark_delivered(self, item_id: int, *, now: datetime | None = None) -> None:
        """Record that the receiver accepted the item; it is never sent again."""
        statement = (
            update(OutboxRow)
            .where(OutboxRow.id == item_id)
            .values(
                status=DELIVERED, delivered_at=as_utc(now or datetime.now(UTC)), last_error=None
            )
            .execution_options(synchronize_session=False)
        )
        with self._db.transaction("mark a webhook delivered") as session:
            session.execute(statement)

    def mark_failed(
        self,
        item_id: int,
        error: str,
        *,
        now: datetime | None = None,
        backoff: Backoff = DEFAULT_BACKOFF,
    ) -> datetime | None:
        """Record a failed attempt and schedule the next one after the backoff.

        Args:
            error: what went wrong (status code, exception), kept for operators.
            now: the current time (tz-aware); default the clock.

        Returns:
            When the item is due again, or None if it does not exist or was delivered.
        """
        current = as_utc(now or datetime.now(UTC))
        with self._db.transaction("mark a webhook failed") as session:
            row = session.execute(
                select(OutboxRow).where(OutboxRow.id == item_id).with_for_update()
            ).scalar_one_or_none()
            if row is None or row.status != PENDING:
                return None
            row.next_attempt_at = current + backoff.delay(row.attempts)
            row.last_error = error[:MAX_ERROR_CHARS]
            return row.next_attempt_at

    def latest(self, target_url: str) -> OutboxItem | None:
        """Return the newest item queued for ``target_url`` (settled or not), or None.

        The publish job compares the new set with it (did the set change?) and chains
        the next idempotency key to its key.
        """
        statement = (
            select(OutboxRow)
            .where(OutboxRow.target_url == target_url)
            .order_by(OutboxRow.id.desc())
            .limit(1)
        )
        with self._db.transaction("read the latest webhook") as session:
            row = session.scalars(statement).first()
            return None if row is None else _item(row)

    def blocker(self, item: OutboxItem) -> OutboxItem | None:
        """Return the oldest unsettled item queued for the same target before ``item``.

        Each delivery is a whole recommendation set, so a receiver must get them in
        order: a sender holds ``item`` back while this returns an item.
        """
        statement = (
            select(OutboxRow)
            .where(
                OutboxRow.target_url == item.target_url,
                OutboxRow.status == PENDING,
                OutboxRow.id < item.id,
            )
            .order_by(OutboxRow.id)
            .limit(1)
        )
        with self._db.transaction("find an earlier webhook") as session:
            row = session.scalars(statement).first()
            return None if row is None else _item(row)

    def release(self, item_id: int, *, due_at: datetime) -> None:
        """Give a claim back unsent: due again at ``due_at``, the claim's attempt undone."""
        statement = (
            update(OutboxRow)
            .where(OutboxRow.id == item_id, OutboxRow.status == PENDING)
            .values(
                attempts=case((OutboxRow.attempts > 0, OutboxRow.attempts - 1), else_=0),
                next_attempt_at=as_utc(due_at),
            )
            .execution_options(synchronize_session=False)
        )
        with self._db.transaction("release a webhook") as session:
            session.execute(statement)

    def give_up(self, item_id: int, error: str, *, now: datetime | None = None) -> None:
        """Settle an item the receiver rejected for good: status ``dead``, not sent again.

        A dead letter neither retries nor holds back later items; it keeps
        ``last_error`` and ``dead_at`` until :meth:`retry` makes it pending again.
        """
        statement = (
            update(OutboxRow)
            .where(OutboxRow.id == item_id, OutboxRow.status == PENDING)
            .values(
                status=DEAD,
                dead_at=as_utc(now or datetime.now(UTC)),
                last_error=(error or "rejected")[:MAX_ERROR_CHARS],
            )
            .execution_options(synchronize_session=False)
        )
        with self._db.transaction("give up a webhook") as session:
            session.execute(statement)

    def dead_letters(self, *, limit: int = 100) -> list[OutboxItem]:
        """Return the dead letters (:meth:`give_up`), newest first."""
        statement = (
            select(OutboxRow)
            .where(OutboxRow.status == DEAD)
            .order_by(OutboxRow.id.desc())
            .limit(limit)
        )
        with self._db.transaction("read dead webhooks") as session:
            return [_item(row) for row in session.scalars(statement)]

    def counts(self) -> dict[Status, int]:
        """Return how many items are in each status (every status present, zeros included)."""
        statement = select(OutboxRow.status, func.count()).group_by(OutboxRow.status)
        found: dict[Status, int] = {PENDING: 0, DELIVERED: 0, DEAD: 0}
        with self._db.transaction("count webhooks by status") as session:
            for status, count in session.execute(statement):
                if status in found:
                    found[status] = int(count)
        return found

    def retry(
        self,
        item_ids: Sequence[int] | None = None,
        *,
        now: datetime | None = None,
        allow_outdated: bool = False,
    ) -> RetryOutcome:
        """Make dead letters pending again, due at once, with a fresh attempt count.

        Each item is a whole recommendation set, so a dead letter is refused when a
        newer set for the same URL has been delivered since (resending it would leave
        the receiver on an outdated set), unless ``allow_outdated``.

        Args:
            item_ids: the dead letters to retry; None: every dead letter.
            now: when they become due (tz-aware); default the clock.
            allow_outdated: retry even when a newer set was delivered since.
        """
        current = as_utc(now or datetime.now(UTC))
        retried: list[int] = []
        refused: dict[int, str] = {}
        with self._db.transaction("retry dead webhooks") as session:
            query = select(OutboxRow).where(OutboxRow.status == DEAD)
            if item_ids is not None:
                query = select(OutboxRow).where(OutboxRow.id.in_(list(item_ids)))
            rows = {row.id: row for row in session.scalars(query.with_for_update())}
            for item_id in item_ids if item_ids is not None else sorted(rows):
                row = rows.get(item_id)
                if row is None or row.status != DEAD:
                    state = "does not exist" if row is None else f"is {row.status}"
                    refused[item_id] = f"webhook #{item_id} {state}, not a dead letter"
                    continue
                newer = session.execute(
                    select(OutboxRow.id)
                    .where(
                        OutboxRow.target_url == row.target_url,
                        OutboxRow.status == DELIVERED,
                        OutboxRow.id > row.id,
                    )
                    .limit(1)
                ).scalar_one_or_none()
                if newer is not None and not allow_outdated:
                    refused[item_id] = (
                        f"webhook #{item_id}: a newer set (#{newer}) was delivered to "
                        f"{row.target_url} since; resending would deliver an outdated set "
                        "(allow it explicitly to send anyway)"
                    )
                    continue
                row.status = PENDING
                row.attempts = 0
                row.next_attempt_at = current
                row.dead_at = None
                retried.append(item_id)
        return RetryOutcome(tuple(retried), refused)


def _item(row: OutboxRow) -> OutboxItem:
    return OutboxItem(
        id=row.id,
        target_url=row.target_url,
        idempotency_key=row.idempotency_key,
        body=bytes(row.body),
        created_at=row.created_at,
        attempts=row.attempts,
        next_attempt_at=row.next_attempt_at,
        delivered_at=row.delivered_at,
        last_error=row.last_error,
        status=cast(Status, row.status),
        dead_at=row.dead_at,
    )
