"""GET /integrations/priority-expander and /integrations/capacity-buffers."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from api.consumers.priority_expander import validate_value_text


def recommendations(client: TestClient) -> dict[str, dict[str, Any]]:
    return {p["pool"]: p for p in client.get("/recommendation").json()["pools"]}


def test_priority_expander_is_the_configmap_as_yaml(client: TestClient) -> None:
    response = client.get("/integrations/priority-expander")

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/yaml")
    manifest = yaml.safe_load(response.text)
    assert manifest["kind"] == "ConfigMap"
    assert manifest["metadata"]["name"] == "cluster-autoscaler-priority-expander"
    assert manifest["metadata"]["namespace"] == "kube-system"
    value = manifest["data"]["priorities"]
    parsed = validate_value_text(value)
    assert sorted(parsed) == [0, 10, 20]
    assert parsed[0] == [".*"]
    assert {r for regexes in parsed.values() for r in regexes} == {
        "^ng-alpha$",
        "^ng-beta$",
        ".*",
    }
    # Plain integer keys, highest first, exactly as cluster-autoscaler parses them.
    assert [line for line in value.splitlines() if not line.startswith(" ")] == [
        "20:",
        "10:",
        "0:",
    ]


def test_priority_ranking_puts_the_largest_shortfall_first(client: TestClient) -> None:
    recs = recommendations(client)
    gpus = {"alpha": 8, "beta": 4}
    shortfall = {
        name: (rec["desired_nodes"] - rec["current_nodes"]) * gpus[name]
        for name, rec in recs.items()
    }

    body = client.get("/integrations/priority-expander?format=json").json()

    ranking = body["ranking"]
    assert [r["pool"] for r in ranking] == sorted(shortfall, key=lambda p: -shortfall[p])
    assert [r["shortfall_gpus"] for r in ranking] == sorted(shortfall.values(), reverse=True)
    assert [r["priority"] for r in ranking] == [20, 10]
    assert body["priorities"][str(ranking[0]["priority"])] == [ranking[0]["regex"]]
    served = yaml.safe_load(client.get("/integrations/priority-expander").text)
    assert body["configmap"] == served


def test_accept_json_selects_json_and_format_wins_over_accept(client: TestClient) -> None:
    by_accept = client.get(
        "/integrations/priority-expander", headers={"Accept": "application/json"}
    )
    by_query = client.get(
        "/integrations/priority-expander?format=yaml", headers={"Accept": "application/json"}
    )

    assert by_accept.headers["content-type"] == "application/json"
    assert by_accept.json()["namespace"] == "kube-system"
    assert by_query.headers["content-type"].startswith("text/yaml")


def test_capacity_buffers_yaml_defaults_to_overprovisioning(client: TestClient) -> None:
    recs = recommendations(client)

    response = client.get("/integrations/capacity-buffers")

    assert response.status_code == 200
    docs = list(yaml.safe_load_all(response.text))
    assert [d["kind"] for d in docs] == ["PriorityClass", "Deployment", "Deployment"]
    assert docs[0]["value"] < 0
    replicas = {d["metadata"]["labels"]["foresight.io/placeholder-for"]: d["spec"]["replicas"]
                for d in docs[1:]}  # fmt: skip
    assert replicas == {name: rec["headroom_pods"] for name, rec in recs.items()}


def test_capacity_buffers_as_capacity_buffer_objects(client: TestClient) -> None:
    docs = list(
        yaml.safe_load_all(client.get("/integrations/capacity-buffers?shape=capacity_buffer").text)
    )

    assert [d["kind"] for d in docs] == ["PodTemplate", "CapacityBuffer"] * 2
    assert docs[1]["apiVersion"] == "autoscaling.x-k8s.io/v1beta1"
    assert docs[1]["spec"]["podTemplateRef"] == {"name": docs[0]["metadata"]["name"]}


def test_capacity_buffers_json_has_both_shapes_and_sizes(client: TestClient) -> None:
    recs = recommendations(client)

    body = client.get("/integrations/capacity-buffers?format=json").json()

    assert {p["pool"]: p["replicas"] for p in body["pools"]} == {
        name: rec["headroom_pods"] for name, rec in recs.items()
    }
    assert [o["kind"] for o in body["capacity_buffer"]] == ["PodTemplate", "CapacityBuffer"] * 2
    assert [o["kind"] for o in body["overprovisioning"]] == [
        "PriorityClass",
        "Deployment",
        "Deployment",
    ]
    assert body["unavailable"] == {}
    only = client.get("/integrations/capacity-buffers?format=json&shape=overprovisioning").json()
    assert only["capacity_buffer"] == []


@pytest.mark.parametrize("query", ["format=xml", "shape=both"])
def test_unknown_format_or_shape_is_422(client: TestClient, query: str) -> None:
    response = client.get(f"/integrations/capacity-buffers?{query}")

    assert response.status_code == 422
    assert response.json()["error"] == "invalid_request"
