"""The MLflow pyfunc wrapper of a fitted Foresight forecaster (docs/forecasting.md)."""

from __future__ import annotations

import pickle
import tempfile
import warnings
from collections.abc import Iterable, Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import cloudpickle  # type: ignore[import-untyped]
import mlflow
import pandas as pd
from mlflow.models import infer_signature
from mlflow.models.model import ModelInfo
from mlflow.pyfunc.model import PythonModel, PythonModelContext

from forecaster.exceptions import DataValidationError
from forecaster.peak.model import PeakQuantileForecaster
from forecaster.types import UID, Levels

H = "h"
"""Request column: how many steps ahead to forecast the row's series."""
ARTIFACT_KEY = "forecaster"
PEAK_ARTIFACT_KEY = "peak"
"""Optional artifact: the training's global peak-quantile model, served beside it."""
_ENTRY_CODE = '''"""MLflow models-from-code entry point of a Foresight forecaster (generated)."""

import mlflow

from forecaster.pyfunc import ForecastPyfunc

mlflow.models.set_model(ForecastPyfunc())
'''
# Distributions a loaded forecaster needs at predict time; listing them spares MLflow
# its requirement inference, which loads the model in a subprocess (seconds per log).
_REQUIREMENTS = ("mlflow", "cloudpickle", "numpy", "pandas", "scikit-learn", "statsmodels")


@runtime_checkable
class SupportsPredict(Protocol):
    """A fitted model that forecasts every series it knows ``h`` steps ahead."""

    def predict(self, h: int, levels: Levels) -> pd.DataFrame:
        """Return the forecast frame ``unique_id, ds, step, model, mean, q<level>...``."""
        ...


@runtime_checkable
class SupportsRestriction(Protocol):
    """A fitted model that can forecast some of its series without the others."""

    def restricted_to(self, series: Iterable[str]) -> SupportsPredict:
        """Return a fitted model of only ``series`` (those it knows), in its order."""
        ...

    def describe(self) -> Mapping[str, str]:
        """Return ``{unique_id: family}`` of every series it knows, in its order."""
        ...


def forecast_requests(
    model: SupportsPredict, requests: pd.DataFrame, levels: Levels
) -> pd.DataFrame:
    """Forecast the series a request frame names, each for its own ``h``.

    Args:
        requests: columns ``unique_id`` and ``h``, one row per series.
        levels: the quantile levels of the output.

    A model that supports it (:class:`SupportsRestriction`, e.g. the champion) only
    forecasts the requested series; any other forecasts all and the rows are picked.

    Returns:
        The rows of ``model.predict(h, levels)`` for the requested series, grouped by
        ``h`` in order of first appearance, in the model's series order within a group.

    Raises:
        DataValidationError: a column is missing, ``h`` is not a positive integer, a
            series is requested twice, or the model does not know a series.
    """
    _check_requests(requests)
    frames = []
    for h in pd.unique(requests[H]):
        wanted = set(requests.loc[requests[H] == h, UID].astype(str))
        forecast = _forecast_of(model, wanted, int(h), levels)
        frames.append(forecast[forecast[UID].astype(str).isin(wanted)])
    return pd.concat(frames, ignore_index=True)


def _forecast_of(model: SupportsPredict, wanted: set[str], h: int, levels: Levels) -> pd.DataFrame:
    """Forecast ``h`` steps of (at least) the ``wanted`` series, which must all be known."""
    if isinstance(model, SupportsRestriction):
        known = set(model.describe())
        forecast = None
    else:
        forecast = model.predict(h, levels)
        known = set(forecast[UID].astype(str))
    unknown = sorted(wanted - known)
    if unknown:
        raise DataValidationError(
            f"the model has no series {unknown[:5]}"
            f"{f' (and {len(unknown) - 5} more)' if len(unknown) > 5 else ''}; "
            f"it knows {len(known)} series. Request only series it was "
            "trained on, or retrain with them."
        )
    if isinstance(model, SupportsRestriction):
        return model.restricted_to(wanted).predict(h, levels)
    assert forecast is not None
    return forecast


def _check_requests(requests: pd.DataFrame) -> None:
    missing = [c for c in (UID, H) if c not in requests.columns]
    if missing:
        raise DataValidationError(
            f"forecast request lacks columns {missing}; send a frame with columns "
            f"{UID!r} (str) and {H!r} (int), one row per series."
        )
    if requests.empty:
        raise DataValidationError("forecast request has no rows; name at least one series.")
    h = pd.to_numeric(requests[H], errors="coerce")
    if h.isna().any() or (h % 1 != 0).any() or (h < 1).any():
        raise DataValidationError(
            f"forecast request column {H!r} must hold positive integers, got "
            f"{sorted(set(requests[H].astype(str)))[:5]}."
        )
    duplicated = requests[UID][requests[UID].duplicated()].astype(str).unique().tolist()
    if duplicated:
        raise DataValidationError(
            f"forecast request names series {duplicated[:5]} more than once; send one row "
            "per series."
        )


