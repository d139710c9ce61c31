"""Forecast runs: a run's per-horizon and peak rows commit together, or not at all."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from alembic import command
from sqlalchemy import text

from forecaster.exceptions import DataValidationError
from pipelines.errors import StoreError
from pipelines.store.engine import Database, make_engine
from pipelines.store.migrate import alembic_config, upgrade
from pipelines.store.store import Store, open_store

STEP = timedelta(minutes=5)
ORIGIN = datetime(2025, 3, 30, 12, 0, tzinfo=UTC)
SID = "a/demand_gpus"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(f"sqlite:///{tmp_path / 'store.db'}") as opened:
        yield opened


def horizon_frame(origin: datetime = ORIGIN) -> pd.DataFrame:
    ds = pd.to_datetime([origin + STEP, origin + 2 * STEP], utc=True)
    return pd.DataFrame({"unique_id": SID, "ds": ds, "mean": [1.0, 2.0], "q0.9": [2.0, 3.0]})


def peak_frame(origin: datetime = ORIGIN, last: float = 10.0) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "unique_id": [SID] * 2,
            "ds": pd.to_datetime([origin, origin], utc=True),
            "lead": [2, 3],
            "last": [last, last],
            "q0.9": [last + 4.0, last + 5.0],
        }
    )


def commit(store: Store, at: datetime, peaks: pd.DataFrame | None = None) -> None:
    store.forecast_runs.commit(
        horizon_frame(at),
        peak_frame(at) if peaks is None else peaks,
        model_version="3",
        generated_at=at,
        step=STEP,
    )


def test_a_committed_run_is_read_whole(store: Store) -> None:
    stored = store.forecast_runs.commit(
        horizon_frame(), peak_frame(), model_version="3", generated_at=ORIGIN, step=STEP
    )

    assert (stored.rows, stored.peak_rows) == (2, 2)
    assert store.forecast_runs.newest("3") == ORIGIN
    assert store.forecast_runs.newest("4") is None
    assert store.forecasts.newest([SID], "3") == {SID: ORIGIN}
    assert len(store.forecasts.latest(SID, "3")) == 2
    assert store.peak_forecasts.at(SID, "3", ORIGIN)["lead"].tolist() == [2, 3]


def test_a_malformed_peak_frame_stores_nothing_of_the_run(store: Store) -> None:
    bad = peak_frame().assign(**{"q0.9": [np.nan, 1.0]})
    with pytest.raises(DataValidationError, match="non-finite"):
        commit(store, ORIGIN, peaks=bad)

    assert store.forecast_runs.newest("3") is None
    assert store.forecasts.read().empty
    assert store.peak_forecasts.read().empty


def test_a_database_failure_mid_run_keeps_none_of_it(store: Store) -> None:
    commit(store, ORIGIN)
    # A trigger makes the peak insert of the second run fail after its forecast rows.
    with store.engine.begin() as connection:
        connection.execute(
            text(
                "CREATE TRIGGER no_peaks BEFORE INSERT ON peak_forecasts "
                "BEGIN SELECT RAISE(ABORT, 'disk full'); END"
            )
        )
    later = ORIGIN + STEP
    with pytest.raises(StoreError, match="disk full"):
        commit(store, later)

    assert store.forecast_runs.newest("3") == ORIGIN
    assert set(store.forecasts.read()["generated_at"]) == {pd.Timestamp(ORIGIN)}
    assert store.forecasts.newest([SID], "3") == {SID: ORIGIN}


def test_rows_without_a_recorded_run_are_not_read_as_the_latest(store: Store) -> None:
    commit(store, ORIGIN)
    later = ORIGIN + STEP
    # Rows a writer left without their run record (as a half-written run would be).
    with store.engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO forecasts (series_id, generated_at, step, ds, model_version, "
                "model, mean, quantiles) VALUES (:sid, :at, 1, :at, '3', NULL, 5.0, '{}')"
            ),
            {"sid": SID, "at": later.replace(tzinfo=None)},
        )

    assert len(store.forecasts.read()) == 3
    assert store.forecasts.newest([SID], "3") == {SID: ORIGIN}
    assert set(store.forecasts.latest(SID, "3")["generated_at"]) == {pd.Timestamp(ORIGIN)}


def test_a_retried_run_overwrites_its_rows_and_record(store: Store) -> None:
    commit(store, ORIGIN)
    commit(store, ORIGIN, peaks=peak_frame(last=20.0))

    peaks = store.peak_forecasts.at(SID, "3", ORIGIN)
    assert peaks["last"].tolist() == [20.0, 20.0]
    assert len(store.forecasts.read()) == 2


def test_0009_records_the_runs_stored_before_it(tmp_path: Path) -> None:
    database = Database(make_engine(f"sqlite:///{tmp_path / 'store.db'}"))
    config = alembic_config()
    with database.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0008")
    at = ORIGIN.replace(tzinfo=None)
    with database.engine.begin() as connection:
        for sid, step in (("a/demand_gpus", 1), ("a/demand_gpus", 2), ("b/demand_gpus", 1)):
            connection.execute(
                text(
                    "INSERT INTO forecasts (series_id, generated_at, step, ds, model_version, "
                    "model, mean, quantiles) VALUES (:sid, :at, :step, :at, '3', NULL, 1, '{}')"
                ),
                {"sid": sid, "at": at, "step": step},
            )
    upgrade(database)

    with database.engine.connect() as connection:
        runs = connection.execute(
            text("SELECT model_version, series, rows, peak_rows FROM forecast_runs")
        ).all()
    assert [tuple(run) for run in runs] == [("3", 2, 3, 0)]
    with Store(database) as store:
        assert store.forecasts.newest([SID], "3") == {SID: ORIGIN}
