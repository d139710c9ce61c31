"""The ``publish`` job: compute recommendations and deliver them to their consumers.

Details: docs/jobs.md, "Notes from the code", `pipelines/jobs/publish.py`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

from forecaster.exceptions import ForesightError
from pipelines.config.settings import Settings
from pipelines.jobs.report import JobReport, Outcome
from pipelines.jobs.runtime import borrowed_store, finish, utc_now
from pipelines.store.store import Store

if TYPE_CHECKING:
    from pipelines.scheduler.dispatch import JobRunner

JOB = "publish"
_MAX_TEXT = 300

PublishMode = Literal["apply", "dry_run"]
"""``apply`` writes to the cluster and sends webhooks; ``dry_run`` only plans."""


class Publisher(Protocol):
    """Publishes the recommendation set once (``api.publishing.publish_once``, bound)."""

    def __call__(self, store: Store, *, mode: PublishMode, now: datetime | None) -> object:
        """Publish; write to the cluster only in ``apply`` mode; ``now`` None: its own clock.

        Returns:
            The outcome: a dataclass (or mapping) whose fields become the report's details.
        """
        ...


PublisherLookup = Callable[[], Publisher | None]
"""Returns the publisher to use now; None while there is none (serve: not serving yet)."""


def run_publish(
    settings: Settings,
    *,
    publish: Publisher | None = None,
    store: Store | None = None,
    now: datetime | None = None,
    mode: PublishMode = "dry_run",
) -> JobReport:
    """Publish the current recommendations once.

    Args:
        settings: the deployment's settings.
        publish: the publisher; None (none handed in, or serve's API not started yet)
            skips the run.
        store: the store; default the settings' store.
        now: the decision time (default the publisher's clock: the wall clock, or
            the running service's).
        mode: ``apply`` or ``dry_run`` (the default; the CLI's runner passes ``apply``
            unless ``service.forecast_only``).

    Returns:
        ``ok`` with the publisher's outcome in ``details``; ``skipped`` without a
        publisher; ``failed`` when it raised one of Foresight's errors.
    """
    started = utc_now()
    if publish is None:
        why = "no publisher to publish with (in foresight serve: the API has not started yet)"
        return finish(JOB, started, "skipped", why)
    writes = mode == "apply"
    try:
        # Unset, the publisher's own clock decides (the running service's, in serve).
        clock = None if now is None else utc_now(now)
        with borrowed_store(settings, store) as opened:
            outcome = publish(opened, mode=mode, now=clock)
    except ForesightError as exc:
        return finish(JOB, started, "failed", str(exc))
    details = _as_details(outcome)
    details["applied"] = writes
    count = details.get("recommendations")
    what = f"{count} pool recommendations" if isinstance(count, int) else "recommendations"
    done = "applied" if writes else "dry run"
    objects = _text_map(details.get("objects"))
    problems = _text_map(details.get("problems"))
    summary = f"published {what} ({done})" + _objects_line(objects, problems)
    outcome_of_run: Outcome = "ok"
    if problems:
        through = any(target not in problems for target in objects)
        outcome_of_run = "partial" if through else "failed"
    return finish(JOB, started, outcome_of_run, summary, problems=problems, details=details)


def _text_map(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(key): str(item) for key, item in value.items()}


def _objects_line(objects: Mapping[str, str], problems: Mapping[str, str]) -> str:
    """``: 3 written, 1 skipped (ConfigMap ...: why)``; empty when only planned offline."""
    if not objects or set(objects.values()) == {"planned"}:
        return ""
    tally: dict[str, int] = {}
    for result in objects.values():
        tally[result] = tally.get(result, 0) + 1
    counted = ", ".join(f"{n} {result}" for result, n in sorted(tally.items()))
    named = "; ".join(f"{target} {objects[target]}: {why}" for target, why in problems.items())
    return f": {counted}" + (f" ({named})" if named else "")


def publishing_runner(
    publisher: PublisherLookup, runner: JobRunner, *, mode: PublishMode
) -> JobRunner:
    """Return ``runner`` with its publish job publishing through ``publisher()``.

    The CLI wires it: ``foresight scheduler`` with ``api.publishing.publish_once``
    bound to the settings,
    ``foresight serve`` with a publisher bound to the running service (which is None
    until the app has started: such a publish is ``skipped``, the next one publishes).

    Args:
        publisher: returns the publisher for each run.
        runner: runs every other job (the scheduler's default runner).
        mode: each publish's mode (``apply`` unless ``service.forecast_only``).
    """

    def run(name: str, settings: Settings) -> JobReport:
        if name != JOB:
            return runner(name, settings)
        return run_publish(settings, publish=publisher(), mode=mode)

    return run


def _as_details(outcome: object) -> dict[str, Any]:
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
