"""Engines, sessions and error translation for the store's database (docs/jobs.md)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, Literal

from sqlalchemy import URL, Engine, create_engine, event, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

from pipelines.errors import StoreError

Dialect = Literal["sqlite", "postgresql"]
SUPPORTED_DIALECTS: Final[frozenset[str]] = frozenset({"sqlite", "postgresql"})

_SQLITE_BUSY_TIMEOUT_MS: Final = 30_000
_DRIVER_HINTS: Final = {
    "psycopg": "psycopg[binary]>=3.2",
    "psycopg2": "psycopg2-binary",
}
# user:password@ in a URL that could not be parsed (so render_as_string cannot mask it).
_CREDENTIALS = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")


def display_url(url: str | URL) -> str:
    """Return the URL as text with its password replaced by ``***``."""
    if isinstance(url, URL):
        return url.render_as_string(hide_password=True)
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return _CREDENTIALS.sub(r"\1***@", url)


class Database:
    """An engine, a session factory and the masked URL used in every error message.

    Args:
        engine: an engine built by :func:`make_engine` (or one of a test's own).
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.url = display_url(engine.url)
        self._password = engine.url.password
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    @property
    def dialect(self) -> Dialect:
        """The backend: ``"sqlite"`` or ``"postgresql"``."""
        name = self.engine.dialect.name
        return "postgresql" if name == "postgresql" else "sqlite"

    @contextmanager
    def transaction(self, action: str) -> Iterator[Session]:
        """Yield a session whose work commits together or not at all.

        Args:
            action: what the caller does, for the error message (e.g. "write samples").

        Raises:
            StoreError: the database failed; nothing of the transaction was kept.
        """
        with self.errors(action), self._sessions.begin() as session:
            yield session

    @contextmanager
    def errors(self, action: str) -> Iterator[None]:
        """Translate SQLAlchemy errors raised inside into :class:`StoreError`."""
        try:
            yield
        except SQLAlchemyError as exc:
            raise StoreError(self.describe(exc, action)) from exc

    def describe(self, exc: BaseException, action: str) -> str:
        """Build the message of a failed ``action``: URL without password, cause, hint."""
        cause = getattr(exc, "orig", None) or exc
        detail = " ".join(str(cause).split())
        if self._password:
            detail = detail.replace(str(self._password), "***")
        return (
            f"cannot {action} in the store at {self.url}: {detail}; check that the database "
            "is running and reachable and that store_url (FORESIGHT_STORE_URL) is right"
        )

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()


def make_engine(url: str | URL, **engine_options: Any) -> Engine:
    """Build an engine for a store URL without connecting yet.

    A SQLite file's directory is created (``data/`` may not exist in a fresh clone);
    SQLite connections get a busy timeout and write-ahead logging so the API and the
    scheduler can share the file.

    Args:
        url: ``sqlite:///path/to/file.db`` or ``postgresql+psycopg://user@host/db``.
        **engine_options: passed to :func:`sqlalchemy.create_engine`.

    Raises:
        StoreError: the URL is malformed, names an unsupported backend, or its driver
            is not installed.
    """
    shown = display_url(url)
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as exc:
        raise StoreError(
            f"store_url {shown!r} is not a SQLAlchemy URL; use e.g. sqlite:///data/foresight.db "
            "or postgresql+psycopg://user:password@host:5432/foresight"
        ) from exc
    backend = parsed.get_backend_name()
    if backend not in SUPPORTED_DIALECTS:
        raise StoreError(
            f"store_url {shown} uses {backend!r}; the store supports sqlite and postgresql "
            "(postgresql+psycopg://...)"
        )
    options: dict[str, Any] = {}
    if backend == "sqlite":
        options.update(_sqlite_options(parsed))
    else:
        # Replicas outlive database restarts; test each pooled connection before use.
        options["pool_pre_ping"] = True
    options.update(engine_options)
    try:
        engine = create_engine(parsed, **options)
    except (NoSuchModuleError, ImportError) as exc:
        driver = parsed.get_driver_name()
        package = _DRIVER_HINTS.get(driver, driver)
        raise StoreError(
            f"the database driver {driver!r} of store_url {shown} is not installed; "
            f"install {package!r} or use another driver in the URL"
        ) from exc
    if backend == "sqlite":
        event.listen(engine, "connect", _configure_sqlite_connection)
    return engine


def _sqlite_options(url: URL) -> dict[str, Any]:
    database = url.database or ""
    if database in ("", ":memory:"):
        # One shared connection, or every session would see its own empty database.
        return {"poolclass": StaticPool, "connect_args": {"check_same_thread": False}}
    try:
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"cannot create the directory of the SQLite store {database}: {exc}; "
            "set store_url to a writable location"
        ) from exc
    return {}


def _configure_sqlite_connection(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {_SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute("PRAGMA journal_mode = WAL")
    finally:
        cursor.close()
