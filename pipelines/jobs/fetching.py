"""Fetching every series' window from a source, isolating the series that fail (docs/jobs.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pandas as pd

from forecaster.exceptions import SourceError
from forecaster.types import Progress
from pipelines.jobs.sources import SourcePlan

Window = tuple[datetime, datetime]
"""An inclusive ``(start, end)`` time window."""

_FAILURES_BEFORE_DOWN = 2


class SourceDownError(SourceError):
    """The source failed for every series tried, so the run stops and writes nothing."""


@dataclass
class Fetched:
    """What a run fetched: frames that worked and, per failed series, why."""

    frames: list[pd.DataFrame] = field(default_factory=list)
    problems: dict[str, str] = field(default_factory=dict)


class Fetcher:
    """Fetch series windows from one source, telling a bad series from a dead source.

    Args:
        plan: the source, its queries and step.
        progress: told ``("ingest", series done, series total)``.
    """

    def __init__(self, plan: SourcePlan, progress: Progress) -> None:
        self._plan = plan
        self._progress = progress
        self._probe: tuple[str, Window] | None = None
        self._failures_in_a_row = 0
        self._done = 0
        self._total = 0

    def fetch(self, windows: Mapping[str, Window]) -> Fetched:
        """Fetch every series over its window.

        Raises:
            SourceDownError: the source is unreachable or failing for everything;
                the message names the last series tried and the source's error.
        """
        groups: dict[Window, list[str]] = {}
        for series_id, window in windows.items():
            groups.setdefault(window, []).append(series_id)
        self._total = len(windows)
        result = Fetched()
        self._progress("ingest", 0, self._total)
        for window, series in groups.items():
            try:
                result.frames.append(self._get(series, window))
            except SourceError as exc:
                if len(series) == 1:
                    self._failed(series[0], exc, result)
                    continue
                # Which of them failed? Ask for each alone.
                for one in series:
                    try:
                        result.frames.append(self._get([one], window))
                    except SourceError as own:
                        self._failed(one, own, result)
        return result

    def _get(self, series: Sequence[str], window: Window) -> pd.DataFrame:
        queries = {one: self._plan.queries[one] for one in series}
        frame = self._plan.source.fetch(queries, window[0], window[1], self._plan.step)
        self._failures_in_a_row = 0
        if self._probe is None:
            self._probe = (series[0], window)
        self._done += len(series)
        self._progress("ingest", self._done, self._total)
        return frame

    def _failed(self, series_id: str, error: SourceError, result: Fetched) -> None:
        result.problems[series_id] = str(error)
        self._failures_in_a_row += 1
        self._done += 1
        self._progress("ingest", self._done, self._total)
        if self._probe is not None:
            probe_id, probe_window = self._probe
            start = max(probe_window[0], probe_window[1] - self._plan.step)
            try:
                self._plan.source.fetch(
                    {probe_id: self._plan.queries[probe_id]},
                    start,
                    probe_window[1],
                    self._plan.step,
                )
            except SourceError as exc:
                raise SourceDownError(
                    f"{self._plan.name} failed for {series_id!r} and then for {probe_id!r}, "
                    f"which worked earlier in this run: {exc}"
                ) from exc
        elif self._failures_in_a_row >= _FAILURES_BEFORE_DOWN:
            raise SourceDownError(
                f"{self._plan.name} failed for the first {self._failures_in_a_row} series "
                f"tried; last error: {error}"
            ) from error


def step_after(stamp: pd.Timestamp) -> datetime:
    """The first instant after ``stamp`` a fetch should start at (sources align it)."""
    return (stamp + timedelta(milliseconds=1)).to_pydatetime()
