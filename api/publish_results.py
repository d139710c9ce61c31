"""One word per object for what a publication did to it, for tables, jobs, logs and metrics.

Details: docs/consumers.md, "Notes from the code", `api/publish_results.py`."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Final, Literal, get_args

from api.consumers.kube_writer import Change

logger = logging.getLogger(__name__)

ObjectResult = Literal[
    "written",
    "deleted",
    "unchanged",
    "would_write",
    "would_delete",
    "planned",
    "skipped",
    "failed",
]
"""``written`` / ``deleted``: persisted; ``would_write`` / ``would_delete``: a dry run the
API server accepted; ``planned``: a dry run without a cluster; ``skipped``: left as it
is on purpose (the reason says why and what to do); ``failed``: the API server refused."""

OBJECT_RESULTS: Final[tuple[ObjectResult, ...]] = get_args(ObjectResult)

PROBLEMS: Final[frozenset[ObjectResult]] = frozenset({"skipped", "failed"})
"""Results an operator must look at."""


def result_of(change: Change) -> ObjectResult:
    """Return the one-word result of one change."""
    if change.action in ("create", "replace"):
        return "would_write" if change.dry_run else "written"
    if change.action == "delete":
        return "would_delete" if change.dry_run else "deleted"
    return _AS_IS[change.action]


_AS_IS: Final[Mapping[str, ObjectResult]] = {
    "unchanged": "unchanged",
    "planned": "planned",
    "skipped": "skipped",
    "failed": "failed",
}


def object_results(changes: Sequence[Change]) -> dict[str, tuple[ObjectResult, str]]:
    """Return ``Kind namespace/name -> (result, reason)`` and log each problem once.

    A skip is logged at WARNING (a deliberate refusal that needs a person), a failure
    at ERROR.
    """
    results: dict[str, tuple[ObjectResult, str]] = {}
    for change in changes:
        result = result_of(change)
        results[change.target] = (result, change.reason)
        if result == "skipped":
            logger.warning("publish: %s skipped: %s", change.target, change.reason)
        elif result == "failed":
            logger.error("publish: %s failed: %s", change.target, change.reason)
    return results


def counts(objects: Mapping[str, str]) -> dict[str, int]:
    """Return how many objects had each result (every result present, zeros included)."""
    found: dict[str, int] = dict.fromkeys(OBJECT_RESULTS, 0)
    for result in objects.values():
        found[result] = found.get(result, 0) + 1
    return found
