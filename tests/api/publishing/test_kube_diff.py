"""Comparing a live object with the desired one: server additions are not changes."""

from __future__ import annotations

import copy

from api.consumers.k8s import Manifest
from api.consumers.kube_diff import differences

DESIRED: Manifest = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {
        "name": "foresight-overprovisioning-a100",
        "namespace": "buffers",
        "labels": {"app.kubernetes.io/managed-by": "foresight"},
    },
    "spec": {
        "replicas": 2,
        "template": {
            "spec": {
                "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "pause", "resources": {"limits": {"nvidia.com/gpu": "8"}}}],
            }
        },
    },
}


def live() -> Manifest:
    """DESIRED as an API server returns it: metadata, defaults and status added."""
    obj = copy.deepcopy(DESIRED)
    obj["metadata"] |= {"uid": "u-1", "resourceVersion": "42", "generation": 3}
    obj["spec"]["strategy"] = {"type": "RollingUpdate"}
    obj["spec"]["template"]["spec"]["dnsPolicy"] = "ClusterFirst"
    obj["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = "IfNotPresent"
    obj["status"] = {"replicas": 2}
    return obj


def test_server_added_fields_are_not_differences() -> None:
    assert differences(live(), DESIRED) == []


def test_a_changed_value_is_reported_with_its_path() -> None:
    wanted = copy.deepcopy(DESIRED)
    wanted["spec"]["replicas"] = 5

    assert differences(live(), wanted) == [".spec.replicas: 2 -> 5"]


def test_a_label_set_by_someone_else_would_be_removed() -> None:
    existing = live()
    existing["metadata"]["labels"]["team"] = "ml"

    assert differences(existing, DESIRED) == [".metadata.labels.team: 'ml' -> (removed)"]


def test_configmap_data_is_compared_whole_with_a_line_diff() -> None:
    wanted: Manifest = {
        "kind": "ConfigMap",
        "metadata": {"name": "x"},
        "data": {"priorities": "20:\n  - ^a$\n0:\n  - .*\n"},
    }
    existing = copy.deepcopy(wanted)
    existing["data"] = {"priorities": "20:\n  - ^b$\n0:\n  - .*\n", "stale": "1"}

    lines = differences(existing, wanted)

    assert lines[0] == ".data.priorities:"
    assert "  -  - ^b$" in lines
    assert "  +  - ^a$" in lines
    assert lines[-1] == ".data.stale: '1' -> (removed)"


def test_a_bool_is_not_an_int() -> None:
    existing: Manifest = {"kind": "PriorityClass", "metadata": {}, "globalDefault": 0}
    wanted: Manifest = {"kind": "PriorityClass", "metadata": {}, "globalDefault": False}

    assert differences(existing, wanted) == [".globalDefault: 0 -> False"]


def test_list_length_change_and_limit() -> None:
    wanted = copy.deepcopy(DESIRED)
    wanted["spec"]["template"]["spec"]["containers"].append({"name": "second"})
    wanted["spec"]["replicas"] = 9

    lines = differences(live(), wanted, limit=1)

    assert len(lines) == 2
    assert lines[1] == "... and 1 more differences"
