"""Schema revisions that only tests read: the newest shipped and the database's own."""

from __future__ import annotations

from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from pipelines.store.engine import Database
from pipelines.store.migrate import alembic_config
from pipelines.store.schema import VERSION_TABLE


def head_revision() -> str:
    """Return the newest migration revision shipped with this code."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the package ships no migrations"
    return head


def current_revision(database: Database) -> str | None:
    """Return the revision the database is at, or None before the first migration."""
    with database.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
        return context.get_current_revision()
