"""MLflow experiment tracking of training runs (docs/forecasting.md)."""

from __future__ import annotations

import json
import logging
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import mlflow
import pandas as pd
from mlflow import MlflowClient
from mlflow.entities import Metric, Param
from mlflow.exceptions import MlflowException
from mlflow.models.model import ModelInfo
from sqlalchemy.exc import SQLAlchemyError

from forecaster.exceptions import TrackingError
from forecaster.run_metrics import (
    HORIZON_COLUMN,
    SCORE_KEYS,
    describe_pools,
    metric_key,
    summary_metrics,
)
from forecaster.types import Levels

__all__ = [  # the metric keys live in forecaster.run_metrics; re-exported from here
    "HORIZON_COLUMN",
    "SCORE_KEYS",
    "TrackingConfig",
    "TrainingRun",
    "describe_pools",
    "ensure_experiment",
    "metric_key",
    "start_training_run",
    "summary_metrics",
]

logger = logging.getLogger(__name__)

KIND_TAG = "foresight.kind"
_MAX_PARAM_LENGTH = 6000
_MAX_BATCH_METRICS = 1000
EXPERIMENT_TAGS: dict[str, str] = {
    # MLflow 3 opens an experiment of unknown kind on its GenAI overview (traces,
    # "No data available"); a model-development experiment opens on its runs.
    "mlflow.experimentKind": "custom_model_development",
    "mlflow.note.content": (
        "Foresight trainings: one run per training (scores per model and horizon, "
        "backtest plots per pool, the champion per series), with one child run per "
        "pool whose metrics are each series' champion scores, to sort and compare."
    ),
}
"""Tags of the deployment's experiment, set when it is created (or first opened)."""
POOLS_TAG_CHARS = 1000
"""Longest ``foresight.pools`` tag; MLflow truncates tags past 8,000 with a warning."""


@dataclass(frozen=True)
class TrackingConfig:
    """Where runs and registered models live.

    Args:
        tracking_uri: MLflow tracking and registry URI (``sqlite:///...`` or ``http://...``).
        experiment_name: the deployment's experiment; created on first use.
        artifact_location: artifact root of a newly created experiment; ``None`` lets the
            server decide (the embedded default points it under ``models/``).
    """

    tracking_uri: str
    experiment_name: str = "foresight"
    artifact_location: str | None = None

    @property
    def safe_uri(self) -> str:
        """The tracking URI without credentials, fit for messages and logs."""
        return redact_uri(self.tracking_uri)

    def client(self) -> MlflowClient:
        """Return a client bound to this tracking and registry URI (no global state)."""
        return MlflowClient(tracking_uri=self.tracking_uri, registry_uri=self.tracking_uri)


def redact_uri(uri: str) -> str:
    """Return ``uri`` without ``user:password@`` and without its query string."""
    parts = urlsplit(uri)
    if not parts.netloc:
        return uri
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")


@contextmanager
def tracking_errors(uri: str, action: str) -> Iterator[None]:
    """Translate MLflow and I/O errors raised inside the block into ``TrackingError``.

    Args:
        uri: the tracking URI in use (credentials are removed from the message).
        action: what was being done, e.g. ``"start a training run"``.
    """
    try:
        yield
    # A local store's database is read through SQLAlchemy, whose errors (a corrupt or
    # locked SQLite file) MLflow lets through untranslated.
    except (MlflowException, OSError, SQLAlchemyError) as exc:
        # MLflow's own message repeats the URI with its credentials: scrub it.
        detail = _USERINFO.sub("", str(exc).replace(uri, redact_uri(uri)))
        raise TrackingError(
            f"could not {action} at MLflow tracking URI {redact_uri(uri)}: {detail}"
        ) from exc


@contextmanager
def _scoped_tracking_uri(uri: str) -> Iterator[None]:
    # mlflow.pyfunc.log_model only logs into the fluent active run of the global
    # tracking URI; set it for the run's duration and restore the caller's setting.
    previous = mlflow.get_tracking_uri() if mlflow.is_tracking_uri_set() else None  # type: ignore[no-untyped-call]
    mlflow.set_tracking_uri(uri)
    try:
        yield
    finally:
        mlflow.set_tracking_uri(previous)  # type: ignore[arg-type]  # None unsets it


