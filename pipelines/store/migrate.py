"""Run the store's Alembic migrations from code (docs/jobs.md)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Final

from alembic import command
from alembic.config import Config
from alembic.util import CommandError
from sqlalchemy import func, select

from pipelines.errors import StoreError
from pipelines.store.engine import Database

MIGRATIONS_DIR: Final = Path(__file__).resolve().parent / "migrations"
MIGRATION_LOCK_KEY: Final = 0x466F_7265_0001
"""PostgreSQL advisory lock key held while migrating ("Fore" + 1), so that replicas
starting together upgrade one after the other instead of racing on ``CREATE TABLE``."""
_ALEMBIC: Final = threading.Lock()
"""Held while Alembic runs: it installs ``alembic.context`` and ``alembic.op`` as module
globals for the length of a command and removes them after, so two threads migrating
at once (jobs of one scheduler each opening the store) pull them from under each other
(``KeyError: 'config'``)."""


def alembic_config() -> Config:
    """Return an Alembic config pointing at the store's migration scripts."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("path_separator", "os")
    return config


def upgrade(database: Database, revision: str = "head") -> None:
    """Migrate the database to ``revision`` (default the newest) in one transaction.

    Running it again is a no-op. Threads of one process migrate one after the other;
    on PostgreSQL an advisory lock also serialises replicas that start at the same time.

    Raises:
        StoreError: the database is unreachable, or its schema is at a revision this
            code does not know (a newer Foresight migrated it).
    """
    config = alembic_config()
    with (
        _ALEMBIC,
        database.errors("migrate the schema"),
        database.engine.begin() as connection,
    ):
        if database.dialect == "postgresql":
            connection.execute(select(func.pg_advisory_xact_lock(MIGRATION_LOCK_KEY)))
        config.attributes["connection"] = connection
        try:
            command.upgrade(config, revision)
        except CommandError as exc:
            raise StoreError(
                f"cannot migrate the store at {database.url}: {exc}; the database was "
                "probably migrated by a newer Foresight, so run that version (or a fresh "
                "database)"
            ) from exc
