"""The ``ingest`` job: new samples of every pool signal into the store, plus demand.

Details: docs/jobs.md, "Notes from the code", `pipelines/jobs/ingest.py`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta

import pandas as pd

from forecaster.exceptions import ConfigError, ForesightError
from forecaster.types import DS, UID, Progress
from pipelines.config.pools import PoolsConfig
from pipelines.config.pools_file import load_pools
from pipelines.config.settings import Settings
from pipelines.jobs.cleaning import clean_samples
from pipelines.jobs.fetching import Fetcher, SourceDownError, Window, step_after
from pipelines.jobs.report import JobReport
from pipelines.jobs.runtime import borrowed_store, finish, no_progress, outcome_of, utc_now
from pipelines.jobs.sources import SourcePlan, source_plan
from pipelines.sources.protocol import MetricSource
from pipelines.store.store import Store

JOB = "ingest"
BACKFILL_JOB = "backfill"
_EVERYTHING = pd.Timestamp("1970-01-01", tz="UTC").to_pydatetime()


def run_ingest(
    settings: Settings,
    *,
    store: Store | None = None,
    source: MetricSource | None = None,
    queries: Mapping[str, str] | None = None,
    pools: PoolsConfig | None = None,
    now: datetime | None = None,
    progress: Progress | None = None,
) -> JobReport:
    """Fetch what is new of every series since its last stored sample, and store it.

    Args:
        settings: the deployment's settings (source, store, pools file).
        store: the store to write to; default the settings' ``store_url``.
        source: the source to read; default Prometheus when ``prometheus.url`` is
            set, else the sample file.
        queries: series id -> query, instead of the pools' signals.
        pools: the pools, instead of reading ``pools_file``.
        now: the end of the windows fetched (default the wall clock).
        progress: told ``("ingest", series done, series total)``.

    Returns:
        ``ok``; ``partial`` naming each series that failed, was rejected or vanished
        (the others are stored); ``failed`` with nothing written when the source or
        store is down or the configuration is invalid.
    """
    started = utc_now()
    try:
        end = utc_now(now)
        with (
            _source(settings, pools, source, queries) as plan,
            borrowed_store(settings, store) as opened,
        ):
            last = opened.samples.last_timestamps(list(plan.queries))
            first = end - plan.backfill if plan.backfill is not None else _EVERYTHING
            windows = {
                series_id: (step_after(last[series_id]) if series_id in last else first, end)
                for series_id in plan.queries
            }
            windows = {sid: w for sid, w in windows.items() if w[0] <= w[1]}
            return _ingest(JOB, started, plan, opened, windows, last, progress or no_progress)
    except ForesightError as exc:
        return finish(JOB, started, "failed", str(exc))


def backfill(
    settings: Settings,
    start: datetime,
    end: datetime,
    *,
    store: Store | None = None,
    source: MetricSource | None = None,
    queries: Mapping[str, str] | None = None,
    pools: PoolsConfig | None = None,
    progress: Progress | None = None,
) -> JobReport:
    """Fetch and store every series over ``[start, end]``, whatever is stored already.

    Re-fetching stored samples overwrites them with the source's values; nothing is
    duplicated. See :func:`run_ingest` for the arguments and outcomes.

    Raises:
        ConfigError: ``start`` is not before ``end``, or either is naive.
    """
    started = utc_now()
    try:
        first, last_instant = utc_now(start), utc_now(end)
    except ValueError as exc:
        raise ConfigError(f"backfill window: {exc}") from exc
    if first >= last_instant:
        raise ConfigError(
            f"backfill start {first.isoformat()} is not before its end "
            f"{last_instant.isoformat()}; pass --from earlier than --to"
        )
    try:
        with (
            _source(settings, pools, source, queries) as plan,
            borrowed_store(settings, store) as opened,
        ):
            last = opened.samples.last_timestamps(list(plan.queries))
            windows = dict.fromkeys(plan.queries, (first, last_instant))
            return _ingest(
                BACKFILL_JOB, started, plan, opened, windows, last, progress or no_progress
            )
    except ForesightError as exc:
        return finish(BACKFILL_JOB, started, "failed", str(exc))


@contextmanager
def _source(
    settings: Settings,
    pools: PoolsConfig | None,
    source: MetricSource | None,
    queries: Mapping[str, str] | None,
) -> Iterator[SourcePlan]:
    """Yield the source plan; close a source it built, whatever happens."""
    # Explicit queries need no pools file.
    if pools is None and queries is None:
        pools = load_pools(settings.pools_file)
    plan = source_plan(settings, pools, source, queries)
    try:
        yield plan
    finally:
        plan.close()


def _ingest(
    job: str,
    started: datetime,
    plan: SourcePlan,
    store: Store,
    windows: Mapping[str, Window],
    last: Mapping[str, pd.Timestamp],
    progress: Progress,
) -> JobReport:
    if not windows:
        return finish(job, started, "ok", "nothing to fetch: every series is up to date")
    try:
        fetched = Fetcher(plan, progress).fetch(windows)
    except SourceDownError as exc:
        return finish(
            job,
            started,
            "failed",
            f"nothing written: {exc}. The next run fetches the same windows again.",
            details={"source": plan.name, "series": len(windows)},
        )
    raw = pd.concat(fetched.frames, ignore_index=True) if fetched.frames else None
    problems = dict(fetched.problems)
    cleaned = clean_samples(raw) if raw is not None else None
    frame = cleaned.frame if cleaned is not None else None
    notes = dict(cleaned.notes) if cleaned is not None else {}
    if cleaned is not None:
        problems.update(cleaned.rejected)
    problems.update(_missing(windows, frame, last, plan.step, set(problems)))
    rows = store.samples.upsert_with_demand(frame) if frame is not None else 0
    got = sorted(frame[UID].astype(str).unique()) if frame is not None else []
    newest = (
        {str(k): v.isoformat() for k, v in frame.groupby(UID)[DS].max().items()}
        if frame is not None and not frame.empty
        else {}
    )
    details = {
        "source": plan.name,
        "rows": rows,
        "series": len(got),
        "newest": newest,
        "cleaned": notes,
    }
    summary = f"stored {rows:,} samples of {len(got)} series from {plan.name}" + (
        f"; {len(problems)} series with problems" if problems else ""
    )
    if notes:
        summary += f"; cleaned {len(notes)} series"
    outcome = outcome_of(problems, len(got))
    return finish(job, started, outcome, summary, problems=problems, details=details)


def _missing(
    windows: Mapping[str, Window],
    frame: pd.DataFrame | None,
    last: Mapping[str, pd.Timestamp],
    step: timedelta,
    known: set[str],
) -> dict[str, str]:
    """Series that returned nothing while others returned samples past their window start."""
    if frame is None or frame.empty:
        return {}
    newest = frame[DS].max()
    present = set(frame[UID].astype(str))
    problems = {}
    for series_id, (start, end) in windows.items():
        if series_id in present or series_id in known:
            continue
        if newest <= pd.Timestamp(start) + step:
            continue
        if series_id in last:
            problems[series_id] = (
                f"no samples from {start.isoformat()} to {end.isoformat()} while other series "
                f"have some; it vanished from the source after {last[series_id].isoformat()} "
                "(exporter down or series relabelled?); its stored history is kept"
            )
        else:
            problems[series_id] = (
                f"the source has no samples for it from {start.isoformat()} to "
                f"{end.isoformat()}; check its query in the pools file"
            )
    return problems
