"""Opening the store: URLs, drivers, unreachable databases, transactions, backoff."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from sqlalchemy import select, text

from pipelines.errors import StoreError
from pipelines.store.engine import Database, display_url, make_engine
from pipelines.store.outbox import Backoff
from pipelines.store.schema import Sample
from pipelines.store.store import open_store


def test_display_url_masks_the_password() -> None:
    assert display_url("postgresql+psycopg://u:secret@db:5432/x") == (
        "postgresql+psycopg://u:***@db:5432/x"
    )
    # Even when the URL does not parse (a port that is not a number).
    assert "secret" not in display_url("postgresql://u:secret@db:port/x")


def test_an_unreachable_database_names_the_url_without_the_password() -> None:
    url = "postgresql+psycopg://u:secret@127.0.0.1:1/x"
    with pytest.raises(StoreError) as caught:
        open_store(url)
    message = str(caught.value)
    assert "secret" not in message
    assert "postgresql+psycopg://u:***@127.0.0.1:1/x" in message


def test_a_sqlite_file_that_cannot_be_opened_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "taken.db").mkdir()
    with pytest.raises(StoreError, match=r"taken\.db"):
        open_store(f"sqlite:///{tmp_path / 'taken.db'}")


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("not a url", "not a SQLAlchemy URL"),
        ("mysql+pymysql://u:secret@db/x", "supports sqlite and postgresql"),
        ("postgresql+nosuchdriver://u:secret@db/x", "nosuchdriver"),
    ],
)
def test_unusable_urls_are_clear_errors_without_secrets(url: str, match: str) -> None:
    with pytest.raises(StoreError, match=match) as caught:
        make_engine(url)
    assert "secret" not in str(caught.value)


def test_the_sqlite_directory_is_created(tmp_path: Path) -> None:
    path = tmp_path / "fresh" / "clone" / "data" / "foresight.db"
    with open_store(f"sqlite:///{path}") as store:
        assert store.samples.read().empty
        assert "***" not in store.url
    assert path.is_file()


def test_an_in_memory_store_is_shared_across_sessions() -> None:
    with open_store("sqlite://") as store:
        frame = pd.DataFrame(
            {"unique_id": "a/q", "ds": [pd.Timestamp("2024-01-01", tz="UTC")], "y": [1.0]}
        )
        store.samples.upsert(frame)
        assert list(store.samples.last_timestamps()) == ["a/q"]


def _write_then_fail(database: Database) -> None:
    with database.transaction("write samples") as session:
        session.add(Sample(series_id="a/q", ts=pd.Timestamp("2024-01-01", tz="UTC"), value=1.0))
        session.flush()
        session.execute(text("SELECT * FROM no_such_table"))


def test_a_failed_transaction_keeps_nothing(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 'store.db'}") as store:
        with pytest.raises(StoreError, match="cannot write samples in the store at sqlite:///"):
            _write_then_fail(store.database)
        with store.database.transaction("read") as session:
            assert session.scalars(select(Sample)).all() == []


@pytest.mark.parametrize(
    ("attempts", "seconds"), [(0, 5.0), (1, 5.0), (2, 15.0), (3, 45.0), (4, 60.0), (10**6, 60.0)]
)
def test_backoff_grows_geometrically_up_to_its_cap(attempts: int, seconds: float) -> None:
    backoff = Backoff(base=timedelta(seconds=5), factor=3.0, cap=timedelta(minutes=1))
    assert backoff.delay(attempts) == timedelta(seconds=seconds)


def test_naive_timestamps_are_refused(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        with pytest.raises(ValueError, match="timezone"):
            store.samples.read(start=datetime(2024, 1, 1))
        with pytest.raises(ValueError, match="timezone"):
            store.recommendations.append("p", datetime(2024, 1, 1), 1, "hold", {})
