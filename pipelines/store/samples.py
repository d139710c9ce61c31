"""Stored observations of every series: idempotent writes, incremental reads (docs/jobs.md)."""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final, TypedDict

import numpy as np
import pandas as pd
from sqlalchemy import Select, func, select, text, type_coerce
from sqlalchemy.types import NullType

from forecaster.exceptions import DataValidationError
from forecaster.loaders import DEMAND
from forecaster.types import DS, SERIES_COLUMNS, UID, SeriesId, Y
from pipelines.config.signals import ALLOCATED_GPUS, QUEUE_GPUS
from pipelines.store.engine import Database
from pipelines.store.schema import Sample, as_utc
from pipelines.store.upsert import upsert

DEMAND_LOCK_CLASS: Final = 0x466F_7265
"""First key of the two-key advisory locks that serialise a pool's sample writers ("Fore").

The two-key form has a key space of its own, apart from the one-key locks of the
migrations and the scheduler leader.
"""


_LOCK_POOL: Final = text("SELECT pg_advisory_xact_lock(:c, :k)")

_PARTS: Final = (ALLOCATED_GPUS, QUEUE_GPUS)
"""The signals demand is derived from (``allocated + queued``)."""


class SampleRow(TypedDict):
    """One row to write."""

    series_id: str
    ts: datetime
    """UTC-aware."""
    value: float


