"""``foresight_publish_*``: the last publish run's result per object, from the store."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, cast

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from api.publish_metrics import PublishCollector
from api.service import RecommendationService
from pipelines.store.store import Store

NOW = datetime(2025, 3, 30, 12, 0, tzinfo=UTC)
CM = "ConfigMap kube-system/cluster-autoscaler-priority-expander"


def scrape(store: Store) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    service = cast(RecommendationService, SimpleNamespace(services=SimpleNamespace(store=store)))
    registry = CollectorRegistry()
    registry.register(PublishCollector(lambda: service))
    text = generate_latest(registry).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_each_objects_result_of_the_last_run_is_a_gauge(store: Store) -> None:
    objects: dict[str, Any] = {CM: "skipped", "Deployment gpu-buffers/x": "written"}
    run = store.job_runs.start("publish", runner="test", started_at=NOW)
    store.job_runs.finish(run, "partial", "s", finished_at=NOW, details={"objects": objects})

    got = scrape(store)

    assert (
        got[("foresight_publish_object_result", frozenset({("object", CM), ("result", "skipped")}))]
        == 1.0
    )
    assert got[("foresight_publish_objects", frozenset({("result", "skipped")}))] == 1.0
    assert got[("foresight_publish_objects", frozenset({("result", "written")}))] == 1.0
    assert got[("foresight_publish_objects", frozenset({("result", "failed")}))] == 0.0
    finished = ("foresight_publish_last_run_timestamp_seconds", frozenset({("outcome", "partial")}))
    assert got[finished] == NOW.timestamp()


def test_nothing_is_exposed_before_the_first_run(store: Store) -> None:
    assert scrape(store) == {}
