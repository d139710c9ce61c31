"""Capacity ahead of demand, per pool, in the two shapes cluster-autoscaler understands.

Details: docs/consumers.md, "Notes from the code", `api/consumers/capacity_buffers.py`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal

from api.consumers.k8s import (
    MANAGED_BY,
    Manifest,
    check_typed,
    require_dns_label,
    require_dns_subdomain,
    require_label_key,
    require_label_value,
    to_yaml_documents,
)
from pipelines.errors import PublishError
from policy.recommendation import Recommendation

CAPACITY_BUFFER_API: Final = "autoscaling.x-k8s.io/v1beta1"
ACTIVE_CAPACITY: Final = "buffer.x-k8s.io/active-capacity"
"""The CapacityBuffer strategy that makes cluster-autoscaler provision the buffer."""

DEFAULT_POOL_LABEL: Final = "foresight.io/pool"
PLACEHOLDER_LABEL: Final = "foresight.io/placeholder-for"
PAUSE_IMAGE: Final = "registry.k8s.io/pause:3.10"
GPU_RESOURCE: Final = "nvidia.com/gpu"
_INT32_MAX: Final = 2**31 - 1
_APP_NAME: Final = {"app.kubernetes.io/name": "foresight-placeholder"}

Shape = Literal["capacity_buffer", "overprovisioning"]
"""Which of the two buffer shapes to emit."""


@dataclass(frozen=True)
class BufferSettings:
    """Where and how the placeholders are declared; checked when built.

    Attributes:
        namespace: the namespace of the PodTemplates, CapacityBuffers and Deployments.
        pool_label_key: the node label that tells a pool's nodes apart.
        priority_class_name: the PriorityClass of the overprovisioning pods.
        priority_value: its value; negative so any real pod preempts a placeholder.
        gpu_resource: the extended resource the placeholders request.
        gpu_taint_key: the taint GPU nodes carry (tolerated); empty for none.
    """

    namespace: str = "default"
    pool_label_key: str = DEFAULT_POOL_LABEL
    name_prefix: str = "foresight"
    priority_class_name: str = "foresight-placeholder"
    priority_value: int = -10
    image: str = PAUSE_IMAGE
    gpu_resource: str = GPU_RESOURCE
    gpu_taint_key: str = GPU_RESOURCE

    def __post_init__(self) -> None:
        require_dns_label(self.namespace, "namespace")
        require_label_key(self.pool_label_key)
        require_dns_subdomain(self.name_prefix, "name prefix")
        require_dns_subdomain(self.priority_class_name, "priority class name")
        require_label_key(self.gpu_resource)
        if self.gpu_taint_key:
            require_label_key(self.gpu_taint_key)
        if self.priority_value >= 0:
            raise PublishError(
                f"placeholder priority must be negative so real pods preempt them, got "
                f"{self.priority_value}"
            )
        if not self.image or any(ch.isspace() for ch in self.image):
            raise PublishError(f"image {self.image!r} must be a non-empty reference")


@dataclass(frozen=True)
class PoolBuffer:
    """One pool's desired buffer in both shapes.

    Attributes:
        replicas: placeholder pods wanted (the recommendation's ``headroom_pods``).
    """

    pool: str
    replicas: int
    gpus_per_pod: int
    pod_template: Manifest
    capacity_buffer: Manifest
    deployment: Manifest


@dataclass(frozen=True)
class BufferManifests:
    """Every pool's buffer, plus the PriorityClass the Deployments share."""

    buffers: tuple[PoolBuffer, ...]
    priority_class: Manifest

    def objects(self, shape: Shape) -> list[Manifest]:
        """Return the objects of one shape, in the order to apply them."""
        if shape == "capacity_buffer":
            return [m for b in self.buffers for m in (b.pod_template, b.capacity_buffer)]
        return [self.priority_class, *(b.deployment for b in self.buffers)]

    def yaml_text(self, shape: Shape) -> str:
        """Return the objects of one shape as a multi-document YAML stream."""
        return to_yaml_documents(self.objects(shape))

    def to_dict(self) -> dict[str, object]:
        """Return a JSON-ready summary with both shapes' objects, per pool."""
        return {
            "pools": [
                {"pool": b.pool, "replicas": b.replicas, "gpus_per_pod": b.gpus_per_pod}
                for b in self.buffers
            ],
            "capacity_buffer": self.objects("capacity_buffer"),
            "overprovisioning": self.objects("overprovisioning"),
        }


def _labels(pool: str) -> dict[str, str]:
    return {**_APP_NAME, **MANAGED_BY, PLACEHOLDER_LABEL: require_label_value(pool, "pool name")}


def _metadata(name: str, settings: BufferSettings, pool: str) -> dict[str, Any]:
    return {
        "name": require_dns_subdomain(name, "object name"),
        "namespace": settings.namespace,
        "labels": _labels(pool),
    }


def placeholder_pod_spec(
    pool: str, gpus: int, settings: BufferSettings, *, priority_class: bool
) -> dict[str, Any]:
    """Return the spec of a pause pod holding ``gpus`` GPUs on one of ``pool``'s nodes."""
    quantity = {settings.gpu_resource: str(gpus)}
    spec: dict[str, Any] = {}
    if priority_class:
        spec["priorityClassName"] = settings.priority_class_name
    spec |= {
        # A placeholder holds nothing worth a graceful shutdown; free the GPUs at once.
        "terminationGracePeriodSeconds": 0,
        "automountServiceAccountToken": False,
        "nodeSelector": {settings.pool_label_key: require_label_value(pool, "pool name")},
        "containers": [
            {
                "name": "pause",
                "image": settings.image,
                # Extended resources need requests == limits.
                "resources": {"requests": dict(quantity), "limits": dict(quantity)},
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "readOnlyRootFilesystem": True,
                    "runAsNonRoot": True,
                    "runAsUser": 65535,
                    "capabilities": {"drop": ["ALL"]},
                    # With the rest, meets the "restricted" Pod Security Standard.
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
            }
        ],
    }
    if settings.gpu_taint_key:
        spec["tolerations"] = [
            {"key": settings.gpu_taint_key, "operator": "Exists", "effect": "NoSchedule"}
        ]
    return spec


def pod_template(pool: str, gpus: int, settings: BufferSettings) -> Manifest:
    """Return the PodTemplate of one buffer chunk (one placeholder pod) of ``pool``."""
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": _metadata(f"{settings.name_prefix}-buffer-{pool}", settings, pool),
        "template": {
            "metadata": {"labels": _labels(pool)},
            "spec": placeholder_pod_spec(pool, gpus, settings, priority_class=False),
        },
    }


