"""What every job shares: the clock, the store it owns or borrows, and its report (docs/jobs.md)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from pipelines.config.settings import Settings
from pipelines.jobs.report import JobReport, Outcome
from pipelines.store.store import Store, open_store

logger = logging.getLogger(__name__)


def utc_now(now: datetime | None = None) -> datetime:
    """Return ``now`` as an aware UTC datetime, or the wall clock when it is None.

    Raises:
        ValueError: ``now`` is naive (a job's clock must say which time zone it is in).
    """
    if now is None:
        return datetime.now(UTC)
    if now.tzinfo is None:
        raise ValueError(f"now={now!r} is naive; pass an aware datetime, e.g. tzinfo=UTC")
    return now.astimezone(UTC)


def no_progress(stage: str, done: int, total: int) -> None:
    """A progress callback that ignores every update."""


@contextmanager
def borrowed_store(settings: Settings, store: Store | None) -> Iterator[Store]:
    """Yield ``store`` unchanged, or open the settings' store and close it afterwards.

    Raises:
        StoreError: the store cannot be opened; the message names its URL without
            the password.
    """
    if store is not None:
        yield store
        return
    with open_store(settings.store_url) as opened:
        yield opened


def finish(
    job: str,
    started_at: datetime,
    outcome: Outcome,
    summary: str,
    *,
    problems: Mapping[str, str] | None = None,
    details: Mapping[str, Any] | None = None,
) -> JobReport:
    """Build the job's report, stamped with the wall-clock end, and log its summary."""
    report = JobReport(
        job=job,
        outcome=outcome,
        summary=summary,
        started_at=started_at,
        finished_at=datetime.now(UTC),
        problems=dict(problems or {}),
        details=dict(details or {}),
    )
    level = logging.WARNING if outcome in ("failed", "partial") else logging.INFO
    logger.log(level, "job %s %s: %s", job, outcome, summary)
    return report


def outcome_of(problems: Mapping[str, str], done: int) -> Outcome:
    """``ok`` without problems, ``partial`` with some, ``failed`` when nothing was done."""
    if not problems:
        return "ok"
    return "partial" if done else "failed"