class ForecastPyfunc(PythonModel):
    """MLflow pyfunc model that serves a fitted forecaster.

    Args:
        model: the fitted forecaster; ``None`` when MLflow builds the wrapper and
            ``load_context`` restores it from the artifact.
        levels: quantile levels of the output frame.
        peak: the training's peak-quantile model stored with it, None when the
            training fitted none (the forecast job reads it; ``predict`` does not).
    """

    def __init__(
        self,
        model: SupportsPredict | None = None,
        levels: Levels = (),
        peak: PeakQuantileForecaster | None = None,
    ) -> None:
        self.model = model
        self.levels = tuple(float(level) for level in levels)
        self.peak = peak

    def load_context(self, context: PythonModelContext) -> None:
        """Restore the fitted forecaster, its peak model if any, and the levels."""
        with open(context.artifacts[ARTIFACT_KEY], "rb") as fh:
            self.model = pickle.load(fh)
        peak_path = context.artifacts.get(PEAK_ARTIFACT_KEY)
        if peak_path is not None:
            with open(peak_path, "rb") as fh:
                self.peak = pickle.load(fh)
        self.levels = tuple(float(level) for level in context.model_config["levels"])

    def predict(
        self,
        context: PythonModelContext | None,
        model_input: pd.DataFrame,
        params: dict[str, Any] | None = None,
    ) -> pd.DataFrame:
        """Forecast the series of ``model_input`` (columns ``unique_id``, ``h``)."""
        if self.model is None:
            raise DataValidationError("ForecastPyfunc has no model: load it through MLflow.")
        return forecast_requests(self.model, model_input, self.levels)


def default_input_example(model: SupportsPredict, levels: Levels, n: int = 3) -> pd.DataFrame:
    """Return a request for one step of the model's first ``n`` series."""
    if isinstance(model, SupportsRestriction):
        ids = list(model.describe())[:n]  # no forecast of every series just for the ids
    else:
        ids = list(pd.unique(model.predict(1, levels)[UID].astype(str)))[:n]
    return pd.DataFrame({UID: pd.Series(ids, dtype=str), H: pd.Series([1] * len(ids))})


def log_forecaster(
    model: SupportsPredict,
    *,
    levels: Levels,
    name: str = "model",
    input_example: pd.DataFrame | None = None,
    peak: PeakQuantileForecaster | None = None,
) -> ModelInfo:
    """Log a fitted forecaster as a pyfunc model into MLflow's active run.

    Args:
        model: the fitted forecaster (pickled with cloudpickle).
        levels: quantile levels the served model outputs.
        name: the logged model's name within the run.
        peak: the training's peak-quantile model, stored as a second artifact of the
            same logged model (so it is registered, versioned and copied as
            last-known-good together with the champion).
        input_example: a request frame (``unique_id``, ``h``); defaults to one step of
            the model's first three series. The signature is inferred from it and the
            model's answer to it.

    Returns:
        MLflow's ``ModelInfo``; ``model_uri`` is what ``registry.register`` takes.
    """
    example = default_input_example(model, levels) if input_example is None else input_example
    output = forecast_requests(model, example, levels)
    with warnings.catch_warnings():
        # MLflow hints that integer columns cannot hold missing values; ``h`` never may.
        warnings.filterwarnings("ignore", message=".*integer column", category=UserWarning)
        signature = infer_signature(example, output)
    with tempfile.TemporaryDirectory() as tmp:
        pickled = Path(tmp) / "forecaster.pkl"
        with pickled.open("wb") as fh:
            cloudpickle.dump(model, fh)
        artifacts = {ARTIFACT_KEY: str(pickled)}
        if peak is not None:
            peak_file = Path(tmp) / "peak.pkl"
            with peak_file.open("wb") as fh:
                cloudpickle.dump(peak, fh)
            artifacts[PEAK_ARTIFACT_KEY] = str(peak_file)
        entry = Path(tmp) / "forecast_model.py"
        entry.write_text(_ENTRY_CODE)
        info: ModelInfo = mlflow.pyfunc.log_model(
            name=name,
            python_model=str(entry),
            artifacts=artifacts,
            model_config={"levels": [float(level) for level in levels]},
            signature=signature,
            input_example=example,
            pip_requirements=_pinned_requirements(),
        )
    return info


def load_bundle(path: str | Path) -> tuple[SupportsPredict, PeakQuantileForecaster | None]:
    """Load the fitted forecaster and its peak model (None if it has none) from ``path``."""
    loaded = mlflow.pyfunc.load_model(str(path))
    wrapper = loaded.unwrap_python_model()
    if not isinstance(wrapper, ForecastPyfunc) or wrapper.model is None:
        raise DataValidationError(f"{path} is not a Foresight forecaster pyfunc model.")
    peak = getattr(wrapper, "peak", None)
    if peak is not None and not isinstance(peak, PeakQuantileForecaster):
        raise DataValidationError(f"{path} holds a peak artifact that is not a peak model.")
    return wrapper.model, peak


def _pinned_requirements() -> list[str]:
    pins = []
    for dist in _REQUIREMENTS:
        try:
            pins.append(f"{dist}=={version(dist)}")
        except PackageNotFoundError:
            continue
    return pins
