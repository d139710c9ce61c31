"""publish_once: dry run vs apply, forecast-only, never writing invalid objects, webhooks."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest

from api.consumers.webhooks import (
    IDEMPOTENCY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    idempotency_key,
    verify,
)
from api.publish_cluster import prune_scopes
from api.publishing import publish_once
from api.service import RecommendationService
from api.settings import AppSettings
from forecaster.exceptions import ConfigError
from pipelines.config.pools import PoolsConfig
from pipelines.errors import PublishError
from pipelines.store.store import Store

NOW = datetime(2025, 3, 30, 12, 0, tzinfo=UTC)
STEP = timedelta(minutes=5)
SECRET = "s3cret-for-tests"
HOOK = "http://receiver.test/hook"
MakeService = Callable[..., RecommendationService]

Receiver = tuple[httpx.Client, list[httpx.Request]]


def receiver(status: int = 204) -> Receiver:
    """An httpx client over a mock transport that records every request."""
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status)

    return httpx.Client(transport=httpx.MockTransport(handle)), seen


def kinds(cluster: Any) -> list[str]:
    desired = cluster.calls[0]["desired"]
    assert isinstance(desired, list)
    return [m["kind"] for m in desired]


def test_dry_run_writes_nothing_and_queues_nothing(
    settings: AppSettings, store: Store, make_service: MakeService, cluster: Any
) -> None:
    http, seen = receiver()

    outcome = publish_once(
        settings, store, mode="dry_run", now=NOW, kube=cluster, http=http, service=make_service()
    )

    assert outcome.mode == "dry_run"
    assert "--apply" in outcome.reason
    assert [call["dry_run"] for call in cluster.calls] == [True]
    assert outcome.cluster == cluster.host
    (plan,) = outcome.webhooks
    assert plan.changed
    assert plan.item_id is None
    assert plan.idempotency_key is not None
    assert store.outbox.counts()["pending"] == 0
    assert seen == []
    assert outcome.deliveries == ()


def test_apply_writes_every_object_and_delivers_a_signed_set(
    settings: AppSettings, store: Store, make_service: MakeService, cluster: Any
) -> None:
    http, seen = receiver()

    outcome = publish_once(
        settings, store, mode="apply", now=NOW, kube=cluster, http=http, service=make_service()
    )

    assert outcome.applied
    assert [call["dry_run"] for call in cluster.calls] == [False]
    assert kinds(cluster) == ["ConfigMap", "PriorityClass", "Deployment", "Deployment"]
    assert cluster.calls[0]["prune"] == prune_scopes("gpu-buffers")
    assert [rec.pool for rec in outcome.recommendations] == ["alpha", "beta"]
    (request,) = seen
    assert str(request.url) == HOOK
    body = request.content
    signature = request.headers[SIGNATURE_HEADER]
    assert verify(body, signature, SECRET.encode(), request.headers[TIMESTAMP_HEADER], now=NOW)
    assert request.headers[IDEMPOTENCY_HEADER] == outcome.webhooks[0].idempotency_key
    assert [p["pool"] for p in json.loads(body)["pools"]] == ["alpha", "beta"]
    assert [d.outcome for d in outcome.deliveries] == ["delivered"]


def test_forecast_only_turns_apply_into_a_dry_run_but_still_serves_webhooks(
    make_settings: Callable[..., AppSettings],
    store: Store,
    make_service: MakeService,
    cluster: Any,
) -> None:
    settings = make_settings(service={"forecast_only": True})
    http, seen = receiver()

    outcome = publish_once(
        settings, store, mode="apply", now=NOW, kube=cluster, http=http, service=make_service()
    )

    assert outcome.mode == "dry_run"
    assert "FORESIGHT_SERVICE__FORECAST_ONLY" in outcome.reason
    assert [call["dry_run"] for call in cluster.calls] == [True]
    assert len(seen) == 1


def test_unchanged_set_is_not_queued_again_and_a_change_chains_the_key(
    settings: AppSettings,
    store: Store,
    make_service: MakeService,
    cluster: Any,
    make_readings: Callable[..., pd.DataFrame],
) -> None:
    http, seen = receiver()
    first = publish_once(
        settings, store, mode="apply", now=NOW, kube=cluster, http=http, service=make_service()
    )
    later = NOW + STEP
    # Same numbers later: only time-derived fields move, so nothing is queued.
    store.samples.upsert(make_readings("alpha", allocated=40, queued=24, nodes=6, at=later))
    again = publish_once(
        settings,
        store,
        mode="apply",
        now=later,
        kube=cluster,
        http=http,
        service=make_service(later),
    )
    assert [(p.changed, p.item_id) for p in again.webhooks] == [(False, None)]

    much_later = later + STEP
    store.samples.upsert(make_readings("alpha", allocated=80, queued=40, nodes=6, at=much_later))
    changed = publish_once(
        settings,
        store,
        mode="apply",
        now=much_later,
        kube=cluster,
        http=http,
        service=make_service(much_later),
    )

    (plan,) = changed.webhooks
    assert plan.changed
    body = json.loads(seen[-1].content)
    assert plan.idempotency_key == idempotency_key(body, first.webhooks[0].idempotency_key)
    assert [r.headers[IDEMPOTENCY_HEADER] for r in seen] == [
        first.webhooks[0].idempotency_key,
        plan.idempotency_key,
    ]


@pytest.mark.parametrize(
    ("publish", "expected"),
    [
        (
            {"buffer_shape": "capacity_buffer"},
            ["ConfigMap", *["PodTemplate", "CapacityBuffer"] * 2],
        ),
        ({"buffer_shape": "none"}, ["ConfigMap"]),
    ],
)
def test_buffer_shape_selects_the_objects_written(
    make_settings: Callable[..., AppSettings],
    store: Store,
    make_service: MakeService,
    cluster: Any,
    publish: dict[str, object],
    expected: list[str],
) -> None:
    settings = make_settings(publish={**publish, "buffers_namespace": "gpu-buffers"})

    publish_once(settings, store, mode="apply", now=NOW, kube=cluster, service=make_service())

    assert kinds(cluster) == expected


def test_invalid_configmap_is_never_written_nor_anything_queued(
    make_settings: Callable[..., AppSettings],
    store: Store,
    make_service: MakeService,
    cluster: Any,
) -> None:
    settings = make_settings(publish={"namespace": "Kube_System", "webhook_urls": [HOOK]})
    http, seen = receiver()

    with pytest.raises(PublishError, match="DNS-1123"):
        publish_once(
            settings, store, mode="apply", now=NOW, kube=cluster, http=http, service=make_service()
        )

    assert cluster.calls == []
    assert seen == []
    assert store.outbox.counts()["pending"] == 0


def test_a_pool_without_data_keeps_its_objects_and_ranks_last(
    settings: AppSettings, store: Store, make_service: MakeService, cluster: Any
) -> None:
    pools = PoolsConfig.model_validate(
        {
            "pools": [
                {"name": "alpha", "node_group_id": "ng-alpha"},
                {"name": "gamma", "node_group_id": "ng-gamma"},
            ]
        }
    )

    outcome = publish_once(
        settings, store, mode="apply", now=NOW, kube=cluster, service=make_service(pools=pools)
    )

    assert set(outcome.missing) == {"gamma"}
    assert cluster.calls[0]["keep_pools"] == {"gamma"}
    assert [entry.pool for entry in outcome.configmap.config.ranking] == ["alpha", "gamma"]


def test_without_a_cluster_a_dry_run_is_planned_offline_and_apply_fails(
    make_settings: Callable[..., AppSettings],
    store: Store,
    make_service: MakeService,
    tmp_path: Path,
) -> None:
    missing = tmp_path / "no-such-kubeconfig"
    settings = make_settings(publish={"kubeconfig": str(missing)})

    dry = publish_once(settings, store, mode="dry_run", now=NOW, service=make_service())

    assert dry.cluster.startswith("offline")
    assert str(missing) in dry.cluster
    assert {change.action for change in dry.changes} == {"planned"}
    with pytest.raises(ConfigError, match=r"publish\.kubeconfig"):
        publish_once(settings, store, mode="apply", now=NOW, service=make_service())


def test_no_webhooks_without_any_recommendation(
    settings: AppSettings, store: Store, make_service: MakeService, cluster: Any
) -> None:
    pools = PoolsConfig.model_validate({"pools": [{"name": "gamma", "node_group_id": "ng-gamma"}]})
    http, seen = receiver()

    outcome = publish_once(
        settings,
        store,
        mode="apply",
        now=NOW,
        kube=cluster,
        http=http,
        service=make_service(pools=pools),
    )

    assert outcome.webhooks == ()
    assert seen == []
