"""Publishing the recommendation set: the cluster's objects and the webhooks (docs/consumers.md)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import httpx

from api.champion import load_model
from api.clock import Clock, ClockMode, ReplayClock, system_clock
from api.consumers.capacity_buffers import (
    BufferManifests,
    BufferSettings,
    capacity_buffers,
)
from api.consumers.delivery import DeliveryPolicy, DeliveryResult, deliver_due
from api.consumers.k8s import Manifest
from api.consumers.kube_writer import (
    Change,
)
from api.consumers.priority_expander import CONFIGMAP_NAME
from api.consumers.priority_live import (
    ConfigMapPlan,
    plan_configmap,
    read_live,
)
from api.consumers.webhooks import changed, encode, idempotency_key, payload
from api.publish_cluster import ClusterWriter, Mode, cluster_for, sync_objects
from api.publish_results import PROBLEMS, ObjectResult, object_results
from api.service import RecommendationService
from api.services import Services
from api.settings import AppSettings
from forecaster.unavailable import details
from pipelines.config.pools import PoolConfig
from pipelines.config.pools_file import load_pools
from pipelines.store.store import Store
from policy.recommendation import Recommendation

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WebhookPlan:
    """One configured URL's share of a publication.

    Attributes:
        changed: whether the set differs from the last one queued for it.
        idempotency_key: the key of the new delivery (None when unchanged).
        item_id: the outbox item queued, None in a dry run or when unchanged.
    """

    target_url: str
    changed: bool
    idempotency_key: str | None
    item_id: int | None


@dataclass(frozen=True)
class PublishOutcome:
    """What one publication computed, wrote (or would write) and delivered.

    Attributes:
        reason: why it was a dry run (empty when applied).
        cluster: how the objects were checked: the API server's URL, or why none.
        recommendations: the set, pools in name order.
        missing: pools without a recommendation and why (their objects are kept).
        configmap: the priority-expander ConfigMap as it is (or would be) written,
            merged with the live one, and how.
        changes: per object, what was (or would be) done; ``planned`` when no cluster
            could be asked; ``skipped`` / ``failed`` with the reason.
        webhooks: per configured URL, whether a delivery was queued.
        deliveries: what the delivery pass did (apply only).
        objects: per object (``Kind namespace/name``), its result in one word and why.
        problems: the objects skipped or failed, and why.
        modes: per pool with a recommendation, ``predictive`` or ``reactive``.
    """

    generated_at: datetime
    mode: Mode
    reason: str
    cluster: str
    recommendations: tuple[Recommendation, ...]
    missing: Mapping[str, str]
    configmap: ConfigMapPlan
    buffers: BufferManifests
    shape: str
    changes: tuple[Change, ...]
    webhooks: tuple[WebhookPlan, ...] = ()
    deliveries: tuple[DeliveryResult, ...] = field(default=())
    objects: Mapping[str, ObjectResult] = field(default_factory=dict)
    problems: Mapping[str, str] = field(default_factory=dict)
    modes: Mapping[str, str] = field(default_factory=dict)

    @property
    def applied(self) -> bool:
        """Whether the objects were written to the cluster."""
        return self.mode == "apply"


def publishing_service(
    settings: AppSettings, store: Store, *, clock: ClockMode | Clock = "system"
) -> RecommendationService:
    """Return a recommendation service over ``store`` as the API would build it.

    Args:
        settings: the deployment's settings (pools file, model registry).
        clock: ``system``, ``replay`` (as of the newest sample: old sample data), or a
            clock function.

    Raises:
        ConfigError: the pools file is invalid.
        StoreError: the store failed.
    """
    model, problem = load_model(settings)
    services = Services(settings, load_pools(settings.pools_file), store, model, problem)
    service = RecommendationService(services)
    if clock == "replay":
        services.clock = ReplayClock(service.live.newest, fallback=system_clock)
    elif callable(clock):
        services.clock = clock
    service.start()
    return service


def publish_once(
    settings: AppSettings,
    store: Store,
    *,
    mode: Mode,
    now: datetime | None = None,
    kube: ClusterWriter | None = None,
    http: httpx.Client | None = None,
    service: RecommendationService | None = None,
) -> PublishOutcome:
    """Compute the recommendation set, publish it to the cluster and the webhooks.

    Args:
        settings: the deployment's settings (``publish``, ``service.forecast_only``,
            ``webhook_secret``).
        store: the open store (state, audit trail, outbox).
        mode: ``apply`` writes for real (unless ``service.forecast_only``) and sends
            webhooks; ``dry_run`` is a dry run of everything.
        now: the publication time; default the service's clock. Without ``service``
            it is also the decision time.
        kube: the cluster writer; default one from ``settings.publish`` (in a dry run
            a missing or unreachable cluster only downgrades the check to offline).
        http: the webhook client; default a new one, closed afterwards.
        service: a ready recommendation service (the scheduler keeps one); default
            :func:`publishing_service`.

    Raises:
        PublishError: the ConfigMap or a buffer is invalid (nothing was written), or
            a write was refused or the cluster unreachable while applying.
        ConfigError: applying without usable Kubernetes credentials.
        StoreError: the store failed.
    """
    if service is None:
        fixed = now
        service = publishing_service(
            settings, store, clock=(lambda: fixed) if fixed is not None else "system"
        )
    when = now or service.now()
    entries, missing = service.recommendations(service.select(None))
    recs = tuple(sorted((entry.recommendation for entry in entries), key=lambda r: r.pool))
    publish = settings.publish
    pools = service.services.pools.pools
    buffers = capacity_buffers(recs, BufferSettings(namespace=publish.buffers_namespace))
    cluster_mode = _cluster_mode(settings, mode)
    plan, changes, cluster = _write_objects(
        settings, kube, pools, recs, buffers, set(missing), mode=cluster_mode
    )
    webhooks = _queue_webhooks(settings, store, recs, when, mode=mode)
    deliveries: tuple[DeliveryResult, ...] = ()
    if mode == "apply" and publish.webhook_urls:
        deliveries = _deliver(settings, store, http, now)
    results = object_results(changes)
    return PublishOutcome(
        generated_at=when,
        mode=cluster_mode,
        reason="" if cluster_mode == "apply" else _dry_run_reason(mode),
        cluster=cluster,
        recommendations=recs,
        missing=details(missing),
        configmap=plan,
        buffers=buffers,
        shape=publish.buffer_shape,
        changes=tuple(changes),
        webhooks=tuple(webhooks),
        deliveries=deliveries,
        objects={target: result for target, (result, _) in results.items()},
        problems={t: why for t, (result, why) in results.items() if result in PROBLEMS},
        modes={rec.pool: rec.mode for rec in recs},
    )


def _write_objects(
    settings: AppSettings,
    kube: ClusterWriter | None,
    pools: Sequence[PoolConfig],
    recs: tuple[Recommendation, ...],
    buffers: BufferManifests,
    keep_pools: set[str],
    *,
    mode: Mode,
) -> tuple[ConfigMapPlan, list[Change], str]:
    """Plan the ConfigMap against the live one, then write (or dry-run) every object."""
    publish = settings.publish
    with cluster_for(settings, kube, mode=mode) as (writer, offline):
        live = read_live(writer, publish.namespace, offline)
        plan = plan_configmap(
            pools, recs, live, namespace=publish.namespace,
            version=publish.cluster_autoscaler_version,
        )  # fmt: skip
        desired = [] if plan.skipped else [plan.manifest]
        desired += _buffer_objects(buffers, publish.buffer_shape)
        changes, cluster = sync_objects(settings, writer, offline, desired, keep_pools, mode=mode)
    if plan.skipped:
        # Named first, where the ConfigMap's line would have been.
        where = (publish.namespace, mode == "dry_run")
        changes = [
            Change("skipped", "ConfigMap", CONFIGMAP_NAME, *where, reason=plan.note),
            *changes,
        ]
    return plan, changes, cluster


def _cluster_mode(settings: AppSettings, mode: Mode) -> Mode:
    """The mode of the cluster's objects: ``service.forecast_only`` makes an apply dry."""
    return "apply" if mode == "apply" and not settings.service.forecast_only else "dry_run"