class TrainingRun:
    """An open MLflow run of one training; created by :func:`start_training_run`."""

    def __init__(self, config: TrackingConfig, client: MlflowClient, run_id: str) -> None:
        self.config = config
        self.run_id = run_id
        self._client = client

    def _errors(self, action: str) -> AbstractContextManager[None]:
        return tracking_errors(self.config.tracking_uri, action)

    def log_params(self, params: Mapping[str, object]) -> None:
        """Log hyperparameters and settings; values are stringified and truncated."""
        batch = [Param(metric_key(str(k)), str(v)[:_MAX_PARAM_LENGTH]) for k, v in params.items()]
        with self._errors("log parameters"):
            self._client.log_batch(self.run_id, params=batch)

    def log_metrics(self, metrics: Mapping[str, float], step: int = 0) -> None:
        """Log numeric metrics (keys are used as given, so build them with ``metric_key``)."""
        self.log_steps((key, step, value) for key, value in metrics.items())

    def log_steps(self, values: Iterable[tuple[str, int, float]]) -> None:
        """Log metric values at steps: ``(key, step, value)``, e.g. one per backtest window.

        A key logged at several steps is one line in the MLflow UI (x: the step), where
        one value per key draws a chart of one point.
        """
        now = int(pd.Timestamp.now(tz="UTC").timestamp() * 1000)
        batch = [Metric(key, float(value), now, int(step)) for key, step, value in values]
        with self._errors("log metrics"):
            for start in range(0, len(batch), _MAX_BATCH_METRICS):
                chunk = batch[start : start + _MAX_BATCH_METRICS]
                self._client.log_batch(self.run_id, metrics=chunk)

    def log_table(self, name: str, frame: pd.DataFrame) -> None:
        """Log a small frame as a JSON table ``name`` (the MLflow UI shows it as a table)."""
        with self._errors(f"log {name}"):
            self._client.log_table(self.run_id, data=frame, artifact_file=name)

    def set_description(self, text: str) -> None:
        """Set the run's description: the note the MLflow UI shows atop the run page."""
        self.set_tags({"mlflow.note.content": text})

    def log_frame(self, name: str, frame: pd.DataFrame) -> None:
        """Log a frame as an artifact; ``name`` ends in ``.csv`` or ``.parquet``."""
        suffix = Path(name).suffix
        if suffix not in {".csv", ".parquet"}:
            raise ValueError(f"artifact name {name!r} must end in .csv or .parquet")
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / Path(name).name
            if suffix == ".csv":
                frame.to_csv(path, index=False)
            else:
                frame.to_parquet(path, index=False)
            self._log_file(path, Path(name).parent)

    def log_file(self, path: Path, name: str) -> None:
        """Log an existing file as the artifact ``name`` (its own file name is ignored)."""
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / Path(name).name
            shutil.copyfile(path, copy)
            self._log_file(copy, Path(name).parent)

    def log_json(self, name: str, obj: Any) -> None:
        """Log a JSON-serialisable object as an artifact file ``name``."""
        with self._errors(f"log {name}"):
            self._client.log_text(self.run_id, json.dumps(obj, indent=2, sort_keys=True), name)

    def log_champions(self, champions: Mapping[str, str]) -> None:
        """Record each series' champion model as ``champions.json`` and summary tags.

        Tags the run with the series count, the pools (the ``<pool>`` part of
        ``<pool>/<signal>`` ids) and how many series each model family won.
        """
        self.log_json("champions.json", dict(champions))
        wins = Counter(champions.values())
        self.set_tags(
            {
                "foresight.series_count": str(len(champions)),
                "foresight.pools": describe_pools(champions, max_chars=POOLS_TAG_CHARS),
                "foresight.champion_wins": json.dumps(dict(wins.most_common())),
            }
        )

    @contextmanager
    def child_run(self, run_name: str, tags: Mapping[str, str]) -> Iterator[TrainingRun]:
        """Open a run nested under this one (the MLflow UI lists it below its parent)."""
        with self._errors("start a child run"):
            parent = self._client.get_run(self.run_id)
            child = self._client.create_run(
                parent.info.experiment_id,
                run_name=run_name,
                tags={"mlflow.parentRunId": self.run_id, **tags},
            )
        status = "FAILED"
        try:
            yield TrainingRun(self.config, self._client, child.info.run_id)
            status = "FINISHED"
        finally:
            with self._errors("end a child run"):
                self._client.set_terminated(child.info.run_id, status=status)

    def set_tags(self, tags: Mapping[str, object]) -> None:
        """Set run tags (shown and searchable in the MLflow UI)."""
        with self._errors("set run tags"):
            for key, value in tags.items():
                self._client.set_tag(self.run_id, key, str(value))

    def log_forecaster(
        self,
        model: Any,
        *,
        levels: Levels,
        name: str = "model",
        input_example: pd.DataFrame | None = None,
        peak: Any = None,
    ) -> ModelInfo:
        """Log a fitted forecaster as a pyfunc model of this run (see ``forecaster.pyfunc``).

        ``peak``: the training's peak-quantile model, stored in the same logged model.
        """
        from forecaster.pyfunc import log_forecaster

        with self._errors("log the model"):
            return log_forecaster(
                model, name=name, levels=levels, input_example=input_example, peak=peak
            )

    def _log_file(self, path: Path, artifact_dir: Path) -> None:
        subdir = None if str(artifact_dir) in {"", "."} else artifact_dir.as_posix()
        with self._errors(f"log artifact {path.name}"):
            self._client.log_artifact(self.run_id, str(path), subdir)


