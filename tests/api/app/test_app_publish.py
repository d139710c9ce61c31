"""The publish job inside ``serve`` publishes exactly what ``/recommendation`` serves.

The app runs with a call-chain latency source that asks alpha for extra nodes (what
the span analysis would), so a publisher that built a service of its own would
publish different numbers. The job runs through :func:`serving_job_runner`, the
runner ``foresight serve`` gives the scheduler, at the same frozen instant.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import yaml
from fastapi.testclient import TestClient

from api.publish_runner import serving_job_runner
from api.settings import load_app_settings
from pipelines.config.pools import PoolConfig, PoolsConfig
from pipelines.jobs.report import JobReport
from policy.types import NO_LATENCY, LatencyAdjustment
from tests.api.app.conftest import FakeClock, MakeServices, app_of
from tests.api.publishing.conftest import FakeCluster

HOOK = "http://receiver.test/hook"


def latency(pool: PoolConfig, now: datetime) -> LatencyAdjustment:
    if pool.name == "alpha":
        return LatencyAdjustment(extra_nodes=3, reason="ranker p95 past its SLO")
    return NO_LATENCY


def other_job(name: str, settings: object) -> JobReport:
    raise AssertionError(f"only publish should run, not {name}")


def test_the_published_set_is_the_served_set_for_the_same_instant(
    make_services: MakeServices, pools: PoolsConfig, tmp_path: Path, clock: FakeClock
) -> None:
    settings = load_app_settings(
        root=tmp_path,
        levels=[0.5, 0.8, 0.9],
        horizon=12,
        max_train_days=3,
        max_gap_steps=6,
        webhook_secret="s3cret",
        service={"forecast_only": False},
        publish={"webhook_urls": [HOOK], "buffers_namespace": "gpu-buffers"},
    )
    services = make_services(settings=settings, latency=latency, clock=clock)
    delivered: list[dict[str, Any]] = []

    def receiver(request: httpx.Request) -> httpx.Response:
        delivered.append(json.loads(request.content))
        return httpx.Response(200)

    cluster = FakeCluster()
    app = app_of(services)
    with (
        TestClient(app) as client,
        httpx.Client(transport=httpx.MockTransport(receiver)) as http,
    ):
        served = client.get("/recommendation").json()
        runner = serving_job_runner(
            lambda: app.state.service,
            kube=cluster,
            http=http,
            runner=other_job,
            mode="dry_run" if settings.service.forecast_only else "apply",  # as serve does
        )
        report = runner("publish", settings)

    assert report.outcome == "ok", report.summary
    by_pool = {body["pool"]: body for body in served["pools"]}
    alpha = by_pool["alpha"]["explanation"]["latency"]
    assert alpha["applied_nodes"] == 3, alpha

    # The webhook body: the same pools, numbers and instant as /recommendation.
    (body,) = delivered
    assert body["generated_at"] == served["generated_at"]
    for sent in body["pools"]:
        got = by_pool[sent["pool"]]
        assert sent == got

    (call,) = cluster.calls
    desired = call["desired"]
    assert isinstance(desired, list)
    configmap, *buffers = desired
    # The ConfigMap ranks by the served shortfalls (then cost per GPU, then name).
    gpus = {pool.name: pool for pool in pools.pools}

    def key(name: str) -> tuple[int, float, str]:
        rec, pool = by_pool[name], gpus[name]
        shortfall = (rec["desired_nodes"] - rec["current_nodes"]) * pool.gpus_per_node
        return (-shortfall, pool.cost_per_node_hour / pool.gpus_per_node, name)

    order = sorted(by_pool, key=key)
    priorities = yaml.safe_load(configmap["data"]["priorities"])
    ranked = [regex for _, regexes in sorted(priorities.items(), reverse=True) for regex in regexes]
    assert ranked == [f"^{gpus[name].node_group_id}$" for name in order] + [".*"]
    # The buffers hold the served headroom.
    replicas = {
        d["metadata"]["labels"]["foresight.io/placeholder-for"]: d["spec"]["replicas"]
        for d in buffers
        if d["kind"] == "Deployment"
    }
    assert replicas == {name: rec["headroom_pods"] for name, rec in by_pool.items()}


def test_a_publish_before_the_app_serves_is_skipped(tmp_path: Path) -> None:
    settings = load_app_settings(root=tmp_path)
    runner = serving_job_runner(lambda: None, runner=other_job)

    report = runner("publish", settings)

    assert report.outcome == "skipped"
    assert "not started" in report.summary
