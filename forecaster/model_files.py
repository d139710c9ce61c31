"""A model's files from the registry: a ``models:/`` URI resolved and downloaded.

Details: docs/forecasting.md, "Notes from the code", `forecaster/model_files.py`."""

from __future__ import annotations

import re
from pathlib import Path

import mlflow

from forecaster.tracking import TrackingConfig, tracking_errors

MODELS_URI = re.compile(r"^models:/(?P<name>[^/@]+)(?:@(?P<alias>[^/]+)|/(?P<version>[^/]+))?/?$")
"""``models:/<name>@<alias>``, ``models:/<name>/<version>`` or ``models:/<model_id>``."""


def resolve_model_uri(model_uri: str, *, tracking: TrackingConfig) -> str:
    """Return the artifact location behind a ``models:/`` URI (other URIs unchanged).

    MLflow resolves ``models:/`` URIs against its global registry URI only, so they are
    resolved here with an explicit client and the files fetched from where they are.
    Handles ``models:/<name>@<alias>``, ``models:/<name>/<version>`` and
    ``models:/<model_id>``.
    """
    if not model_uri.startswith("models:/"):
        return model_uri
    match = MODELS_URI.match(model_uri)
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
