"""The ``publish`` job: compute recommendations and deliver them to their consumers.

The work is the recommendation service's (``api.publishing.publish_once``): the
policy, the ConfigMap and buffers, the webhook outbox. This job only supplies the
store and the clock and turns its outcome into a report. Whether it writes to a
cluster follows ``service.forecast_only`` unless ``apply`` says otherwise.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from forecaster.exceptions import ForesightError
from pipelines.config.settings import Settings
from pipelines.jobs.report import JobReport
from pipelines.jobs.runtime import borrowed_store, finish, utc_now
from pipelines.store import Store

JOB = "publish"
PUBLISHER_MODULE = "api.publishing"
_MAX_TEXT = 300

Publish = Callable[..., Any]
"""``publish_once(settings, store, *, apply, now) -> PublishOutcome``."""


def run_publish(
    settings: Settings,
    *,
    store: Store | None = None,
    now: datetime | None = None,
    apply: bool | None = None,
    publish: Publish | None = None,
) -> JobReport:
    """Publish the current recommendations once.

    Args:
        settings: the deployment's settings.
        store: the store; default the settings' store.
        now: the decision time (default the publisher's clock: the wall clock, or
            the running service's).
        apply: write to the cluster; default ``not service.forecast_only``.
        publish: the publisher; default ``api.publishing.publish_once``.

    Returns:
        ``ok`` with the publisher's outcome in ``details``; ``skipped`` when no
        publisher is installed; ``failed`` when it raised one of Foresight's errors.
    """
    started = utc_now()
    publisher = publish or _default_publisher()
    if publisher is None:
        return finish(JOB, started, "skipped", f"{PUBLISHER_MODULE}.publish_once is not available")
    writes = (not settings.service.forecast_only) if apply is None else apply
    try:
        # Unset, the publisher's own clock decides (the running service's, in serve).
        clock = None if now is None else utc_now(now)
        with borrowed_store(settings, store) as opened:
            outcome = publisher(settings, opened, apply=writes, now=clock)
    except ForesightError as exc:
        return finish(JOB, started, "failed", str(exc))
    details = _as_details(outcome)
    details["applied"] = writes
    count = details.get("recommendations")
    what = f"{count} pool recommendations" if isinstance(count, int) else "recommendations"
    mode = "applied" if writes else "dry run"
    return finish(JOB, started, "ok", f"published {what} ({mode})", details=details)


def _default_publisher() -> Publish | None:
    try:
        module = importlib.import_module(PUBLISHER_MODULE)
    except ImportError:
        return None
    found = getattr(module, "publish_once", None)
    return found if callable(found) else None


def _as_details(outcome: Any) -> dict[str, Any]:
    """A JSON-ready digest of the outcome: plain fields kept, collections counted."""
    if dataclasses.is_dataclass(outcome) and not isinstance(outcome, type):
        fields = {f.name: getattr(outcome, f.name) for f in dataclasses.fields(outcome)}
    elif isinstance(outcome, Mapping):
        fields = {str(key): value for key, value in outcome.items()}
    else:
        return {"outcome": _short(outcome)}
    return {key: _digest(value) for key, value in fields.items()}


def _digest(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _digest(v) if _plain(v) else _short(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_digest(v) for v in value] if all(_plain(v) for v in value) else len(value)
    return _short(value)


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float | str | datetime)


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 3] + "..."
