"""Locks that make exactly one process the scheduler leader (docs/scheduler.md)."""

from __future__ import annotations

import fcntl
import logging
import os
from pathlib import Path
from typing import Final, Protocol

from sqlalchemy import URL, Connection, Engine, create_engine, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from pipelines.store.engine import display_url
from pipelines.store.store import Store

logger = logging.getLogger(__name__)

SCHEDULER_LOCK_KEY: Final = 0x466F_7265_0002
"""The advisory lock key of the scheduler leader ("Fore" + 2; migrations use + 1)."""
LOCK_FILE_SUFFIX: Final = ".scheduler.lock"

# libpq options of the lock connection: fail fast rather than hang, so a leader that
# lost the database notices within seconds and steps down.
_PG_CONNECT_ARGS: Final = {
    "connect_timeout": 5,
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
    "tcp_user_timeout": 10_000,
    "options": "-c statement_timeout=5000",
    "application_name": "foresight-scheduler-leader",
}


class LeaderLock(Protocol):
    """A lock at most one process holds at a time."""

    @property
    def description(self) -> str:
        """What is locked, for log lines."""

    def try_acquire(self) -> bool:
        """Take the lock without waiting; True if this process now holds it."""

    def still_held(self) -> bool:
        """Check (cheaply, without waiting long) that the lock is still ours."""

    def release(self) -> None:
        """Let the lock go (idempotent)."""


class PostgresAdvisoryLock:
    """A PostgreSQL session advisory lock on a connection of its own.

    Args:
        url: the database URL (the store's).
        key: the 64-bit lock key.
    """

    def __init__(self, url: URL, key: int = SCHEDULER_LOCK_KEY) -> None:
        self._engine: Engine = create_engine(
            url,
            poolclass=NullPool,
            isolation_level="AUTOCOMMIT",
            connect_args=dict(_PG_CONNECT_ARGS),
        )
        self._key = key
        self._connection: Connection | None = None
        self._held = False
        self.description = f"advisory lock {key} on {display_url(url)}"

    def try_acquire(self) -> bool:
        """Try ``pg_try_advisory_lock``; a database error counts as not acquired."""
        try:
            connection = self._connect()
            acquired = connection.execute(
                text("SELECT pg_try_advisory_lock(:key)"), {"key": self._key}
            ).scalar_one()
        except SQLAlchemyError as exc:
            logger.warning("cannot try the %s: %s", self.description, _one_line(exc))
            self._drop_connection()
            return False
        self._held = bool(acquired)
        return self._held

    def still_held(self) -> bool:
        """Ask the server whether this session still holds the lock."""
        if not self._held or self._connection is None:
            return False
        try:
            count = self._connection.execute(
                text(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                    "AND pid = pg_backend_pid() AND classid = :high AND objid = :low "
                    "AND objsubid = 1"
                ),
                {"high": (self._key >> 32) & 0xFFFF_FFFF, "low": self._key & 0xFFFF_FFFF},
            ).scalar_one()
        except SQLAlchemyError as exc:
            logger.warning("lost the %s: %s", self.description, _one_line(exc))
            self._held = False
            self._drop_connection()
            return False
        self._held = int(count) > 0
        return self._held

    def release(self) -> None:
        """Close the lock's connection, which releases the lock whatever its state."""
        self._held = False
        self._drop_connection()

    def close(self) -> None:
        """Release the lock and dispose of its engine."""
        self.release()
        self._engine.dispose()

    def _connect(self) -> Connection:
        if self._connection is None or self._connection.closed:
            self._connection = self._engine.connect()
        return self._connection

    def _drop_connection(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        try:
            # Invalidate: the DBAPI connection is closed for real, never pooled with a
            # lock still attached to its session.
            connection.invalidate()
            connection.close()
        except SQLAlchemyError:  # pragma: no cover - closing a dead connection
            pass


class FileLock:
    """An exclusive ``flock`` on a file, released by the kernel when the holder dies.

    Args:
        path: the lock file (created if missing); it also records the holder's pid.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self.description = f"file lock {path}"

    def try_acquire(self) -> bool:
        """Try ``flock(LOCK_EX | LOCK_NB)``."""
        if self._fd is not None:
            return self.still_held()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            logger.warning("cannot open the %s: %s", self.description, exc)
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return True

    def still_held(self) -> bool:
        """Check that the locked file is still the one at ``path`` (not deleted or replaced)."""
        if self._fd is None:
            return False
        try:
            on_disk = os.stat(self.path)
        except OSError:
            return False
        held = os.fstat(self._fd)
        return (on_disk.st_dev, on_disk.st_ino) == (held.st_dev, held.st_ino)

    def release(self) -> None:
        """Unlock and close the file (it stays on disk for the next holder)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


class ProcessLock:
    """The lock of a store only this process can see (in-memory SQLite): always ours."""

    description = "in-process lock (in-memory store)"

    def __init__(self) -> None:
        self._held = False

    def try_acquire(self) -> bool:
        """Always succeeds."""
        self._held = True
        return True

    def still_held(self) -> bool:
        """True between acquire and release."""
        return self._held

    def release(self) -> None:
        """Forget the lock."""
        self._held = False


def lock_for(store: Store) -> LeaderLock:
    """The leader lock that fits the store's database.

    PostgreSQL: an advisory lock; SQLite file ``x.db``: ``flock`` on
    ``x.db.scheduler.lock``; in-memory SQLite: a lock of this process only.
    """
    url = store.engine.url
    if store.database.dialect == "postgresql":
        return PostgresAdvisoryLock(url)
    database = url.database or ""
    if database in ("", ":memory:"):
        return ProcessLock()
    return FileLock(
        Path(database).expanduser().resolve().with_name(Path(database).name + LOCK_FILE_SUFFIX)
    )


def _one_line(exc: BaseException) -> str:
    cause = getattr(exc, "orig", None) or exc
    return " ".join(str(cause).split())[:300]
