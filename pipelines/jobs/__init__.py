"""The scheduled jobs: ingest, train, forecast, evaluate and publish.

Each job is a plain function ``run_<name>(settings) -> JobReport`` in its own module,
callable from the CLI, the scheduler or a test alike; :func:`run_job` runs one by name.

``run_job`` is loaded on first use: it pulls in every job's
dependencies (MLflow, the models), which code that only needs :class:`JobReport`
(the scheduler's bookkeeping, ``foresight jobs``) should not pay for.
"""

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
