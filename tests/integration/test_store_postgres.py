"""The store against the real PostgreSQL on this machine (127.0.0.1:5432).

The whole repository contract of ``tests/pipelines/store/store_contract.py`` runs
here too, plus what only PostgreSQL does: ``SKIP LOCKED`` claims, replicas migrating
at once under an advisory lock, timestamps independent of the session time zone.
Each session works in a fresh, uniquely named database that is dropped afterwards.
Without a reachable server the tests skip, except in CI (``CI=true``) where they fail.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import URL, create_engine, text

from api.ingest import pushed_rows
from api.service import RecommendationService
from api.services import Services
from api.settings import load_app_settings
from pipelines.config.pools import PoolConfig, PoolsConfig
from pipelines.store.engine import Database, make_engine
from pipelines.store.samples import SampleRow
from pipelines.store.schema import VERSION_TABLE, Base
from pipelines.store.store import Store, open_store
from policy.types import NO_LATENCY, LatencyAdjustment
from tests.pipelines.store.revisions import current_revision, head_revision

pytestmark = pytest.mark.integration

TABLES = (
    "samples",
    "forecasts",
    "forecast_runs",
    "peak_forecasts",
    "recommendations",
    "pool_state",
    "webhook_outbox",
)


def _load_contract() -> ModuleType:
    name = "foresight_store_contract"
    if name in sys.modules:
        return sys.modules[name]
    path = Path(__file__).resolve().parents[1] / "pipelines" / "store" / "store_contract.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


contract = _load_contract()


@pytest.fixture(scope="session")
def fresh_database(pg_admin: URL) -> Iterator[Callable[[], URL]]:
    """A factory of new, uniquely named databases, all dropped at the end of the session."""
    admin = create_engine(pg_admin, isolation_level="AUTOCOMMIT")
    created: list[str] = []

    def make() -> URL:
        name = f"foresight_test_{uuid.uuid4().hex[:12]}"
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        created.append(name)
        return pg_admin.set(database=name)

    try:
        yield make
    finally:
        with admin.connect() as connection:
            for name in created:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="session")
def pg_store(fresh_database: Callable[[], URL]) -> Iterator[Store]:
    with open_store(fresh_database()) as store:
        yield store


@pytest.fixture
def store(pg_store: Store) -> Store:
    """The session's PostgreSQL store, emptied before each test."""
    with pg_store.engine.begin() as connection:
        connection.execute(text(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY"))
    return pg_store


class TestSamplesPostgres(contract.SamplesContract):
    pass


class TestForecastsPostgres(contract.ForecastsContract):
    pass


class TestRecommendationsPostgres(contract.RecommendationsContract):
    pass


class TestStatePostgres(contract.StateContract):
    pass


class TestOutboxPostgres(contract.OutboxContract):
    pass


def test_the_migrated_schema_matches_the_orm_models(pg_store: Store) -> None:
    assert current_revision(pg_store.database) == head_revision()
    with pg_store.engine.connect() as connection:
        context = MigrationContext.configure(
            connection, opts={"version_table": VERSION_TABLE, "compare_type": True}
        )
        assert compare_metadata(context, Base.metadata) == []


def test_replicas_starting_together_migrate_once(fresh_database: Callable[[], URL]) -> None:
    url = fresh_database()
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def replica() -> None:
        try:
            barrier.wait()
            open_store(url).close()
        except BaseException as exc:  # surfaced below: threads swallow exceptions
            errors.append(exc)

    # Daemon threads: replicas deadlocked on CREATE TABLE fail the test instead of hanging it.
    threads = [threading.Thread(target=replica, daemon=True) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "replicas deadlocked migrating"
    assert errors == []
    with open_store(url) as store:
        assert current_revision(store.database) == head_revision()


def test_a_claim_skips_rows_another_replica_holds(store: Store) -> None:
    now = datetime(2024, 3, 1, tzinfo=UTC)
    held = store.outbox.enqueue("http://a", b"x", "held", now=now)
    free = store.outbox.enqueue("http://a", b"x", "free", now=now)
    other = Database(make_engine(store.engine.url))
    try:
        with other.engine.begin() as connection:
            connection.execute(
                text("SELECT id FROM webhook_outbox WHERE id = :id FOR UPDATE"), {"id": held}
            )
            # Without SKIP LOCKED this claim would block until the other transaction ends.
            claimed = store.outbox.claim_due(now=now, limit=10)
            assert [item.id for item in claimed] == [free]
        assert [item.id for item in store.outbox.claim_due(now=now)] == [held]
    finally:
        other.dispose()


def test_timestamps_are_utc_whatever_the_session_time_zone(store: Store) -> None:
    tokyo = Store(
        Database(make_engine(store.engine.url, connect_args={"options": "-c TimeZone=Asia/Tokyo"}))
    )
    try:
        ds = pd.date_range("2024-03-01", periods=3, freq="5min", tz="UTC")
        tokyo.samples.upsert(pd.DataFrame({"unique_id": "a/q", "ds": ds, "y": [1.0, 2.0, 3.0]}))
        assert tokyo.samples.read()["ds"].tolist() == ds.tolist()
        assert store.samples.last_timestamp("a/q") == ds[-1]
        with tokyo.engine.connect() as connection:
            assert connection.execute(text("SHOW TimeZone")).scalar_one() == "Asia/Tokyo"
    finally:
        tokyo.close()


def test_replicas_pushing_one_pool_at_once_both_count_in_its_state(
    store: Store, tmp_path: Path
) -> None:
    """Two replicas on PostgreSQL: A is held mid-decision while B pushes and decides.

    B's 40 nodes must stay in the pool's stabilisation window (A decides again on top
    of B's state); pushes without allocated or queued samples are stored too.
    """
    pools = PoolsConfig.model_validate(
        {
            "pools": [
                {
                    "name": "alpha",
                    "node_group_id": "ng-alpha",
                    "gpus_per_node": 8,
                    "max_nodes": 40,
                    "scale_down": {"window": "10m", "max_step_nodes": 1},
                }
            ]
        }
    )
    settings = load_app_settings(root=tmp_path, horizon=12, max_train_days=1)
    now = datetime.now(UTC).replace(microsecond=0)
    reached, release = threading.Event(), threading.Event()

    def held(pool: PoolConfig, at: datetime) -> LatencyAdjustment:
        if not reached.is_set():
            reached.set()
            assert release.wait(60)
        return NO_LATENCY

    def replica(**changes: object) -> RecommendationService:
        services = Services(settings, pools, store, None, clock=lambda: now, **changes)  # type: ignore[arg-type]
        service = RecommendationService(services)
        service.start()
        return service

    def live(allocated: float) -> list[SampleRow]:
        return pushed_rows(
            [
                ("alpha/allocated_gpus", now, allocated),
                ("alpha/queue_gpus", now, 0.0),
                ("alpha/nodes", now, 10.0),
            ]
        )

    a, b = replica(latency=held), replica()
    errors: list[BaseException] = []

    def push_low() -> None:
        try:
            a.ingest(live(8.0))
        except BaseException as exc:  # surfaced below: threads swallow exceptions
            errors.append(exc)

    thread = threading.Thread(target=push_low, daemon=True)
    thread.start()
    try:
        assert reached.wait(30), "replica A never decided"
        b.ingest(live(320.0))
        b.ingest(pushed_rows([("alpha/gpu_util", now - timedelta(minutes=5), 55.0)]))
    finally:
        release.set()
        thread.join(30)
    assert errors == []
    stored = store.state.get("alpha")
    assert stored is not None
    assert max(span["nodes"] for span in stored["spans"]) == 40
    assert a.recommendation("alpha").recommendation.desired_nodes == 40
    assert len(store.samples.read(["alpha/gpu_util"])) == 1
