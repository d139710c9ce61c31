"""Alembic migrations of the store: they create the ORM's schema, once, and only once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from pipelines.errors import StoreError
from pipelines.store.engine import Database, make_engine
from pipelines.store.migrate import alembic_config, upgrade
from pipelines.store.schema import VERSION_TABLE, Base
from pipelines.store.store import open_store
from tests.pipelines.store.revisions import current_revision, head_revision

TABLES = {
    "samples",
    "forecasts",
    "forecast_runs",
    "peak_forecasts",
    "recommendations",
    "pool_state",
    "webhook_outbox",
    "job_runs",
    "scheduler_leader",
}


@pytest.fixture
def database(tmp_path: Path) -> Database:
    return Database(make_engine(f"sqlite:///{tmp_path / 'store.db'}"))


def test_upgrade_creates_every_table_and_records_the_head(database: Database) -> None:
    assert current_revision(database) is None
    upgrade(database)
    tables = set(inspect(database.engine).get_table_names())
    assert tables == {*TABLES, VERSION_TABLE}
    # Tenants of a shared database keep their own names.
    assert "apscheduler_jobs" not in tables
    assert "alembic_version" not in tables
    assert current_revision(database) == head_revision()


def test_the_migrated_schema_matches_the_orm_models(database: Database) -> None:
    upgrade(database)
    with database.engine.connect() as connection:
        context = MigrationContext.configure(
            connection, opts={"version_table": VERSION_TABLE, "compare_type": True}
        )
        assert compare_metadata(context, Base.metadata) == []


def test_opening_twice_migrates_once_and_keeps_the_data(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    frame = pd.DataFrame(
        {
            "unique_id": "a/q",
            "ds": pd.date_range("2024-01-01", periods=3, freq="5min", tz="UTC"),
            "y": [1.0, 2.0, 3.0],
        }
    )
    with open_store(url) as store:
        store.samples.upsert(frame)
    with open_store(url) as store:
        assert len(store.samples.read()) == 3
        with store.engine.connect() as connection:
            versions = connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).all()
    assert versions == [(head_revision(),)]


def test_downgrade_to_base_drops_the_tables_and_upgrade_restores_them(
    database: Database,
) -> None:
    upgrade(database)
    config = alembic_config()
    with database.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "base")
    assert set(inspect(database.engine).get_table_names()) == {VERSION_TABLE}
    upgrade(database)
    assert set(inspect(database.engine).get_table_names()) >= TABLES


def test_a_schema_from_a_newer_version_is_a_clear_error(database: Database) -> None:
    upgrade(database)
    with database.engine.begin() as connection:
        connection.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = 'from_the_future'"))
    with pytest.raises(StoreError, match="newer Foresight"):
        upgrade(database)


def test_0003_classifies_existing_outbox_rows_by_the_old_dead_letter_rule(
    database: Database,
) -> None:
    config = alembic_config()
    with database.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0002")
    at = "2025-01-01 00:00:00+00:00"
    with database.engine.begin() as connection:
        for key, delivered, error in [
            ("sent", at, None),
            ("dead", at, "HTTP 410"),
            ("retrying", None, "HTTP 503"),
            ("new", None, None),
        ]:
            connection.execute(
                text(
                    "INSERT INTO webhook_outbox (target_url, idempotency_key, body, created_at, "
                    "attempts, next_attempt_at, delivered_at, last_error) VALUES "
                    "('http://a', :key, x'00', :at, 1, :at, :delivered, :error)"
                ),
                {"key": key, "at": at, "delivered": delivered, "error": error},
            )
    upgrade(database)
    with database.engine.connect() as connection:
        rows = connection.execute(
            text(
                "SELECT idempotency_key, status, delivered_at IS NULL, dead_at IS NULL "
                "FROM webhook_outbox ORDER BY id"
            )
        ).all()
    assert [tuple(row) for row in rows] == [
        ("sent", "delivered", 0, 1),
        ("dead", "dead", 1, 0),
        ("retrying", "pending", 1, 1),
        ("new", "pending", 1, 1),
    ]


def test_threads_opening_stores_at_once_all_migrate(tmp_path: Path) -> None:
    # The scheduler's jobs open the store from their own threads. Alembic's proxies
    # are module globals, so unserialised upgrades fail (KeyError: 'config') or crash
    # the interpreter: run the race in a child process so a crash is a failure here.
    script = f"""
import threading
from pipelines.store.store import open_store
errors = []
def one(i):
    try:
        with open_store("sqlite:///{tmp_path}/store" + str(i) + ".db"):
            pass
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(len(errors), errors[:1])
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=Path(__file__).resolve().parents[3],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "0 []"
