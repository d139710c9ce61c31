"""Alembic environment of the store, run by :func:`pipelines.store.migrate.upgrade`.

The caller passes an open connection in ``config.attributes["connection"]``; the
``sqlalchemy.url`` option is the fallback for running Alembic by hand.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine

from pipelines.store.schema import VERSION_TABLE, Base


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        version_table=VERSION_TABLE,
        compare_type=True,
        # SQLite cannot ALTER most things; batch mode rebuilds the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def _run_offline() -> None:
    context.configure(
        url=context.config.get_main_option("sqlalchemy.url"),
        target_metadata=Base.metadata,
        version_table=VERSION_TABLE,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def _run_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        return
    url = context.config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("pass a connection in config.attributes or set sqlalchemy.url")
    engine = create_engine(url)
    try:
        with engine.begin() as own_connection:
            _configure(own_connection)
    finally:
        engine.dispose()


if context.is_offline_mode():
    _run_offline()
else:
    _run_online()
