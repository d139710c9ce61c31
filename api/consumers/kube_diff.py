"""What differs between an object in the cluster and the one Foresight wants there.

Details: docs/consumers.md, "Notes from the code", `api/consumers/kube_diff.py`."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, Final

from api.consumers.k8s import Manifest

_WHOLE: Final = frozenset({".data"})
"""Paths compared whole, not as a subset."""

_METADATA_KEYS: Final = ("labels", "annotations")
"""The metadata Foresight sets; the rest belongs to the API server."""

MAX_LINES: Final = 40


def differences(existing: Manifest, desired: Manifest, *, limit: int = MAX_LINES) -> list[str]:
    """Return ``path: live -> wanted`` lines for what ``desired`` would change.

    Args:
        existing: the live object as the API server returned it.
        limit: the most lines returned (a last line says how many were left out).

    Returns:
        An empty list when writing ``desired`` would change nothing Foresight sets.
    """
    lines: list[str] = []
    live_meta = existing.get("metadata") or {}
    want_meta = desired.get("metadata") or {}
    for key in _METADATA_KEYS:
        if key in want_meta:
            _compare(live_meta.get(key), want_meta[key], f".metadata.{key}", lines, subset=False)
    for key, wanted in desired.items():
        if key in ("metadata", "status", "apiVersion", "kind"):
            continue
        path = f".{key}"
        _compare(existing.get(key), wanted, path, lines, subset=path not in _WHOLE)
    if len(lines) > limit:
        return [*lines[:limit], f"... and {len(lines) - limit} more differences"]
    return lines


def _compare(live: Any, wanted: Any, path: str, out: list[str], *, subset: bool) -> None:
    if isinstance(wanted, Mapping) and isinstance(live, Mapping):
        for key, value in wanted.items():
            _compare(live.get(key), value, f"{path}.{key}", out, subset=subset)
        if not subset:
            out.extend(
                f"{path}.{key}: {_show(live[key])} -> (removed)"
                for key in live
                if key not in wanted
            )
        return
    if isinstance(wanted, list) and isinstance(live, list) and len(wanted) == len(live):
        for index, (a, b) in enumerate(zip(live, wanted, strict=True)):
            _compare(a, b, f"{path}[{index}]", out, subset=subset)
        return
    # bool is an int in Python but not in JSON: True must not equal 1.
    if live == wanted and type(live) is type(wanted):
        return
    if isinstance(live, str) and isinstance(wanted, str) and ("\n" in live or "\n" in wanted):
        diff = difflib.unified_diff(live.splitlines(), wanted.splitlines(), lineterm="", n=1)
        out.append(f"{path}:")
        out.extend(f"  {line}" for line in list(diff)[2:])
        return
    out.append(f"{path}: {_show(live)} -> {_show(wanted)}")


def _show(value: Any) -> str:
    if value is None:
        return "(absent)"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
