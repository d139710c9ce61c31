"""The :class:`Store`: one database, one repository per kind of record."""

from __future__ import annotations

from types import TracebackType

from sqlalchemy import URL, Engine, text

from pipelines.store.engine import Database, make_engine
from pipelines.store.forecast_runs import ForecastRunRepository
from pipelines.store.forecasts import ForecastRepository
from pipelines.store.job_runs import JobRunRepository
from pipelines.store.leader import LeaderRepository
from pipelines.store.migrate import upgrade
from pipelines.store.outbox import OutboxRepository
from pipelines.store.peak_forecasts import PeakForecastRepository
from pipelines.store.recommendations import RecommendationRepository
from pipelines.store.samples import SampleRepository
from pipelines.store.state import PoolStateRepository


class Store:
    """Samples, forecasts (per horizon and of the lead-time peak, committed per forecast
    run), recommendations, pool state and the webhook outbox.

    Build it with :func:`open_store`. Each repository method is one transaction.
    The engine is shared with APScheduler's SQLAlchemy job store (its table,
    ``apscheduler_jobs``, is APScheduler's own).
    """

    def __init__(self, database: Database) -> None:
        self.database = database
        self.samples = SampleRepository(database)
        self.forecasts = ForecastRepository(database)
        self.peak_forecasts = PeakForecastRepository(database)
        self.forecast_runs = ForecastRunRepository(database)
        self.recommendations = RecommendationRepository(database)
        self.state = PoolStateRepository(database)
        self.outbox = OutboxRepository(database)
        self._job_runs = JobRunRepository(database)
        self.leader = LeaderRepository(database)

    @property
    def job_runs(self) -> JobRunRepository:
        """The history of scheduled job runs (``foresight jobs``)."""
        return self._job_runs

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (e.g. for ``SQLAlchemyJobStore(engine=...)``)."""
        return self.database.engine

    @property
    def url(self) -> str:
        """The store's URL with its password masked, for logs and messages."""
        return self.database.url

    def close(self) -> None:
        """Release the store's connections."""
        self.database.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def open_store(url: str | URL, *, migrate: bool = True) -> Store:
    """Connect to the store at ``url`` and bring its schema up to date.

    Args:
        url: a SQLAlchemy URL, e.g. ``Settings.store_url``:
            ``sqlite:///data/foresight.db`` or ``postgresql+psycopg://user@host/db``.
        migrate: run ``alembic upgrade head`` (idempotent); False only checks that
            the database answers (for read-only tools against a managed schema).

    Returns:
        The open store; close it (or use it as a context manager) when done.

    Raises:
        StoreError: the URL is invalid, the driver is missing, the database is
            unreachable or cannot be migrated; the message names the URL without
            its password.
    """
    database = Database(make_engine(url))
    try:
        if migrate:
            upgrade(database)
        else:
            with database.errors("connect"), database.engine.connect() as connection:
                connection.execute(text("SELECT 1"))
    except BaseException:
        database.dispose()
        raise
    return Store(database)
