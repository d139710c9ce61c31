"""The scheduled jobs: ingest, train, forecast, evaluate and publish (docs/jobs.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipelines.jobs.report import JobReport, Outcome

if TYPE_CHECKING:
    from pipelines.jobs.registry import run_job

__all__ = ["JobReport", "Outcome", "run_job"]
_LAZY = frozenset({"run_job"})


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from pipelines.jobs import registry

        return getattr(registry, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
