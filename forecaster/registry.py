"""The model registry: versions, the ``champion`` alias, and the last-known-good copy.

Only the promotion gate moves the ``champion`` alias (never the deprecated stages),
and every decision, promoted or not, is recorded on the version it concerns. Serving
loads ``models:/<name>@champion``; each successful load refreshes a local copy under
``models_dir`` so a restart while the registry is down still serves the last known
good champion, and says so.

Last-known-good layout, one directory per registered model::

    <models_dir>/last_known_good/<name>/CURRENT           -> "v3-20240101T000000Z"
    <models_dir>/last_known_good/<name>/v3-20240101T000000Z/model/MLmodel ...
    <models_dir>/last_known_good/<name>/v3-20240101T000000Z/metadata.json

A copy is written to a temporary directory, renamed into place, and only then does
``CURRENT`` (replaced atomically) point at it; a crash at any moment leaves
``CURRENT`` naming a complete copy.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import socket
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

import mlflow
from mlflow.exceptions import MlflowException

from forecaster.exceptions import TrackingError
from forecaster.peak.model import PeakQuantileForecaster
from forecaster.pyfunc import SupportsPredict, load_bundle
from forecaster.tracking import TrackingConfig, tracking_errors

logger = logging.getLogger(__name__)

CHAMPION = "champion"
LKG_DIR = "last_known_good"
_CURRENT = "CURRENT"
_METADATA = "metadata.json"
_REQUIRED_METADATA = ("name", "version", "run_id")
_NOT_FOUND = "RESOURCE_DOES_NOT_EXIST"
_NO_CHAMPION = frozenset({_NOT_FOUND, "INVALID_PARAMETER_VALUE"})
"""Error codes of a missing registered model or alias (not of a failing registry)."""
_STALE_TEMP_SECONDS = 3600
PROBE_TIMEOUT_S = 3.0
"""Seconds to wait for a TCP connection to an MLflow server before serving the copy."""
_MAX_TAG_LENGTH = 5000
_MODELS_URI = re.compile(r"^models:/(?P<name>[^/@]+)(?:@(?P<alias>[^/]+)|/(?P<version>[^/]+))?/?$")


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
        model: the fitted forecaster.
        version: its registered model version.
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
        name: the registered model's name.
        tracking: the registry to use.
        run_id: the training run, linked from the version in the UI.
        tags: version tags.

    Returns:
        The new version number as a string.
    """
    client = tracking.client()
    source, model_id = model_uri, None
    match = _MODELS_URI.match(model_uri)
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
        tracking: the registry to load from.
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
        metadata = _read_metadata(lkg)
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
    if current is not None and _copy_version(current) == version:
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

    MLflow's HTTP client retries a dead server with exponential backoff for minutes
    (``MLFLOW_HTTP_REQUEST_MAX_RETRIES``, a process-wide setting), which would hold
    serving up that long before it fell back to the last-known-good copy. A plain TCP
    connect answers "is anyone there" in milliseconds and needs no TLS or credentials,
    so it cannot mistake a private CA or an auth proxy for an outage. Local stores
    (``sqlite:``, ``file:``, database URLs) are not probed.

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


def export_last_known_good(
    source: str | Path,
    models_dir: Path,
    metadata: dict[str, Any],
    *,
    tracking: TrackingConfig | None = None,
    exported_at: datetime | None = None,
) -> Path:
    """Atomically make a pyfunc model the last-known-good copy of ``metadata['name']``.

    Args:
        source: a local pyfunc model directory, or a model URI to download (which needs
            ``tracking``).
        models_dir: the models directory (copies go under ``last_known_good/``).
        metadata: at least ``name``, ``version`` and ``run_id``; written to
            ``metadata.json`` with ``exported_at`` added.
        tracking: the registry to download ``source`` from when it is a URI.
        exported_at: the export time (default: now, UTC).

    Returns:
        The directory of the new copy (holding ``model/`` and ``metadata.json``).

    Raises:
        TrackingError: the copy or download failed; the previous copy stays current.
    """
    missing = [key for key in _REQUIRED_METADATA if key not in metadata]
    if missing:
        raise ValueError(f"last-known-good metadata lacks {missing}")
    stamp = (exported_at or datetime.now(UTC)).astimezone(UTC)
    root = models_dir / LKG_DIR / _safe_name(str(metadata["name"]))
    root.mkdir(parents=True, exist_ok=True)
    _remove_stale_temps(root)
    previous = last_known_good_dir(models_dir, str(metadata["name"]))
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
    try:
        _copy_model(source, tmp / "model", tracking)
        if not (tmp / "model" / "MLmodel").is_file():
            raise TrackingError(f"{source} is not an MLflow model (no MLmodel file)")
        record = {**metadata, "exported_at": stamp.isoformat()}
        (tmp / _METADATA).write_text(json.dumps(record, indent=2, sort_keys=True, default=str))
        final = root / f"v{metadata['version']}-{stamp:%Y%m%dT%H%M%S%fZ}"
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _write_atomically(root / _CURRENT, final.name)
    _remove_old_copies(root, keep={final.name, previous.name if previous else ""})
    logger.info("last-known-good %s is now version %s", metadata["name"], metadata["version"])
    return final


