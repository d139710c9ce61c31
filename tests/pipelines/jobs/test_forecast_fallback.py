"""A model that cannot be refitted predicts the fleet once; failures are typed values."""

from __future__ import annotations

import pandas as pd
import pytest

from forecaster.exceptions import DataValidationError, InsufficientHistoryError, ModelError
from forecaster.registry import LoadedModel
from forecaster.types import DS, MEAN, UID, Levels, Y
from forecaster.unavailable import Unavailable
from pipelines.jobs.series_forecasts import forecast_series


class Foreign:
    """A fitted model of three series that counts its calls (a foreign pyfunc)."""

    def __init__(self, error: Exception | None = None) -> None:
        self.calls = 0
        self.error = error

    def predict(self, h: int, levels: Levels) -> pd.DataFrame:
        self.calls += 1
        if self.error is not None:
            raise self.error
        ds = pd.date_range("2024-05-01", periods=h, freq="10min", tz="UTC")
        return pd.DataFrame(
            {UID: [u for u in ("a", "b", "c") for _ in ds], DS: [*ds] * 3, MEAN: 1.0}
        )


def groups(uids: list[str]) -> list[tuple[str, pd.DataFrame]]:
    ds = pd.date_range("2024-04-30", periods=3, freq="10min", tz="UTC")
    return [(uid, pd.DataFrame({UID: uid, DS: ds, Y: 1.0})) for uid in uids]


def test_a_foreign_model_predicts_the_fleet_once_and_each_series_gets_its_rows() -> None:
    model = Foreign()
    seen: list[tuple[int, int]] = []
    made = forecast_series(
        LoadedModel(model, "1", "registry"),
        groups(["a", "c", "z"]),
        4,
        (0.9,),
        None,
        lambda _, done, total: seen.append((done, total)),
    )
    assert model.calls == 1
    assert list(made) == ["a", "c", "z"]
    for uid in ("a", "c"):
        frame = made[uid]
        assert isinstance(frame, pd.DataFrame)
        assert frame[UID].eq(uid).all()
        assert len(frame) == 4
    assert isinstance(made["z"], pd.DataFrame)
    assert made["z"].empty
    assert seen == [(1, 3), (2, 3), (3, 3)]


def test_a_failed_prediction_is_every_series_typed_cause() -> None:
    model = Foreign(ModelError("the pyfunc broke"))
    made = forecast_series(LoadedModel(model, "1", "registry"), groups(["a", "b"]), 4, (0.9,), None)
    assert model.calls == 1
    assert made["a"] == made["b"] == Unavailable("failed", "the pyfunc broke")
    assert str(made["a"]) == "the pyfunc broke"


@pytest.mark.parametrize(
    ("error", "cause"),
    [
        (InsufficientHistoryError("short"), "insufficient_history"),
        (DataValidationError("bad"), "invalid_data"),
        (ModelError("broke"), "failed"),
        (ValueError("odd"), "failed"),
    ],
)
def test_the_cause_is_the_error_kind(error: Exception, cause: str) -> None:
    made = Unavailable.of(error, "the peak forecast failed: ")
    assert made.cause == cause
    assert made.detail == f"the peak forecast failed: {error}"
