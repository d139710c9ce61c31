"""The scheduler's jobs inside ``foresight serve``: publish what the running API serves.

Details: docs/consumers.md, "Notes from the code", `api/publish_runner.py`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

import httpx

from api.clock import Clock, ClockMode, decision_clock, system_clock
from api.live import LiveIndex
from api.publish_cluster import ClusterWriter, Mode
from api.publishing import PublishOutcome, publish_once
from api.service import RecommendationService
from api.settings import AppSettings
from pipelines.config.pools_file import load_pools
from pipelines.jobs.publish import Publisher, publishing_runner
from pipelines.scheduler.clocked import ClockedJob, clocked_runner
from pipelines.scheduler.dispatch import JobRunner, default_runner
from pipelines.store.store import Store, open_store

ServiceLookup = Callable[[], RecommendationService | None]
"""Returns the running API's service, or None while the app has not started (or stopped)."""


def running_service_publisher(
    service: RecommendationService,
    *,
    kube: ClusterWriter | None = None,
    http: httpx.Client | None = None,
) -> Publisher:
    """Return ``publish_once`` bound to ``service`` (its settings, recommendations, clock)."""
    settings = service.services.settings

    def publish(store: Store, *, mode: Mode, now: datetime | None = None) -> PublishOutcome:
        return publish_once(
            settings, store, mode=mode, now=now, kube=kube, http=http, service=service
        )

    return publish


def store_clock(settings: AppSettings, mode: ClockMode) -> Clock:
    """Return the decision clock of ``mode`` read from the store, for use without an API.

    The same rule as the API's clock (:func:`~api.clock.decision_clock`); in replay
    each reading opens the store and reads the pools' newest live samples, so it
    suits a job run, not a request.
    """
    ahead = timedelta(seconds=settings.service.max_sample_future_seconds)
    if mode == "system":
        return system_clock

    def now() -> datetime:
        pools = load_pools(settings.pools_file).pools
        with open_store(settings.store_url) as store:
            live = LiveIndex(store, pools)
            live.poll()
            return decision_clock(mode, live.newest, ahead)()

    return now


def serving_clock(lookup: ServiceLookup, before: Clock) -> Clock:
    """Return the running service's clock, or ``before`` while no service runs."""

    def now() -> datetime:
        service = lookup()
        return before() if service is None else service.now()

    return now


def serving_job_runner(
    lookup: ServiceLookup,
    *,
    kube: ClusterWriter | None = None,
    http: httpx.Client | None = None,
    runner: JobRunner = default_runner,
    before: Clock = system_clock,
    jobs: Mapping[str, ClockedJob] | None = None,
    replay: bool = False,
    mode: Mode = "dry_run",
) -> JobRunner:
    """Return a job runner on the running service's clock, publishing from the service.

    Args:
        lookup: finds the running service (``app.state.service`` in ``foresight serve``).
        kube: the cluster writer (tests); default one from the settings per run.
        http: the webhook client (tests); default a new one per run.
        runner: runs every other job; default the registry's.
        before: the decision clock while the app has not started (``serve`` builds it
            with :func:`store_clock`); the forecast and evaluate jobs run at its time.
        jobs: the forecast and evaluate jobs taking ``now`` (tests); default the real ones.
        replay: the service decides by the replay clock: a forecast run with no new
            sample since the last does nothing and says so.
        mode: the publish job's mode (``foresight serve`` passes ``apply`` unless
            ``service.forecast_only``); default ``dry_run``.

    Returns:
        The runner to give :func:`~pipelines.scheduler.start_scheduler`. A publish due
        before the app has started is ``skipped`` (the next one publishes).
    """

    def publisher() -> Publisher | None:
        service = lookup()
        if service is None:
            return None
        return running_service_publisher(service, kube=kube, http=http)

    clocked = clocked_runner(serving_clock(lookup, before), runner, jobs=jobs, replay=replay)
    return publishing_runner(publisher, clocked, mode=mode)