def last_known_good_dir(models_dir: Path, name: str) -> Path | None:
    """Return the current last-known-good copy of ``name``, or None if there is none."""
    root = models_dir / LKG_DIR / _safe_name(name)
    try:
        current = (root / _CURRENT).read_text().strip()
    except FileNotFoundError:
        return None
    path = root / current
    return path if (path / _METADATA).is_file() else None


def _copy_model(source: str | Path, dest: Path, tracking: TrackingConfig | None) -> None:
    local = Path(source)
    if isinstance(source, Path) or local.is_dir():
        try:
            shutil.copytree(local, dest)
        except (OSError, shutil.Error) as exc:
            raise TrackingError(f"could not copy model {local} to {dest}: {exc}") from exc
        return
    if tracking is None:
        raise ValueError(f"{source!r} is not a local directory; pass tracking= to download it")
    staging = dest.parent / ".download"
    staging.mkdir()
    # download_artifacts nests a directory's files under its base name: move them up.
    os.replace(download_model(str(source), staging, tracking=tracking), dest)
    shutil.rmtree(staging, ignore_errors=True)


def resolve_model_uri(model_uri: str, *, tracking: TrackingConfig) -> str:
    """Return the artifact location behind a ``models:/`` URI (other URIs unchanged).

    MLflow resolves ``models:/`` URIs against its global registry URI only, so they are
    resolved here with an explicit client and the files fetched from where they are.
    Handles ``models:/<name>@<alias>``, ``models:/<name>/<version>`` and
    ``models:/<model_id>``.
    """
    if not model_uri.startswith("models:/"):
        return model_uri
    match = _MODELS_URI.match(model_uri)
    if match is None:
        raise ValueError(f"unsupported model URI {model_uri!r}")
    name, alias, version = match["name"], match["alias"], match["version"]
    client = tracking.client()
    with tracking_errors(tracking.tracking_uri, f"resolve {model_uri}"):
        if alias is not None:
            version = str(client.get_model_version_by_alias(name, alias).version)
        if version is None:
            return str(client.get_logged_model(name).artifact_location)
        return str(client.get_model_version_download_uri(name, version))


def download_model(model_uri: str, dest: Path, *, tracking: TrackingConfig) -> Path:
    """Download a logged or registered model's files into ``dest`` and return their path."""
    location = resolve_model_uri(model_uri, tracking=tracking)
    with tracking_errors(tracking.tracking_uri, f"download {model_uri}"):
        path = mlflow.artifacts.download_artifacts(
            artifact_uri=location,
            dst_path=str(dest),
            tracking_uri=tracking.tracking_uri,
            registry_uri=tracking.tracking_uri,
        )
    return Path(path)


def _load(path: Path) -> tuple[SupportsPredict, PeakQuantileForecaster | None]:
    try:
        return load_bundle(path)
    # Unpickling a model can fail in any way its classes can (a renamed module, an
    # incompatible library): each means this copy cannot serve, so say which one.
    except Exception as exc:
        raise TrackingError(f"model at {path} cannot be loaded: {exc!r}") from exc


def _copy_version(path: Path) -> str | None:
    """The version a last-known-good copy says it holds; None when it cannot tell."""
    try:
        return str(_read_metadata(path)["version"])
    except (TrackingError, KeyError):
        return None


def _read_metadata(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads((path / _METADATA).read_text())
    except (OSError, ValueError) as exc:
        raise TrackingError(f"last-known-good copy {path} is unreadable: {exc}") from exc
    return data


def _write_atomically(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _remove_stale_temps(root: Path) -> None:
    # Leftovers of an export that crashed; an hour old so a concurrent export's
    # temporary directory survives. Copies in use never carry the dot prefix.
    cutoff = datetime.now(UTC).timestamp() - _STALE_TEMP_SECONDS
    for child in root.glob(".tmp-*"):
        if child.stat().st_mtime > cutoff:
            continue
        if child.is_dir():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


def _remove_old_copies(root: Path, keep: set[str]) -> None:
    # The previous copy is kept too: a reader may have resolved CURRENT just before.
    for child in root.iterdir():
        if child.is_dir() and child.name.startswith("v") and child.name not in keep:
            shutil.rmtree(child, ignore_errors=True)


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "_"
