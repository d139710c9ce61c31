"""The model registry: versions, the ``champion`` alias, and loading the champion.

Details: docs/forecasting.md, "Notes from the code", `forecaster/registry.py`."""

from __future__ import annotations

import logging
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

from mlflow.exceptions import MlflowException

from forecaster.exceptions import TrackingError
from forecaster.last_known_good import (
    LKG_DIR,
    copy_version,
    export_last_known_good,
    last_known_good_dir,
    read_metadata,
)
from forecaster.model_files import MODELS_URI, download_model, resolve_model_uri
from forecaster.peak.model import PeakQuantileForecaster
from forecaster.pyfunc import SupportsPredict, load_bundle
from forecaster.tracking import TrackingConfig, tracking_errors

logger = logging.getLogger(__name__)

CHAMPION = "champion"
_NOT_FOUND = "RESOURCE_DOES_NOT_EXIST"
_NO_CHAMPION = frozenset({_NOT_FOUND, "INVALID_PARAMETER_VALUE"})
"""Error codes of a missing registered model or alias (not of a failing registry)."""
PROBE_TIMEOUT_S = 3.0
"""Seconds to wait for a TCP connection to an MLflow server before serving the copy."""
_MAX_TAG_LENGTH = 5000


class PromotionDecision(Protocol):
    """What the promotion gate decided about a challenger."""

    @property
    def promote(self) -> bool:
        """True when the challenger should become champion."""
        ...

    @property
    def reason(self) -> str:
        """Why, in words a reviewer understands."""
        ...


@dataclass(frozen=True)
class LoadedModel:
    """A champion ready to serve and where it came from.

    Attributes:
        source: ``registry`` or ``last_known_good`` (the registry failed or had no
            champion).
        reason: why the last-known-good copy was used; empty for the registry.
        peak: the peak-quantile model trained and registered with it; None when that
            training fitted none (the forecast job then stores per-horizon rows only).
    """

    model: SupportsPredict
    version: str
    source: Literal["registry", "last_known_good"]
    reason: str = ""
    peak: PeakQuantileForecaster | None = None


def register(
    model_uri: str,
    name: str,
    *,
    tracking: TrackingConfig,
    run_id: str | None = None,
    tags: dict[str, str] | None = None,
) -> str:
    """Register a logged model as a new version of ``name`` (created if missing).

    Args:
        model_uri: the logged model, e.g. ``ModelInfo.model_uri`` (``models:/m-...``).
        run_id: the training run, linked from the version in the UI.
    """
    client = tracking.client()
    source, model_id = model_uri, None
    match = MODELS_URI.match(model_uri)
    with tracking_errors(tracking.tracking_uri, f"register model {name!r}"):
        if match is not None and match["alias"] is None and match["version"] is None:
            # A logged model (models:/<model_id>). MLflow's stores resolve such sources
            # against the global tracking URI, so resolve it here with our client.
            logged = client.get_logged_model(match["name"])
            source, model_id = logged.artifact_location, logged.model_id
            run_id = run_id or logged.source_run_id
        elif match is not None:
            source = resolve_model_uri(model_uri, tracking=tracking)
        try:
            client.get_registered_model(name)
        except MlflowException as exc:
            if exc.error_code != _NOT_FOUND:
                raise
            client.create_registered_model(
                name, description="Foresight forecaster; serving uses the @champion alias."
            )
        version = client.create_model_version(
            name, source, run_id=run_id, tags=tags, model_id=model_id if run_id else None
        )
    return str(version.version)


def champion_version(name: str, *, tracking: TrackingConfig) -> str | None:
    """Return the version the ``champion`` alias points to, or None if there is none."""
    with tracking_errors(tracking.tracking_uri, f"read the champion of {name!r}"):
        client = tracking.client()
        try:
            registered = client.get_registered_model(name)
        except MlflowException as exc:
            if exc.error_code == _NOT_FOUND:
                return None
            raise
    aliases: dict[str, Any] = registered.aliases or {}
    version = aliases.get(CHAMPION)
    return None if version is None else str(version)


def promote(
    name: str, version: str, decision: PromotionDecision, *, tracking: TrackingConfig
) -> bool:
    """Apply the promotion gate's decision to a model version.

    The decision and its reason are recorded as tags of ``version`` either way; the
    ``champion`` alias moves to it only when ``decision.promote`` is true.

    Returns:
        Whether the alias moved.
    """
    client = tracking.client()
    previous = champion_version(name, tracking=tracking)
    with tracking_errors(tracking.tracking_uri, f"promote {name!r} version {version}"):
        client.set_model_version_tag(
            name, version, "foresight.promotion", "promoted" if decision.promote else "rejected"
        )
        client.set_model_version_tag(
            name, version, "foresight.promotion_reason", decision.reason[:_MAX_TAG_LENGTH]
        )
        if decision.promote:
            client.set_model_version_tag(
                name, version, "foresight.previous_champion", previous or "none"
            )
            client.set_registered_model_alias(name, CHAMPION, version)
    logger.info(
        "model %s version %s %s: %s",
        name,
        version,
        "promoted to champion" if decision.promote else "not promoted",
        decision.reason,
    )
    return decision.promote


