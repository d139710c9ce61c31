"""The scheduler's jobs inside ``foresight serve``: publish what the running API serves.

The publish job on its own (``foresight scheduler``, ``foresight publish``) builds a
recommendation service per run: it loads the champion again and has no call-chain
spans, so it publishes without the latency adjustment ``/recommendation`` applies.
When the scheduler runs in the API's process, :func:`serving_job_runner` hands the
publish job the running service instead: the ConfigMap, the buffers and the webhook
body are then built from the very recommendations ``/recommendation`` serves, at the
service's own clock. The other jobs run as usual.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import httpx

from api.publishing import ClusterWriter, PublishOutcome, publish_once
from api.service import RecommendationService
from pipelines.config.settings import Settings
from pipelines.jobs.publish import Publisher, publishing_runner
from pipelines.scheduler.dispatch import JobRunner, default_runner
from pipelines.store import Store

ServiceLookup = Callable[[], RecommendationService | None]
"""Returns the running API's service, or None while the app has not started (or stopped)."""


def running_service_publisher(
    service: RecommendationService,
    *,
    kube: ClusterWriter | None = None,
    http: httpx.Client | None = None,
) -> Publisher:
    """Return ``publish_once`` bound to ``service`` (its recommendations and its clock)."""

    def publish(
        settings: Settings, store: Store, *, apply: bool, now: datetime | None = None
    ) -> PublishOutcome:
        return publish_once(
            settings, store, apply=apply, now=now, kube=kube, http=http, service=service
        )

    return publish


def serving_job_runner(
    lookup: ServiceLookup,
    *,
    kube: ClusterWriter | None = None,
    http: httpx.Client | None = None,
    runner: JobRunner = default_runner,
) -> JobRunner:
    """Return a job runner whose ``publish`` publishes from the running service.

    Args:
        lookup: finds the running service (``app.state.service`` in ``foresight serve``).
        kube: the cluster writer (tests); default one from the settings per run.
        http: the webhook client (tests); default a new one per run.
        runner: runs every other job; default the registry's.

    Returns:
        The runner to give :func:`~pipelines.scheduler.start_scheduler`. A publish due
        before the app has started is ``skipped`` (the next one publishes).
    """

    def publisher() -> Publisher | None:
        service = lookup()
        if service is None:
            return None
        return running_service_publisher(service, kube=kube, http=http)

    return publishing_runner(publisher, runner)
