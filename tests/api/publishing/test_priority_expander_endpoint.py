"""``GET /integrations/priority-expander`` serves what publish would write (issue #36 item 4)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import yaml
from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.consumers.priority_expander import MANAGED_NODE_GROUPS
from api.deps import get_service
from api.routers import integrations
from api.service import RecommendationService
from forecaster.exceptions import ConfigError

MakeService = Callable[..., RecommendationService]
CM = ("ConfigMap", "cluster-autoscaler-priority-expander")


def app_with(service: RecommendationService, reader: Any) -> TestClient:
    app = FastAPI()
    app.include_router(integrations.router)
    app.dependency_overrides[get_service] = lambda: service
    app.dependency_overrides[integrations.cluster_reader] = lambda: reader
    return TestClient(app)


def owned(priorities: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": CM[1],
            "namespace": "kube-system",
            "labels": {"app.kubernetes.io/managed-by": "foresight"},
            "annotations": {MANAGED_NODE_GROUPS: json.dumps(["ng-alpha", "ng-beta"])},
        },
        "data": {"priorities": priorities},
    }


def test_the_served_configmap_keeps_the_hand_made_entries(
    make_service: MakeService, cluster: Any
) -> None:
    cluster.live[CM] = owned("15:\n  - ^cpu-general$\n0:\n  - .*\n")
    client = app_with(make_service(), cluster)

    text = client.get("/integrations/priority-expander")
    body = client.get("/integrations/priority-expander?format=json").json()

    assert text.headers[integrations.LIVE_HEADER] == "merged"
    assert text.text.startswith("# foresight publish: merged with the live ConfigMap")
    served = yaml.safe_load(text.text)
    assert yaml.safe_load(served["data"]["priorities"])[15] == ["^cpu-general$"]
    assert body["configmap"] == served
    assert body["priorities"]["15"] == ["^cpu-general$"]
    assert body["hand_made"] == {"15": ["^cpu-general$"]}
    assert body["live"] == "merged"


def test_without_a_cluster_it_says_the_hand_made_entries_are_missing(
    make_service: MakeService,
) -> None:
    client = app_with(make_service(), ConfigError("no Kubernetes credentials"))

    text = client.get("/integrations/priority-expander")

    assert text.headers[integrations.LIVE_HEADER] == "unreadable"
    first = text.text.splitlines()[0]
    assert first.startswith("# foresight publish: NOT merged")
    assert "no Kubernetes credentials" in first
    assert "would drop any hand-made entries" in first
