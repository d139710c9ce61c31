"""The store's tables as typed SQLAlchemy ORM mappings (docs/jobs.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Dialect,
    Double,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

VERSION_TABLE: Final = "foresight_alembic_version"
"""Alembic's version table of the store (not ``alembic_version``, which MLflow uses)."""

SERIES_ID_LENGTH: Final = 200
POOL_LENGTH: Final = 100


def as_utc(value: datetime) -> datetime:
    """Return a timezone-aware datetime converted to UTC.

    Raises:
        ValueError: the datetime is naive; the store never guesses a timezone.
    """
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"timestamp {value!r} has no timezone; pass a UTC-aware datetime")
    return value.astimezone(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp that is UTC-aware in Python on every backend.

    PostgreSQL stores ``timestamptz``; SQLite has no timezone type, so the naive UTC
    wall time is stored and UTC is attached again on the way out.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Convert to UTC (naive UTC for SQLite) before writing."""
        if value is None:
            return None
        utc = as_utc(value)
        if type(utc) is not datetime:
            # A subclass (pandas Timestamp) may carry nanoseconds drivers do not expect.
            utc = datetime(
                utc.year,
                utc.month,
                utc.day,
                utc.hour,
                utc.minute,
                utc.second,
                utc.microsecond,
                tzinfo=UTC,
            )
        return utc.replace(tzinfo=None) if dialect.name == "sqlite" else utc

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Return UTC-aware datetimes whatever the backend's session timezone."""
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


# JSONB on PostgreSQL (indexable, compact); plain JSON text elsewhere.
JsonDocument = JSON().with_variant(JSONB(), "postgresql")
# SQLite only auto-increments a column declared exactly INTEGER PRIMARY KEY.
BigId = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    """Declarative base of the store's tables."""


class Sample(Base):
    """One observation of a series; ``(series_id, ts)`` is unique, so re-ingesting is a no-op."""

    __tablename__ = "samples"

    series_id: Mapped[str] = mapped_column(String(SERIES_ID_LENGTH), primary_key=True)
    ts: Mapped[datetime] = mapped_column(UTCDateTime(), primary_key=True)
    value: Mapped[float] = mapped_column(Double(), nullable=False)


class ForecastRow(Base):
    """One step of a stored forecast, keyed by series, generation time and step."""

    __tablename__ = "forecasts"
    __table_args__ = (Index("ix_forecasts_series_ds", "series_id", "ds"),)

    series_id: Mapped[str] = mapped_column(String(SERIES_ID_LENGTH), primary_key=True)
    generated_at: Mapped[datetime] = mapped_column(UTCDateTime(), primary_key=True)
    step: Mapped[int] = mapped_column(Integer(), primary_key=True)
    ds: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)
    model_version: Mapped[str] = mapped_column(String(100), nullable=False)
    model: Mapped[str | None] = mapped_column(String(100), nullable=True)
    mean: Mapped[float] = mapped_column(Double(), nullable=False)
    quantiles: Mapped[dict[str, Any]] = mapped_column(JsonDocument, nullable=False)


class PeakForecastRow(Base):
    """One lead of a stored peak forecast: quantiles of ``max(y[origin+1 .. ds])``.

    ``quantiles`` are served (calibrated and combined online), ``raw`` the model's own
    and ``scale`` the series' scale at the origin (NULL in rows from before 0007);
    ``return_level`` the level the served quantiles were held at after an idle spell
    (NULL where none was, and in rows from before 0008).
    """

    __tablename__ = "peak_forecasts"
    __table_args__ = (Index("ix_peak_forecasts_series_version", "series_id", "model_version"),)

    series_id: Mapped[str] = mapped_column(String(SERIES_ID_LENGTH), primary_key=True)
    generated_at: Mapped[datetime] = mapped_column(UTCDateTime(), primary_key=True)
    lead: Mapped[int] = mapped_column(Integer(), primary_key=True)
    origin: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)
    ds: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)
    model_version: Mapped[str] = mapped_column(String(100), nullable=False)
    last: Mapped[float] = mapped_column(Double(), nullable=False)
    quantiles: Mapped[dict[str, Any]] = mapped_column(JsonDocument, nullable=False)
    raw: Mapped[dict[str, Any] | None] = mapped_column(JsonDocument, nullable=True)
    scale: Mapped[float | None] = mapped_column(Double(), nullable=True)
    return_level: Mapped[float | None] = mapped_column(Double(), nullable=True)


