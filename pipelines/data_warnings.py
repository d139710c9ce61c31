"""Each data warning once per run, however many commands the run has (docs/jobs.md)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from pathlib import Path
from typing import Final

logger = logging.getLogger(__name__)

RUN_ID_ENV: Final = "FORESIGHT_RUN_ID"
"""The environment variable that names a run of several commands."""
STAMP_FILE: Final = ".data-warnings.json"
"""The stamp, in the data directory: the run's id and the keys of the warnings said."""

_said: set[tuple[Path, str]] = set()
_guard = threading.Lock()


def warning_key(source: Path, text: str) -> str:
    """A short digest of the data file (path, size, modification time) and the text."""
    stat = source.stat()
    identity = f"{source.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\0{text}"
    return hashlib.sha256(identity.encode()).hexdigest()[:16]


def first_time(data_dir: Path, key: str) -> bool:
    """Whether warning ``key`` is yet unsaid in this run; it counts as said from now on.

    Args:
        data_dir: the settings' data directory (the stamp lives there).
    """
    with _guard:
        if (data_dir, key) in _said:
            return False
        _said.add((data_dir, key))
    run = os.environ.get(RUN_ID_ENV, "").strip()
    if not run:
        return True
    with _guard:
        return _mark(data_dir / STAMP_FILE, run, key)


def _mark(path: Path, run: str, key: str) -> bool:
    said = _said_in(path, run)
    if key in said:
        return False
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"run": run, "said": [*said, key]}))
    except OSError as exc:
        # Saying a warning twice is better than failing the command over a stamp.
        logger.debug("could not write %s: %s", path, exc)
    return True


def _said_in(path: Path, run: str) -> list[str]:
    """The keys said in ``run`` by an earlier command (none for another run's stamp)."""
    try:
        stamp = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(stamp, dict) or stamp.get("run") != run:
        return []
    said = stamp.get("said")
    return [str(key) for key in said] if isinstance(said, list) else []
