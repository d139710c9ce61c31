"""Capacity buffers: CapacityBuffer + PodTemplate and overprovisioning, field by field."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
import yaml

from api.consumers.capacity_buffers import (
    ACTIVE_CAPACITY,
    CAPACITY_BUFFER_API,
    BufferManifests,
    BufferSettings,
    Shape,
    capacity_buffers,
    validate_capacity_buffer,
)
from api.consumers.k8s import check_typed
from pipelines.config.pools import PoolConfig
from pipelines.errors import PublishError
from policy.recommendation import Recommendation

MakeRecommendation = Callable[..., Recommendation]
A100 = PoolConfig(name="a100", node_group_id="eks-a100", gpus_per_node=8)
L4 = PoolConfig(name="l4", node_group_id="eks-l4", gpus_per_node=4)
PLACEHOLDER_LABELS = {
    "app.kubernetes.io/name": "foresight-placeholder",
    "app.kubernetes.io/managed-by": "foresight",
    "foresight.io/placeholder-for": "a100",
}


@pytest.fixture
def manifests(recommend: MakeRecommendation) -> BufferManifests:
    return capacity_buffers([recommend(A100, 2, 5, headroom_pods=3)])


def test_pod_template_requests_the_pools_gpus_on_its_nodes(manifests: BufferManifests) -> None:
    template = manifests.buffers[0].pod_template

    assert template["apiVersion"] == "v1"
    assert template["kind"] == "PodTemplate"
    assert template["metadata"] == {
        "name": "foresight-buffer-a100",
        "namespace": "default",
        "labels": PLACEHOLDER_LABELS,
    }
    pod = template["template"]["spec"]
    assert template["template"]["metadata"]["labels"] == PLACEHOLDER_LABELS
    assert pod["nodeSelector"] == {"foresight.io/pool": "a100"}
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert "priorityClassName" not in pod
    (container,) = pod["containers"]
    assert container["image"] == "registry.k8s.io/pause:3.10"
    assert container["resources"] == {
        "requests": {"nvidia.com/gpu": "8"},
        "limits": {"nvidia.com/gpu": "8"},
    }


def test_capacity_buffer_refers_to_its_template_with_the_headroom(
    manifests: BufferManifests,
) -> None:
    buffer = manifests.buffers[0].capacity_buffer

    assert buffer == {
        "apiVersion": "autoscaling.x-k8s.io/v1beta1",
        "kind": "CapacityBuffer",
        "metadata": {
            "name": "foresight-buffer-a100",
            "namespace": "default",
            "labels": PLACEHOLDER_LABELS,
        },
        "spec": {
            "provisioningStrategy": "buffer.x-k8s.io/active-capacity",
            "podTemplateRef": {"name": "foresight-buffer-a100"},
            "replicas": 3,
        },
    }
    assert manifests.objects("capacity_buffer") == [
        manifests.buffers[0].pod_template,
        buffer,
    ]


def test_priority_class_is_negative_and_never_preempts(manifests: BufferManifests) -> None:
    klass = manifests.priority_class

    assert klass["apiVersion"] == "scheduling.k8s.io/v1"
    assert klass["kind"] == "PriorityClass"
    assert klass["metadata"]["name"] == "foresight-placeholder"
    assert "namespace" not in klass["metadata"]  # cluster-scoped
    assert klass["value"] == -10
    assert klass["globalDefault"] is False
    assert klass["preemptionPolicy"] == "Never"
    assert klass["description"]


def test_overprovisioning_deployment_holds_the_headroom_in_pause_pods(
    manifests: BufferManifests,
) -> None:
    deployment = manifests.buffers[0].deployment

    assert deployment["apiVersion"] == "apps/v1"
    assert deployment["kind"] == "Deployment"
    assert deployment["metadata"]["name"] == "foresight-overprovisioning-a100"
    assert deployment["metadata"]["namespace"] == "default"
    spec = deployment["spec"]
    assert spec["replicas"] == 3
    assert spec["selector"] == {"matchLabels": PLACEHOLDER_LABELS}
    assert spec["template"]["metadata"]["labels"] == PLACEHOLDER_LABELS
    pod = spec["template"]["spec"]
    assert pod["priorityClassName"] == manifests.priority_class["metadata"]["name"]
    assert pod["nodeSelector"] == {"foresight.io/pool": "a100"}
    assert pod["terminationGracePeriodSeconds"] == 0
    assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"
    (container,) = pod["containers"]
    assert container["name"] == "pause"
    assert container["image"] == "registry.k8s.io/pause:3.10"
    assert container["resources"]["requests"] == {"nvidia.com/gpu": "8"}
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    assert manifests.objects("overprovisioning") == [manifests.priority_class, deployment]


def test_placeholders_do_not_carry_the_pool_label_counted_as_demand(
    manifests: BufferManifests,
) -> None:
    for manifest in (manifests.buffers[0].pod_template, manifests.buffers[0].deployment):
        labels = (manifest.get("spec") or manifest)["template"]["metadata"]["labels"]
        assert "foresight.io/pool" not in labels


def test_pools_without_headroom_get_zero_replicas_and_pools_sort_by_name(
    recommend: MakeRecommendation,
) -> None:
    result = capacity_buffers(
        [recommend(L4, 3, 3, headroom_pods=0), recommend(A100, 2, 4, headroom_pods=2)]
    )

    assert [(b.pool, b.replicas, b.gpus_per_pod) for b in result.buffers] == [
        ("a100", 2, 8),
        ("l4", 0, 4),
    ]
    assert result.buffers[1].capacity_buffer["spec"]["replicas"] == 0
    assert result.buffers[1].deployment["spec"]["replicas"] == 0
    l4_container = result.buffers[1].deployment["spec"]["template"]["spec"]["containers"][0]
    assert l4_container["resources"]["limits"] == {"nvidia.com/gpu": "4"}


def test_settings_change_namespace_label_and_names(recommend: MakeRecommendation) -> None:
    settings = BufferSettings(
        namespace="gpu-buffers",
        pool_label_key="node.example.com/gpu-pool",
        name_prefix="fs",
        priority_class_name="fs-low",
        priority_value=-100,
        gpu_taint_key="",
    )
    result = capacity_buffers([recommend(A100, 1, 2, headroom_pods=1)], settings)
    buffer = result.buffers[0]

    assert buffer.capacity_buffer["metadata"]["namespace"] == "gpu-buffers"
    assert buffer.capacity_buffer["metadata"]["name"] == "fs-buffer-a100"
    assert buffer.deployment["metadata"]["name"] == "fs-overprovisioning-a100"
    pod = buffer.deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"node.example.com/gpu-pool": "a100"}
    assert pod["priorityClassName"] == "fs-low"
    assert "tolerations" not in pod
    assert result.priority_class["value"] == -100


def test_yaml_streams_parse_back_to_the_objects(manifests: BufferManifests) -> None:
    shapes: tuple[Shape, ...] = ("capacity_buffer", "overprovisioning")
    for shape in shapes:
        text = manifests.yaml_text(shape)
        assert text.startswith("---\n")
        assert list(yaml.safe_load_all(text)) == manifests.objects(shape)
    assert manifests.to_dict()["pools"] == [{"pool": "a100", "replicas": 3, "gpus_per_pod": 8}]


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("namespace", "Bad_Namespace", "DNS-1123 label"),
        ("name_prefix", "Foresight_", "DNS-1123 subdomain"),
        ("priority_class_name", "-low", "DNS-1123 subdomain"),
        ("pool_label_key", "foresight.io/", "label key"),
        ("pool_label_key", "/pool", "empty prefix"),
        ("priority_value", 0, "negative"),
        ("image", "pause 3.10", "image"),
    ],
)
def test_bad_settings_are_refused(field: str, value: Any, reason: str) -> None:
    with pytest.raises(PublishError, match=reason):
        BufferSettings(**{field: value})


def test_bad_pool_name_is_refused(recommend: MakeRecommendation) -> None:
    bad = replace(recommend(A100, 1, 2, headroom_pods=1), pool="A100_Pool")
    with pytest.raises(PublishError, match="A100_Pool"):
        capacity_buffers([bad])


def test_name_longer_than_a_subdomain_is_refused(recommend: MakeRecommendation) -> None:
    rec = recommend(A100, 1, 2, headroom_pods=1)
    with pytest.raises(PublishError, match="253"):
        capacity_buffers([rec], BufferSettings(name_prefix="a" * 240))


def test_invalid_counts_and_duplicates_are_refused(recommend: MakeRecommendation) -> None:
    rec = recommend(A100, 1, 2, headroom_pods=1)
    with pytest.raises(PublishError, match="not a valid buffer"):
        capacity_buffers([replace(rec, headroom_pods=-1)])
    with pytest.raises(PublishError, match="not a valid buffer"):
        capacity_buffers([replace(rec, gpus_per_placeholder_pod=0)])
    with pytest.raises(PublishError, match="more than one"):
        capacity_buffers([rec, rec])


def valid_buffer() -> dict[str, Any]:
    return {
        "apiVersion": CAPACITY_BUFFER_API,
        "kind": "CapacityBuffer",
        "metadata": {"name": "b", "namespace": "default"},
        "spec": {
            "provisioningStrategy": ACTIVE_CAPACITY,
            "podTemplateRef": {"name": "t"},
            "replicas": 1,
        },
    }


def test_capacity_buffer_schema_accepts_both_ref_kinds() -> None:
    validate_capacity_buffer(valid_buffer())
    scalable = valid_buffer()
    scalable["spec"] = {
        "scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "w"},
        "percentage": 20,
    }
    validate_capacity_buffer(scalable)


def _mutate(path: str, value: Any) -> dict[str, Any]:
    manifest = valid_buffer()
    *parents, leaf = path.split(".")
    target = manifest
    for key in parents:
        target = target[key]
    if value is KeyError:
        del target[leaf]
    else:
        target[leaf] = copy.deepcopy(value)
    return manifest


@pytest.mark.parametrize(
    ("path", "value", "reason"),
    [
        ("apiVersion", "autoscaling.x-k8s.io/v1alpha2", "apiVersion"),
        ("kind", "Buffer", "kind"),
        ("metadata.name", "Bad_Name", "DNS-1123 subdomain"),
        ("metadata.namespace", "a.b", "DNS-1123 label"),
        ("spec.replicas", -1, "spec.replicas"),
        ("spec.replicas", 2**31, "spec.replicas"),
        ("spec.replicas", True, "spec.replicas"),
        ("spec.replicas", "3", "spec.replicas"),
        ("spec.replicas", KeyError, "needs spec.replicas or spec.limits"),
        ("spec.podTemplateRef", KeyError, "exactly one"),
        ("spec.scalableRef", {"kind": "Deployment", "name": "w"}, "exactly one"),
        ("spec.podTemplateRef", {"name": ""}, "podTemplateRef.name"),
        ("spec.podTemplateRef", {"name": "t", "namespace": "x"}, "unknown field"),
        ("spec.replica", 3, "unknown field spec.replica"),
        ("spec.limits", ["8"], "spec.limits"),
        ("spec", KeyError, "spec is required"),
        ("status2", {}, "unknown field status2"),
    ],
)
def test_capacity_buffer_schema_refuses(path: str, value: Any, reason: str) -> None:
    with pytest.raises(PublishError, match=reason):
        validate_capacity_buffer(_mutate(path, value))


def test_scalable_ref_without_kind_is_refused() -> None:
    manifest = valid_buffer()
    manifest["spec"] = {"scalableRef": {"name": "w"}, "replicas": 1}
    with pytest.raises(PublishError, match=r"scalableRef\.kind"):
        validate_capacity_buffer(manifest)


def test_typed_model_check_catches_typos_and_missing_fields(manifests: BufferManifests) -> None:
    deployment = copy.deepcopy(manifests.buffers[0].deployment)
    check_typed((deployment, "V1Deployment"))

    typo = copy.deepcopy(deployment)
    typo["spec"]["replica"] = typo["spec"].pop("replicas")
    with pytest.raises(PublishError, match=r"\.spec\.replica"):
        check_typed((typo, "V1Deployment"))

    nameless = copy.deepcopy(deployment)
    del nameless["spec"]["template"]["spec"]["containers"][0]["name"]
    with pytest.raises(PublishError, match="name"):
        check_typed((nameless, "V1Deployment"))

    wrong_type = copy.deepcopy(deployment)
    wrong_type["spec"]["replicas"] = "3"
    with pytest.raises(PublishError, match=r"\.spec\.replicas"):
        check_typed((wrong_type, "V1Deployment"))

    no_selector = copy.deepcopy(deployment)
    del no_selector["spec"]["selector"]
    with pytest.raises(PublishError, match="selector"):
        check_typed((no_selector, "V1Deployment"))