def capacity_buffer(pool: str, replicas: int, settings: BufferSettings) -> Manifest:
    """Return the CapacityBuffer asking for ``replicas`` chunks of ``pool``'s template."""
    name = f"{settings.name_prefix}-buffer-{pool}"
    return {
        "apiVersion": CAPACITY_BUFFER_API,
        "kind": "CapacityBuffer",
        "metadata": _metadata(name, settings, pool),
        "spec": {
            "provisioningStrategy": ACTIVE_CAPACITY,
            "podTemplateRef": {"name": name},
            "replicas": replicas,
        },
    }


def priority_class(settings: BufferSettings) -> Manifest:
    """Return the negative-priority PriorityClass of the overprovisioning pods."""
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": settings.priority_class_name, "labels": {**_APP_NAME, **MANAGED_BY}},
        "value": settings.priority_value,
        "globalDefault": False,
        # Placeholders wait for room; they must never evict anything to get it.
        "preemptionPolicy": "Never",
        "description": "Foresight placeholder pods: spare GPU capacity ahead of forecast "
        "demand, preempted by any real workload.",
    }


def overprovisioning_deployment(
    pool: str, replicas: int, gpus: int, settings: BufferSettings
) -> Manifest:
    """Return the Deployment of ``replicas`` pause pods holding ``gpus`` GPUs each."""
    labels = _labels(pool)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(f"{settings.name_prefix}-overprovisioning-{pool}", settings, pool),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(labels)},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": placeholder_pod_spec(pool, gpus, settings, priority_class=True),
            },
        },
    }


def validate_capacity_buffer(manifest: Manifest) -> None:
    """Check a CapacityBuffer against the v1beta1 CRD's schema and validation rules.

    The rules follow cluster-autoscaler's CRD: ``spec`` is required; ``replicas`` and
    ``percentage`` are int32 >= 0; ``podTemplateRef`` is ``{name}``, ``scalableRef`` is
    ``{apiGroup?, kind, name}``; exactly one of the two refs; a ``podTemplateRef`` needs
    ``replicas`` or ``limits``.

    Raises:
        PublishError: listing every problem found.
    """
    problems: list[str] = []
    if manifest.get("apiVersion") != CAPACITY_BUFFER_API:
        problems.append(f"apiVersion must be {CAPACITY_BUFFER_API}")
    if manifest.get("kind") != "CapacityBuffer":
        problems.append("kind must be CapacityBuffer")
    problems += _unknown(manifest, {"apiVersion", "kind", "metadata", "spec", "status"}, "")
    metadata = manifest.get("metadata")
    if not isinstance(metadata, dict):
        problems.append("metadata is required")
    else:
        problems += _checked(require_dns_subdomain, str(metadata.get("name", "")), "name")
        problems += _checked(require_dns_label, str(metadata.get("namespace", "")), "namespace")
    spec = manifest.get("spec")
    if not isinstance(spec, dict):
        problems.append("spec is required and must be a mapping")
    else:
        problems += _spec_problems(spec)
    if problems:
        raise PublishError("CapacityBuffer is invalid: " + "; ".join(problems))