class SampleRepository:
    """Samples keyed by ``(series_id, ts)``; writing a window twice stores it once."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def upsert(self, frame: pd.DataFrame) -> int:
        """Write a long frame ``unique_id, ds, y``; existing timestamps get the new value.

        The whole frame is written in one transaction. Within the frame, a repeated
        ``(unique_id, ds)`` keeps its last value.

        Args:
            frame: long frame with tz-aware ``ds`` and finite ``y`` (validate it first).

        Returns:
            The number of distinct ``(unique_id, ds)`` rows written (inserted or
            updated); re-writing an unchanged window still counts its rows.

        Raises:
            DataValidationError: a column is missing, ``ds`` is naive or ``y`` is
                not finite; the message names the series.
            StoreError: the database failed; nothing was written.
        """
        rows = _sample_rows(frame)
        if not rows:
            return 0
        with self._db.transaction("write samples") as session:
            upsert(
                session, self._db.dialect, Sample, rows, keys=("series_id", "ts"), update=("value",)
            )
        return len(rows)

    def upsert_with_demand(self, frame: pd.DataFrame) -> int:
        """Write samples and ``<pool>/demand_gpus`` = allocated + queued where a part moved.

        Demand is derived only at the (pool, time) pairs where ``frame`` has an
        ``allocated_gpus`` or ``queue_gpus`` sample, from the stored value of the other
        part: one read of the parts (every pool at once, between the oldest and newest
        written time) and one write, so a sample at an old time rewrites the one demand
        row it changes, never every later row.

        All of it is one transaction, and writers of the same pool take turns
        (PostgreSQL: a transaction advisory lock per pool of the frame, taken in a fixed
        order; SQLite: its single writer, held from the first write), so the partner
        read is the latest one committed: two writers pushing the two parts of one time
        at once leave demand equal to the sum of both stored values, never a sum with a
        stale partner. Taking turns per pool also keeps two writers of the same rows
        from locking them in opposite orders (a deadlock on PostgreSQL).

        Args:
            frame: long frame with tz-aware ``ds`` and finite ``y`` (validate it first).

        Returns:
            The rows written, derived demand included.

        Raises:
            DataValidationError: as :meth:`upsert`.
            StoreError: the database failed; nothing was written.
        """
        return self.write_with_demand(_sample_rows(frame))

    def write_with_demand(self, rows: Sequence[SampleRow]) -> int:
        """As :meth:`upsert_with_demand`, for rows already checked (see :func:`sample_rows`).

        The push path: a push holds a few hundred samples, so it stays in plain Python
        from the request to the database (no frame is built), and its CPU is spent
        while the event loop waits for the GIL.

        Args:
            rows: ``{series_id, ts, value}`` with UTC-aware ``ts``, finite ``value``
                and no ``(series_id, ts)`` twice.

        Returns:
            The rows written, derived demand included.

        Raises:
            StoreError: the database failed; nothing was written.
        """
        if not rows:
            return 0
        owners = [SeriesId.of(row["series_id"]) for row in rows]
        pushed = [
            (sid.pool, row["ts"])
            for sid, row in zip(owners, rows, strict=True)
            if sid.signal in _PARTS
        ]
        derived = 0
        with self._db.transaction("write samples") as session:
            keys = sorted({_pool_key(sid.pool) for sid in owners})
            if self._db.dialect == "postgresql" and keys:
                # One round trip: psycopg pipelines the executemany, in this order.
                session.execute(_LOCK_POOL, [{"c": DEMAND_LOCK_CLASS, "k": key} for key in keys])
            # On SQLite this first write takes the database's write lock, so the read
            # below sees every part committed before it.
            upsert(
                session, self._db.dialect, Sample, rows, keys=("series_id", "ts"), update=("value",)
            )
            if pushed:
                stored = session.execute(_read_statement(*_parts_window(pushed))).all()
                demand = _demand_rows(stored, set(pushed))
                if demand:
                    upsert(
                        session,
                        self._db.dialect,
                        Sample,
                        demand,
                        keys=("series_id", "ts"),
                        update=("value",),
                    )
                derived = len(demand)
        return len(rows) + derived

    def last_timestamp(self, series_id: str) -> pd.Timestamp | None:
        """Return the newest stored timestamp of a series, or None if it has none."""
        statement = select(func.max(Sample.ts)).where(Sample.series_id == series_id)
        with self._db.transaction("read the last sample") as session:
            value = session.execute(statement).scalar_one_or_none()
        return None if value is None else _timestamp(value)

    def last_timestamps(self, series_ids: Sequence[str] | None = None) -> dict[str, pd.Timestamp]:
        """Return the newest stored timestamp per series (series without samples omitted)."""
        statement = select(Sample.series_id, func.max(Sample.ts)).group_by(Sample.series_id)
        if series_ids is not None:
            statement = statement.where(Sample.series_id.in_(list(series_ids)))
        with self._db.transaction("read the last samples") as session:
            result = session.execute(statement).all()
        return {series_id: _timestamp(ts) for series_id, ts in result if ts is not None}

    def latest(self, series_ids: Sequence[str], start: datetime | None = None) -> pd.DataFrame:
        """Read the newest sample of each series (at or after ``start``, if given).

        One row per series, as :meth:`read` shapes them; series without such a sample
        are omitted. The live readings poll this every few seconds, so the database
        picks the rows instead of every sample of the window crossing into Python.
        """
        newest = select(Sample.series_id, func.max(Sample.ts).label("ts")).where(
            Sample.series_id.in_(list(series_ids))
        )
        if start is not None:
            newest = newest.where(Sample.ts >= as_utc(start))
        picked = newest.group_by(Sample.series_id).subquery()
        statement = (
            select(Sample.series_id, Sample.ts, Sample.value)
            .join(picked, (Sample.series_id == picked.c.series_id) & (Sample.ts == picked.c.ts))
            .order_by(Sample.series_id)
        )
        with self._db.transaction("read the latest samples") as session:
            result = session.execute(statement).all()
        return _frame(result)

    def read(
        self,
        series_ids: Sequence[str] | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
    ) -> pd.DataFrame:
        """Read samples as a long frame ``unique_id, ds, y`` sorted by series and time.

        Args:
            series_ids: the series to read; None reads every series.
            start: first timestamp included (tz-aware); None means from the beginning.
            end: first timestamp excluded (tz-aware); None means up to the newest.

        Returns:
            ``unique_id`` (str), ``ds`` (``datetime64[ns, UTC]``), ``y`` (float64);
            empty with those columns when nothing matches.
        """
        # The rows come back as the driver gives them (timestamps as text on SQLite,
        # aware datetimes on PostgreSQL) and are parsed column by column: converting
        # each row through the ORM and the column type took most of a fleet's read.
        statement = _read_statement(series_ids, start, end, raw_ts=True)
        with self._db.transaction("read samples") as session:
            result = session.connection().execute(statement)
            try:
                rows = pd.DataFrame.from_records(
                    result.cursor.fetchall(), columns=[UID, DS, Y], coerce_float=False
                )
            finally:
                result.close()
        if rows.empty:
            return _frame([])
        return pd.DataFrame(
            {
                UID: rows[UID].astype(object),
                DS: pd.to_datetime(rows[DS], utc=True, format="ISO8601").dt.as_unit("ns"),
                Y: rows[Y].to_numpy(dtype=np.float64),
            }
        )


def _read_statement(
    series_ids: Sequence[str] | None,
    start: datetime | None,
    end: datetime | None,
    *,
    raw_ts: bool = False,
) -> Select[str, datetime | None, float]:
    ts = type_coerce(Sample.ts, NullType()).label("ts") if raw_ts else Sample.ts
    statement = select(Sample.series_id, ts, Sample.value).order_by(Sample.series_id, Sample.ts)
    if series_ids is not None:
        statement = statement.where(Sample.series_id.in_(list(series_ids)))
    if start is not None:
        statement = statement.where(Sample.ts >= as_utc(start))
    if end is not None:
        statement = statement.where(Sample.ts < as_utc(end))
    return statement


def _pool_key(pool: str) -> int:
    """The pool's advisory lock key: a stable signed 32-bit hash of its name."""
    unsigned = zlib.crc32(pool.encode())
    return unsigned - (1 << 32) if unsigned >= 1 << 31 else unsigned