def ensure_experiment(config: TrackingConfig, client: MlflowClient | None = None) -> str:
    """Return the id of the configured experiment, creating it when it does not exist."""
    client = client or config.client()
    with tracking_errors(config.tracking_uri, f"open experiment {config.experiment_name!r}"):
        experiment = client.get_experiment_by_name(config.experiment_name)
        if experiment is None:
            experiment_id = str(
                client.create_experiment(
                    config.experiment_name,
                    artifact_location=config.artifact_location,
                    tags=EXPERIMENT_TAGS,
                )
            )
        else:
            _warn_if_local_artifacts(config, str(experiment.artifact_location or ""))
            experiment_id = str(experiment.experiment_id)
            for key, value in EXPERIMENT_TAGS.items():
                if key not in experiment.tags:
                    client.set_experiment_tag(experiment_id, key, value)
        return experiment_id


def runs_view_url(ui_address: str, experiment_id: str) -> str:
    """The MLflow UI page listing an experiment's training runs.

    MLflow 3's UI opens in its GenAI mode (traces, "No data available") unless the
    address names the model-training mode, which shows the runs table.
    """
    base = ui_address.rstrip("/")
    return f"{base}/#/experiments/{experiment_id}/runs?workflowType=machine_learning"


def _warn_if_local_artifacts(config: TrackingConfig, location: str) -> None:
    # An experiment created before its tracking server proxied artifacts keeps the
    # trainer's local directory: runs still log there, and other machines cannot load
    # the models. MLflow cannot move an experiment's location; say how to fix it.
    if is_tracking_server(config.tracking_uri) and urlsplit(location).scheme in ("", "file"):
        logger.warning(
            "experiment %r at %s stores artifacts at %s, a local path other machines "
            "cannot read; rename or delete it and train again so the server creates "
            "it under mlflow-artifacts:/ (see docs/deploy.md)",
            config.experiment_name,
            config.safe_uri,
            location,
        )


@contextmanager
def start_training_run(
    config: TrackingConfig,
    *,
    run_name: str,
    tags: Mapping[str, str] | None = None,
    description: str | None = None,
) -> Iterator[TrainingRun]:
    """Open a training run; it ends FINISHED, or FAILED when the block raises.

    The run is also MLflow's active run for the block (so ``log_forecaster`` attaches
    the model to it) and the global tracking URI is restored afterwards. Do not open
    two training runs at once in one process.

    Args:
        tags: extra run tags; ``foresight.kind=train`` is always set.
        description: the run's note in the MLflow UI.
    """
    client = config.client()
    experiment_id = ensure_experiment(config, client)
    all_tags = {KIND_TAG: "train", **(tags or {})}
    with _scoped_tracking_uri(config.tracking_uri):
        with tracking_errors(config.tracking_uri, "start a training run"):
            active = mlflow.start_run(
                experiment_id=experiment_id,
                run_name=run_name,
                tags=all_tags,
                description=description,
            )
        status = "FAILED"
        try:
            yield TrainingRun(config, client, active.info.run_id)
            status = "FINISHED"
        finally:
            with tracking_errors(config.tracking_uri, "end the training run"):
                mlflow.end_run(status=status)


def is_tracking_server(uri: str) -> bool:
    """Whether ``uri`` names an MLflow tracking server (``http(s)://``), not a local store."""
    return urlsplit(uri).scheme in ("http", "https")
