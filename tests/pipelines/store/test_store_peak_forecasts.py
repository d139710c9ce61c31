"""Stored peak forecasts: saved as the peak model predicts them, read back newest first."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecaster.exceptions import DataValidationError
from pipelines.store.store import Store, open_store
from tests.pipelines.store.store_contract import save_forecast

STEP = timedelta(minutes=5)
ORIGIN = datetime(2025, 3, 30, 12, 0, tzinfo=UTC)


def save_peak(store: Store, frame: pd.DataFrame, model_version: str, generated_at: datetime) -> int:
    """Store a peak frame as a run of its own (no per-horizon rows); return the rows stored."""
    stored = store.forecast_runs.commit(
        None, frame, model_version=model_version, generated_at=generated_at, step=STEP
    )
    return stored.peak_rows


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(f"sqlite:///{tmp_path / 'store.db'}") as opened:
        yield opened


def peak_frame(origin: datetime = ORIGIN, last: float = 10.0) -> pd.DataFrame:
    """Two leads of one series, as ``predict_peak`` returns them."""
    return pd.DataFrame(
        {
            "unique_id": ["a/demand_gpus"] * 2,
            "ds": pd.to_datetime([origin, origin], utc=True),
            "lead": [2, 3],
            "last": [last, last],
            "scale": [1.0, 1.0],
            "q0.9": [last + 4.0, last + 5.0],
            "q0.95": [last + 6.0, last + 7.0],
        }
    )


def test_a_saved_peak_reads_back_with_its_window_end(store: Store) -> None:
    generated = ORIGIN + timedelta(minutes=1)
    saved = save_peak(store, peak_frame(), "3", generated)

    got = store.peak_forecasts.latest("a/demand_gpus")

    assert saved == 2
    assert list(got["lead"]) == [2, 3]
    assert list(got["ds"]) == [pd.Timestamp(ORIGIN + 2 * STEP), pd.Timestamp(ORIGIN + 3 * STEP)]
    assert (got["origin"] == pd.Timestamp(ORIGIN)).all()
    np.testing.assert_allclose(got["q0.95"], [16.0, 17.0])
    np.testing.assert_allclose(got["last"], [10.0, 10.0])
    assert set(got["model_version"]) == {"3"}
    assert (got["generated_at"] == pd.Timestamp(generated)).all()


def test_latest_is_the_newest_of_the_version_asked_for(store: Store) -> None:
    first, second = ORIGIN, ORIGIN + STEP
    save_peak(store, peak_frame(first, 10.0), "3", first)
    save_peak(store, peak_frame(second, 20.0), "4", second)

    assert store.peak_forecasts.latest("a/demand_gpus")["last"].iloc[0] == 20.0
    assert store.peak_forecasts.latest("a/demand_gpus", "3")["last"].iloc[0] == 10.0
    assert store.peak_forecasts.latest("a/demand_gpus", "9").empty
    assert store.peak_forecasts.latest("b/demand_gpus").empty


def test_saving_the_same_generation_again_overwrites(store: Store) -> None:
    for last in (10.0, 12.0):
        save_peak(store, peak_frame(last=last), "3", ORIGIN)

    rows = store.peak_forecasts.read()

    assert len(rows) == 2
    np.testing.assert_allclose(rows["last"], [12.0, 12.0])


def test_non_finite_values_and_missing_columns_are_refused(store: Store) -> None:
    bad = peak_frame()
    bad.loc[0, "q0.9"] = np.nan
    with pytest.raises(DataValidationError, match="non-finite"):
        save_peak(store, bad, "3", ORIGIN)
    with pytest.raises(DataValidationError, match="lead"):
        save_peak(store, peak_frame().drop(columns="lead"), "3", ORIGIN)
    assert store.peak_forecasts.read().empty


def _horizon_frame(sid: str, origin: datetime) -> pd.DataFrame:
    ds = pd.to_datetime([origin + STEP, origin + 2 * STEP], utc=True)
    return pd.DataFrame({"unique_id": sid, "ds": ds, "mean": [1.0, 2.0], "q0.9": [2.0, 3.0]})


def test_forecasts_newest_and_latest_are_per_model_version(store: Store) -> None:
    first, second = ORIGIN, ORIGIN + STEP
    save_forecast(store, _horizon_frame("a/demand_gpus", first), "3", first)
    save_forecast(store, _horizon_frame("a/demand_gpus", second), "4", second)
    save_forecast(store, _horizon_frame("b/demand_gpus", first), "3", first)

    assert store.forecasts.newest(["a/demand_gpus", "b/demand_gpus", "c/demand_gpus"]) == {
        "a/demand_gpus": second,
        "b/demand_gpus": first,
    }
    assert store.forecasts.newest(["a/demand_gpus"], "3") == {"a/demand_gpus": first}
    assert set(store.forecasts.latest("a/demand_gpus", "3")["generated_at"]) == {
        pd.Timestamp(first)
    }
    assert set(store.forecasts.latest("a/demand_gpus")["model_version"]) == {"4"}
    assert store.forecasts.latest("a/demand_gpus", "9").empty


def test_the_models_raw_quantiles_and_scale_are_kept_beside_the_served(store: Store) -> None:
    served = peak_frame().assign(**{"raw_q0.9": [13.0, 14.0], "raw_q0.95": [15.0, 16.0]})
    served["scale"] = [2.0, 3.0]
    save_peak(store, served, "3", ORIGIN)
    save_peak(store, peak_frame(ORIGIN + STEP), "3", ORIGIN + STEP)

    rows = store.peak_forecasts.read(["a/demand_gpus"], since=ORIGIN)
    first = rows[rows["generated_at"] == pd.Timestamp(ORIGIN)]
    np.testing.assert_allclose(first["q0.9"], [14.0, 15.0])
    np.testing.assert_allclose(first["raw_q0.9"], [13.0, 14.0])
    np.testing.assert_allclose(first["raw_q0.95"], [15.0, 16.0])
    np.testing.assert_allclose(first["scale"], [2.0, 3.0])
    second = rows[rows["generated_at"] == pd.Timestamp(ORIGIN + STEP)]
    assert second["raw_q0.9"].isna().all()  # stored without raw quantiles
    np.testing.assert_allclose(second["scale"], [1.0, 1.0])
    newer = store.peak_forecasts.read(["a/demand_gpus"], since=ORIGIN + STEP)
    assert set(newer["generated_at"]) == {pd.Timestamp(ORIGIN + STEP)}


def test_the_level_held_after_an_idle_spell_is_kept_where_there_was_one(store: Store) -> None:
    held = peak_frame().assign(return_level=[30.0, np.nan])
    save_peak(store, held, "3", ORIGIN)
    save_peak(store, peak_frame(ORIGIN + STEP), "3", ORIGIN + STEP)

    rows = store.peak_forecasts.read(["a/demand_gpus"])
    first = rows[rows["generated_at"] == pd.Timestamp(ORIGIN)]
    assert first["return_level"].iloc[0] == 30.0
    assert np.isnan(first["return_level"].iloc[1])
    second = rows[rows["generated_at"] == pd.Timestamp(ORIGIN + STEP)]
    assert second["return_level"].isna().all()  # stored without the column