def _parts_window(pushed: Sequence[tuple[str, datetime]]) -> tuple[list[str], datetime, datetime]:
    """Both parts of every pool in ``pushed``, between its oldest and newest time."""
    pools = sorted({pool for pool, _ in pushed})
    ids = [str(SeriesId(pool, signal)) for pool in pools for signal in _PARTS]
    times = [ts for _, ts in pushed]
    # ``end`` is exclusive: one microsecond past the newest pushed time includes it.
    return ids, min(times), max(times) + timedelta(microseconds=1)


def _demand_rows(stored: Sequence[Any], wanted: set[tuple[str, datetime]]) -> list[SampleRow]:
    """Demand rows from the stored parts at the ``(pool, time)`` pairs ``wanted``."""
    parts: dict[str, dict[tuple[str, datetime], float]] = {part: {} for part in _PARTS}
    for series_id, ts, value in stored:
        pool, signal = SeriesId.of(str(series_id))
        if signal in parts and (pool, ts) in wanted:
            parts[signal][(pool, ts)] = float(value)  # a repeated time keeps its last row
    queued = parts[QUEUE_GPUS]
    rows: list[SampleRow] = []
    for (pool, ts), allocated in parts[ALLOCATED_GPUS].items():
        total = allocated + queued.get((pool, ts), math.nan)
        if math.isfinite(total):
            rows.append({"series_id": str(SeriesId(pool, DEMAND)), "ts": ts, "value": total})
    return rows


def sample_rows(items: Iterable[tuple[str, datetime, float]]) -> list[SampleRow]:
    """Rows to write from ``(series_id, time, value)`` items, as :meth:`~SampleRepository.upsert`
    would make them from a frame: UTC times, float values, a repeated ``(series_id, ts)``
    keeping its last value.

    Raises:
        DataValidationError: a time has no timezone or a value is not finite; the
            message names the series.
    """
    kept: dict[tuple[str, datetime], float] = {}
    for series_id, ts, value in items:
        if ts.tzinfo is None or ts.utcoffset() is None:
            raise DataValidationError(
                f"cannot store samples: {series_id} has a time without a timezone ({ts}); "
                "send UTC times"
            )
        number = float(value)
        if not math.isfinite(number):
            raise DataValidationError(
                f"cannot store samples: {series_id} has the value {number}, which is not "
                "finite; clean it with validate_series first"
            )
        key = (series_id, ts.astimezone(UTC))
        kept.pop(key, None)  # the last value, in the order of its last write
        kept[key] = number
    return [{"series_id": sid, "ts": ts, "value": y} for (sid, ts), y in kept.items()]


def _frame(result: Sequence[Any]) -> pd.DataFrame:
    """The long frame ``unique_id, ds, y`` of ``(series_id, ts, value)`` rows."""
    ids = [row[0] for row in result]
    stamps = pd.to_datetime([row[1] for row in result], utc=True).as_unit("ns")
    values = np.fromiter((row[2] for row in result), dtype=np.float64, count=len(result))
    return pd.DataFrame({UID: pd.Series(ids, dtype=object), DS: stamps, Y: values})


def _timestamp(value: datetime | str) -> pd.Timestamp:
    stamp = pd.Timestamp(value)
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


def _sample_rows(frame: pd.DataFrame) -> list[SampleRow]:
    missing = [column for column in SERIES_COLUMNS if column not in frame.columns]
    if missing:
        raise DataValidationError(
            f"cannot store samples: columns {missing} are missing; pass a long frame "
            f"with columns {list(SERIES_COLUMNS)}"
        )
    if frame.empty:
        return []
    if not isinstance(frame[DS].dtype, pd.DatetimeTZDtype):
        raise DataValidationError(
            f"cannot store samples: ds has dtype {frame[DS].dtype}, not a tz-aware "
            "timestamp; convert it with pd.to_datetime(..., utc=True)"
        )
    values = pd.to_numeric(frame[Y], errors="coerce").astype(np.float64)
    bad = ~np.isfinite(values.to_numpy())
    if bad.any():
        series = sorted(frame.loc[bad, UID].astype(str).unique())
        raise DataValidationError(
            f"cannot store samples: series {series} have {int(bad.sum())} missing, "
            "non-numeric or infinite values; clean them with validate_series first"
        )
    clean = pd.DataFrame(
        {UID: frame[UID].astype(str), DS: frame[DS].dt.tz_convert("UTC"), Y: values}
    ).drop_duplicates(subset=[UID, DS], keep="last")
    # numpy's microsecond datetimes convert to Python datetimes in C; far faster than
    # Timestamp.to_pydatetime row by row on long backfills.
    naive = clean[DS].dt.tz_localize(None).to_numpy(dtype="datetime64[us]").tolist()
    return [
        {"series_id": uid, "ts": ts.replace(tzinfo=UTC), "value": y}
        for uid, ts, y in zip(clean[UID].tolist(), naive, clean[Y].tolist(), strict=True)
    ]
