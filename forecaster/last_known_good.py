"""The last-known-good copy of the champion, kept under ``models_dir`` (docs/forecasting.md)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from forecaster.exceptions import TrackingError
from forecaster.model_files import download_model
from forecaster.tracking import TrackingConfig

logger = logging.getLogger(__name__)

LKG_DIR = "last_known_good"
_CURRENT = "CURRENT"
_METADATA = "metadata.json"
_REQUIRED_METADATA = ("name", "version", "run_id")
_STALE_TEMP_SECONDS = 3600


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


def copy_version(path: Path) -> str | None:
    """The version a last-known-good copy says it holds; None when it cannot tell."""
    try:
        return str(read_metadata(path)["version"])
    except (TrackingError, KeyError):
        return None


def read_metadata(path: Path) -> dict[str, Any]:
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
