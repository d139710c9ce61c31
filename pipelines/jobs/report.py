"""What a job run reports: its outcome in one line plus per-series details."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

Outcome = Literal["ok", "partial", "failed", "skipped"]
"""``partial``: the job ran but some series (named in ``problems``) failed or were rejected."""


@dataclass(frozen=True)
class JobReport:
    """The result of one run of a job.

    Attributes:
        job: the job's name (``ingest``, ``train``, ``forecast``, ``evaluate``, ``publish``).
        outcome: how it went.
        summary: one human line, e.g. ``"ingested 4,032 samples for 9 series"``.
        started_at: when it started (UTC).
        finished_at: when it finished (UTC).
        problems: per series (or per target) what went wrong, for the ``partial`` case.
        details: numbers worth keeping (rows written, MASE...), JSON-ready.
    """

    job: str
    outcome: Outcome
    summary: str
    started_at: datetime
    finished_at: datetime
    problems: dict[str, str] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