class ForecastRunRow(Base):
    """One complete forecast run: its per-horizon and peak rows were committed with it.

    The forecast job writes a run's rows and this row in one transaction, and readers
    take only rows whose ``(model_version, generated_at)`` has a run row, so a reader
    never sees half a run. ``series`` and the row counts are what the run stored;
    ``observed_until`` the newest observation it was made from (NULL in runs recorded
    by the migration).
    """

    __tablename__ = "forecast_runs"

    model_version: Mapped[str] = mapped_column(String(100), primary_key=True)
    generated_at: Mapped[datetime] = mapped_column(UTCDateTime(), primary_key=True)
    series: Mapped[int] = mapped_column(Integer(), nullable=False)
    rows: Mapped[int] = mapped_column(Integer(), nullable=False)
    peak_rows: Mapped[int] = mapped_column(Integer(), nullable=False)
    observed_until: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class RecommendationRow(Base):
    """One published recommendation of a pool: the audit trail, append-only."""

    __tablename__ = "recommendations"
    __table_args__ = (Index("ix_recommendations_pool_generated", "pool", "generated_at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    pool: Mapped[str] = mapped_column(String(POOL_LENGTH), nullable=False)
    generated_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)
    desired_nodes: Mapped[int] = mapped_column(Integer(), nullable=False)
    action: Mapped[str] = mapped_column(String(50), nullable=False)
    payload: Mapped[dict[str, Any]] = mapped_column(JsonDocument, nullable=False)


class PoolStateRow(Base):
    """The scale policy's stabilisation state of a pool, one row per pool.

    ``version`` is bumped by every write: a writer that read version n replaces the
    state only while it is still n (compare-and-set), so replicas never lose each
    other's updates.
    """

    __tablename__ = "pool_state"

    pool: Mapped[str] = mapped_column(String(POOL_LENGTH), primary_key=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)
    state: Mapped[dict[str, Any]] = mapped_column(JsonDocument, nullable=False)
    version: Mapped[int] = mapped_column(BigInteger(), nullable=False, server_default="0")


class OutboxRow(Base):
    """A webhook delivery waiting, retrying or done; survives restarts and receiver outages."""

    __tablename__ = "webhook_outbox"
    __table_args__ = (
        UniqueConstraint("target_url", "idempotency_key", name="uq_webhook_outbox_target_key"),
        Index("ix_webhook_outbox_due", "delivered_at", "next_attempt_at"),
        Index("ix_webhook_outbox_status_due", "status", "next_attempt_at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    target_url: Mapped[str] = mapped_column(Text(), nullable=False)
    idempotency_key: Mapped[str] = mapped_column(String(200), nullable=False)
    body: Mapped[bytes] = mapped_column(LargeBinary(), nullable=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)
    attempts: Mapped[int] = mapped_column(Integer(), nullable=False, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text(), nullable=True)
    # pending (to send or retry), delivered (accepted), dead (rejected for good).
    status: Mapped[str] = mapped_column(
        String(20), nullable=False, default="pending", server_default="pending"
    )
    dead_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class JobRunRow(Base):
    """One run of a scheduled job: written ``running`` at start, final at the end.

    A row left ``running`` tells that its process died mid-run; the next leader marks
    it ``interrupted``.
    """

    __tablename__ = "job_runs"
    __table_args__ = (Index("ix_job_runs_job_started", "job", "started_at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    job: Mapped[str] = mapped_column(String(50), nullable=False)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    outcome: Mapped[str] = mapped_column(String(20), nullable=False)
    summary: Mapped[str] = mapped_column(Text(), nullable=False)
    problems: Mapped[dict[str, Any]] = mapped_column(JsonDocument, nullable=False)
    details: Mapped[dict[str, Any]] = mapped_column(JsonDocument, nullable=False)
    runner: Mapped[str] = mapped_column(String(200), nullable=False)


class SchedulerLeaderRow(Base):
    """The process that leads the scheduler and since when (a single row, ``slot`` 1).

    Written by each new leader when it takes the lock, deleted when it steps down
    cleanly; a leader killed outright leaves its row until the next one replaces it.
    """

    __tablename__ = "scheduler_leader"

    slot: Mapped[int] = mapped_column(Integer(), primary_key=True, autoincrement=False)
    holder: Mapped[str] = mapped_column(String(200), nullable=False)
    since: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)