def _spec_problems(spec: dict[str, Any]) -> list[str]:
    fields = {"provisioningStrategy", "podTemplateRef", "scalableRef", "replicas"}
    problems = _unknown(spec, fields | {"percentage", "limits"}, "spec.")
    for key in ("replicas", "percentage"):
        value = spec.get(key)
        ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _INT32_MAX
        if key in spec and not ok:
            problems.append(f"spec.{key} must be an integer in [0, {_INT32_MAX}], got {value!r}")
    if "provisioningStrategy" in spec and not isinstance(spec["provisioningStrategy"], str):
        problems.append("spec.provisioningStrategy must be a string")
    if "limits" in spec and not isinstance(spec["limits"], dict):
        problems.append("spec.limits must be a mapping of resource to quantity")
    template, scalable = spec.get("podTemplateRef"), spec.get("scalableRef")
    if (template is None) == (scalable is None):
        problems.append("spec needs exactly one of podTemplateRef and scalableRef")
    if template is not None:
        problems += _ref_problems(template, "spec.podTemplateRef", {"name"}, {"name"})
        if "replicas" not in spec and "limits" not in spec:
            problems.append("spec.podTemplateRef needs spec.replicas or spec.limits")
    if scalable is not None:
        allowed = {"apiGroup", "kind", "name"}
        problems += _ref_problems(scalable, "spec.scalableRef", allowed, {"kind", "name"})
    return problems


def _ref_problems(ref: object, where: str, allowed: set[str], required: set[str]) -> list[str]:
    if not isinstance(ref, dict):
        return [f"{where} must be a mapping"]
    problems = _unknown(ref, allowed, f"{where}.")
    for key in sorted(required):
        if not isinstance(ref.get(key), str) or not ref[key]:
            problems.append(f"{where}.{key} must be a non-empty string")
    if "apiGroup" in ref and not isinstance(ref["apiGroup"], str):
        problems.append(f"{where}.apiGroup must be a string")
    return problems


def _unknown(mapping: dict[str, Any], allowed: set[str], where: str) -> list[str]:
    return [f"unknown field {where}{key}" for key in sorted(set(mapping) - allowed)]


def _checked(check: Callable[[str, str], str], value: str, what: str) -> list[str]:
    try:
        check(value, what)
    except PublishError as exc:
        return [str(exc)]
    return []


def _validate_pool(buffer: PoolBuffer, settings: BufferSettings) -> None:
    validate_capacity_buffer(buffer.capacity_buffer)
    if (
        buffer.capacity_buffer["spec"]["podTemplateRef"]["name"]
        != (buffer.pod_template["metadata"]["name"])
    ):
        raise PublishError(f"pool {buffer.pool!r}: the CapacityBuffer names another PodTemplate")
    spec = buffer.deployment["spec"]
    if spec["selector"]["matchLabels"] != spec["template"]["metadata"]["labels"]:
        raise PublishError(f"pool {buffer.pool!r}: the Deployment selector misses its pods")
    if buffer.deployment["metadata"]["namespace"] != settings.namespace:
        raise PublishError(f"pool {buffer.pool!r}: the Deployment is in the wrong namespace")


def capacity_buffers(
    recommendations: Iterable[Recommendation], settings: BufferSettings | None = None
) -> BufferManifests:
    """Build and validate every pool's desired buffer in both shapes.

    Args:
        recommendations: the latest recommendation per pool; a pool without headroom
            gets ``replicas: 0`` so applying the set shrinks a stale buffer.
        settings: namespace, labels, names and image; the defaults when None.

    Returns:
        The manifests, pools in name order.

    Raises:
        PublishError: a name or label is invalid, a count is out of range, or an object
            fails its schema check; nothing invalid is returned.
    """
    settings = settings or BufferSettings()
    buffers = []
    for rec in sorted(recommendations, key=lambda r: r.pool):
        replicas, gpus = rec.headroom_pods, rec.gpus_per_placeholder_pod
        if not 0 <= replicas <= _INT32_MAX or gpus < 1:
            raise PublishError(
                f"pool {rec.pool!r}: {replicas} placeholder pods of {gpus} GPUs is not a "
                "valid buffer (pods in [0, 2^31-1], GPUs >= 1)"
            )
        buffer = PoolBuffer(
            pool=rec.pool,
            replicas=replicas,
            gpus_per_pod=gpus,
            pod_template=pod_template(rec.pool, gpus, settings),
            capacity_buffer=capacity_buffer(rec.pool, replicas, settings),
            deployment=overprovisioning_deployment(rec.pool, replicas, gpus, settings),
        )
        _validate_pool(buffer, settings)
        buffers.append(buffer)
    names = [b.pool for b in buffers]
    if len(set(names)) != len(names):
        raise PublishError(f"more than one recommendation for a pool: {sorted(names)}")
    klass = priority_class(settings)
    check_typed(
        (klass, "V1PriorityClass"),
        *((b.pod_template, "V1PodTemplate") for b in buffers),
        *((b.deployment, "V1Deployment") for b in buffers),
    )
    return BufferManifests(tuple(buffers), klass)