def _dry_run_reason(mode: Mode) -> str:
    if mode == "apply":
        return "service.forecast_only is true (set FORESIGHT_SERVICE__FORECAST_ONLY=false to write)"
    return "dry run (pass --apply to write)"


def _buffer_objects(buffers: BufferManifests, shape: str) -> list[Manifest]:
    if shape == "capacity_buffer":
        return buffers.objects("capacity_buffer")
    if shape == "overprovisioning":
        return buffers.objects("overprovisioning")
    return []


def _queue_webhooks(
    settings: AppSettings,
    store: Store,
    recs: tuple[Recommendation, ...],
    when: datetime,
    *,
    mode: Mode,
) -> list[WebhookPlan]:
    """Queue the set for each URL whose last queued set differs (dry run: only compare)."""
    if not recs:
        # A set without any pool says nothing a receiver can act on (no live data yet).
        return []
    body = payload(recs, when)
    raw = encode(body)
    plans = []
    for url in settings.publish.webhook_urls:
        last = store.outbox.latest(url)
        previous = None if last is None else _decoded(last.body)
        if not changed(previous, body):
            plans.append(WebhookPlan(url, False, None, None))
            continue
        key = idempotency_key(body, None if last is None else last.idempotency_key)
        item = store.outbox.enqueue(url, raw, key, now=when) if mode == "apply" else None
        plans.append(WebhookPlan(url, True, key, item))
    return plans


def _decoded(body: bytes) -> Mapping[str, object] | None:
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _deliver(
    settings: AppSettings, store: Store, http: httpx.Client | None, now: datetime | None
) -> tuple[DeliveryResult, ...]:
    policy = DeliveryPolicy.from_settings(settings)
    clock: Clock = (lambda: now) if now is not None else system_clock
    if http is not None:
        return tuple(deliver_due(store.outbox, http, policy, clock=clock))
    with httpx.Client(timeout=policy.timeout_s) as client:
        return tuple(deliver_due(store.outbox, client, policy, clock=clock))