def load_champion(
    name: str,
    *,
    models_dir: Path,
    tracking: TrackingConfig,
    refresh_last_known_good: bool = True,
) -> LoadedModel:
    """Load ``models:/<name>@champion``, falling back to the last-known-good copy.

    Args:
        name: the registered model's name.
        models_dir: where last-known-good copies live.
        refresh_last_known_good: after a registry load, make it the local copy too.

    Raises:
        TrackingError: neither the registry nor a last-known-good copy has a champion.
    """
    try:
        return _load_from_registry(name, models_dir, tracking, refresh_last_known_good)
    except TrackingError as exc:
        problem = str(exc)
    lkg = last_known_good_dir(models_dir, name)
    if lkg is None:
        raise TrackingError(
            f"no champion for {name!r}: {problem}; and no last-known-good copy under "
            f"{models_dir / LKG_DIR}. Train and promote a model first."
        )
    try:
        metadata = read_metadata(lkg)
        model, peak = _load(lkg / "model")
    except TrackingError as exc:
        raise TrackingError(
            f"no champion for {name!r}: {problem}; and the last-known-good copy is unusable: {exc}"
        ) from exc
    loaded = LoadedModel(
        model=model,
        peak=peak,
        version=str(metadata["version"]),
        source="last_known_good",
        reason=(
            f"{problem}; serving last-known-good version {metadata['version']} "
            f"exported at {metadata.get('exported_at', '?')}"
        ),
    )
    logger.warning("model %s: %s", name, loaded.reason)
    return loaded


def _load_from_registry(
    name: str, models_dir: Path, tracking: TrackingConfig, refresh: bool
) -> LoadedModel:
    uri = f"models:/{name}@{CHAMPION}"
    check_reachable(tracking)
    with tracking_errors(tracking.tracking_uri, f"load {uri}"):
        client = tracking.client()
        try:
            found = client.get_model_version_by_alias(name, CHAMPION)
        except MlflowException as exc:
            if exc.error_code not in _NO_CHAMPION:
                raise
            raise TrackingError(f"the registry has no {uri}") from exc
    version = str(found.version)
    current = last_known_good_dir(models_dir, name)
    if current is not None and copy_version(current) == version:
        # Registered versions are immutable: the local copy is this very champion,
        # unless it was damaged on disk; then the registry's files replace it below.
        try:
            return _loaded(current / "model", version)
        except TrackingError as exc:
            logger.warning("model %s: repairing the last-known-good copy: %s", name, exc)
            refresh = True
    version_uri = f"models:/{name}/{version}"
    if refresh:
        metadata = {"name": name, "version": version, "run_id": found.run_id or "", "source": uri}
        copy = export_last_known_good(version_uri, models_dir, metadata, tracking=tracking)
        return _loaded(copy / "model", version)
    with tempfile.TemporaryDirectory() as tmp:
        path = download_model(version_uri, Path(tmp), tracking=tracking)
        return _loaded(path, version)


def _loaded(path: Path, version: str) -> LoadedModel:
    model, peak = _load(path)
    return LoadedModel(model, version, "registry", peak=peak)


def check_reachable(tracking: TrackingConfig, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Fail within ``timeout_s`` when an MLflow tracking server does not accept connections.

    Local stores (``sqlite:``, ``file:``, database URLs) are not probed.

    Raises:
        TrackingError: nothing accepts connections at the server's host and port.
    """
    parts = urlsplit(tracking.tracking_uri)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        with socket.create_connection((parts.hostname, port), timeout=timeout_s):
            pass
    except (OSError, ValueError) as exc:
        raise TrackingError(
            f"the MLflow tracking server at {tracking.safe_uri} is unreachable "
            f"({type(exc).__name__}: {exc}); check that it runs and that "
            "the tracking URI (mlflow_tracking_uri) is right"
        ) from exc


def _load(path: Path) -> tuple[SupportsPredict, PeakQuantileForecaster | None]:
    try:
        return load_bundle(path)
    # Unpickling a model can fail in any way its classes can (a renamed module, an
    # incompatible library): each means this copy cannot serve, so say which one.
    except Exception as exc:
        raise TrackingError(f"model at {path} cannot be loaded: {exc!r}") from exc
