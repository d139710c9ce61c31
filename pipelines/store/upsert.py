"""``INSERT ... ON CONFLICT`` for both supported backends (docs/jobs.md)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final, cast

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from pipelines.store.engine import Dialect
from pipelines.store.schema import Base

CHUNK_ROWS: Final = 5_000
"""Rows per execute: bounds the memory of one round trip on long backfills."""


def upsert(
    session: Session,
    dialect: Dialect,
    entity: type[Base],
    rows: Sequence[Mapping[str, Any]],
    *,
    keys: Sequence[str],
    update: Sequence[str],
) -> None:
    """Insert ``rows``; where ``keys`` already exist, overwrite ``update`` columns.

    A row whose values are unchanged is not rewritten (PostgreSQL would otherwise
    create a dead tuple per re-ingested sample). ``rows`` must not repeat a key: the
    database refuses to update one row twice in a statement.
    """
    table = cast(Table, entity.__table__)
    statement = insert(dialect, entity)
    excluded = statement.excluded
    if update:
        changed = [table.c[name].is_distinct_from(excluded[name]) for name in update]
        condition = changed[0]
        for extra in changed[1:]:
            condition = condition | extra
        statement = statement.on_conflict_do_update(
            index_elements=list(keys),
            set_={name: excluded[name] for name in update},
            where=condition,
        )
    else:
        statement = statement.on_conflict_do_nothing(index_elements=list(keys))
    # A plain executemany: measured faster on PostgreSQL (psycopg pipelines it) than
    # SQLAlchemy's multi-row VALUES batching, and as fast on SQLite.
    for chunk in _chunks(rows, CHUNK_ROWS):
        session.execute(statement, chunk)


def insert(dialect: Dialect, entity: type[Base]) -> postgresql.Insert | sqlite.Insert:
    """Return the dialect's ``INSERT`` of ``entity``, which offers ``ON CONFLICT``."""
    table = cast(Table, entity.__table__)
    return postgresql.insert(table) if dialect == "postgresql" else sqlite.insert(table)


def _chunks(rows: Sequence[Mapping[str, Any]], size: int) -> Iterator[Sequence[Mapping[str, Any]]]:
    for start in range(0, len(rows), size):
        yield rows[start : start + size]
