"""``GET /integrations/priority-expander`` and ``GET /integrations/capacity-buffers``.

Details: docs/consumers.md, "Notes from the code", `api/routers/integrations.py`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Final, Literal

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field

from api.consumers.capacity_buffers import BufferSettings, Shape, capacity_buffers
from api.consumers.k8s import load_yaml
from api.consumers.kube_writer import KubeWriter
from api.consumers.priority_expander import CONFIGMAP_KEY
from api.consumers.priority_live import (
    ConfigMapPlan,
    ConfigMapReader,
    LiveBasis,
    plan_configmap,
    read_live,
)
from api.deps import ServiceDep
from api.service import RecommendationService
from forecaster.exceptions import ConfigError
from forecaster.unavailable import Unavailable, details
from policy.recommendation import Recommendation

router = APIRouter(prefix="/integrations", tags=["integrations"])

YAML: Final = "text/yaml"
"""The media type of YAML answers (``kubectl`` and humans read it as text)."""

Format = Literal["yaml", "json"]
"""The answer's format."""

FormatQuery = Annotated[
    Format | None,
    Query(alias="format", description="yaml or json; default: from Accept, else yaml"),
]


def wants(fmt: Format | None, accept: str | None) -> Format:
    """Return the answer's format: ``?format=``, else JSON when Accept asks only for it."""
    if fmt is not None:
        return fmt
    accepted = (accept or "").lower()
    if "json" in accepted and "yaml" not in accepted:
        return "json"
    return "yaml"


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RankedPoolOut(_Out):
    """One pool's place in the priority order and the numbers behind it."""

    pool: str
    node_group_id: str
    regex: str = Field(description="the anchored, RE2-escaped node group id")
    shortfall_gpus: int | None = Field(
        description="(desired - current) x gpus_per_node; null without a recommendation"
    )
    cost_per_gpu_hour: float
    priority: int


class PriorityExpanderOut(_Out):
    """The priority expander ConfigMap as JSON, with its ranking."""

    namespace: str
    priorities: dict[str, list[str]] = Field(
        description="priority -> regexes, highest first, hand-made entries included"
    )
    ranking: list[RankedPoolOut]
    configmap: dict[str, Any] = Field(description="the object foresight publish would write")
    live: LiveBasis = Field(description="how it relates to the live ConfigMap")
    live_note: str = Field(description="merged, or why not")
    hand_made: dict[str, list[str]] = Field(
        description="the live ConfigMap's hand-made entries (empty when unknown)"
    )


class BufferPoolOut(_Out):
    """One pool's desired buffer size."""

    pool: str
    replicas: int = Field(description="placeholder pods (the recommendation's headroom_pods)")
    gpus_per_pod: int


class CapacityBuffersOut(_Out):
    """Every pool's buffer in both shapes (or one, with ``?shape=``)."""

    pools: list[BufferPoolOut]
    capacity_buffer: list[dict[str, Any]] = Field(
        description="PodTemplate + CapacityBuffer per pool (cluster-autoscaler >= 1.35)"
    )
    overprovisioning: list[dict[str, Any]] = Field(
        description="the PriorityClass, then a placeholder Deployment per pool"
    )
    unavailable: dict[str, str] = Field(description="pools without a recommendation, and why")


LIVE_HEADER: Final = "X-Foresight-Live-ConfigMap"
"""How the served ConfigMap relates to the live one (:data:`LiveBasis`)."""


def cluster_reader(service: ServiceDep) -> Iterator[ConfigMapReader | ConfigError]:
    """The cluster to read the live ConfigMap from, or why there is none (overridable)."""
    try:
        writer = KubeWriter.from_settings(service.services.settings.publish)
    except ConfigError as exc:
        yield exc
        return
    try:
        yield writer
    finally:
        writer.close()


ReaderDep = Annotated[ConfigMapReader | ConfigError, Depends(cluster_reader)]


def _plan(service: RecommendationService, reader: ConfigMapReader | ConfigError) -> ConfigMapPlan:
    recs, _ = _current(service)
    publish = service.services.settings.publish
    cluster = None if isinstance(reader, ConfigError) else reader
    live = read_live(cluster, publish.namespace, f"no cluster: {reader}")
    return plan_configmap(
        service.select(None),
        recs,
        live,
        namespace=publish.namespace,
        version=publish.cluster_autoscaler_version,
    )


def _current(
    service: RecommendationService,
) -> tuple[list[Recommendation], dict[str, Unavailable]]:
    entries, missing = service.recommendations(service.select(None))
    return [entry.recommendation for entry in entries], missing


def _content(model: type[BaseModel], description: str) -> dict[int | str, dict[str, Any]]:
    return {
        200: {
            "model": model,
            "description": description,
            "content": {YAML: {"schema": {"description": "Kubernetes manifests (YAML)"}}},
        },
        502: {"description": "the manifests failed validation (a configuration problem)"},
        503: {"description": "the store is unreachable"},
    }


@router.get(
    "/priority-expander",
    response_class=Response,
    responses=_content(PriorityExpanderOut, "the ConfigMap (YAML) or it and its ranking (JSON)"),
    summary="The cluster-autoscaler priority expander ConfigMap",
)
async def priority_expander(
    request: Request, service: ServiceDep, reader: ReaderDep, fmt: FormatQuery = None
) -> Response:
    """Return ``cluster-autoscaler-priority-expander`` for cluster-autoscaler's namespace.

    Ranking: largest predicted GPU shortfall first, then cheaper per GPU; every regex is
    anchored, escaped and compiled with RE2 before it is served. Merged with the live
    ConfigMap's hand-made entries when it can be read (the first line says).
    """
    plan = await run_in_threadpool(_plan, service, reader)
    config = plan.config
    headers = {LIVE_HEADER: plan.basis}
    if wants(fmt, request.headers.get("accept")) == "yaml":
        status = "SKIPPED by foresight publish" if plan.skipped else "foresight publish"
        comment = f"# {status}: {plan.note}".replace("\n", " ")
        return Response(f"{comment}\n{plan.yaml_text}", media_type=YAML, headers=headers)
    merged = load_yaml(plan.manifest["data"][CONFIGMAP_KEY])
    body = PriorityExpanderOut(
        namespace=config.namespace,
        priorities={str(p): list(r) for p, r in merged.items()},
        ranking=[
            RankedPoolOut(
                pool=r.pool,
                node_group_id=r.node_group_id,
                regex=r.regex,
                shortfall_gpus=r.shortfall_gpus,
                cost_per_gpu_hour=r.cost_per_gpu_hour,
                priority=r.priority,
            )
            for r in config.ranking
        ],
        configmap=dict(plan.manifest),
        live=plan.basis,
        live_note=plan.note,
        hand_made={str(p): list(r) for p, r in plan.operator.items()},
    )
    return Response(body.model_dump_json(), media_type="application/json", headers=headers)


ShapeQuery = Annotated[
    Shape | None,
    Query(
        description="capacity_buffer or overprovisioning; YAML defaults to "
        "publish.buffer_shape (overprovisioning), JSON to both"
    ),
]


def _default_shape(service: RecommendationService) -> Shape:
    configured = getattr(service.services.settings.publish, "buffer_shape", "overprovisioning")
    return "capacity_buffer" if configured == "capacity_buffer" else "overprovisioning"


@router.get(
    "/capacity-buffers",
    response_class=Response,
    responses=_content(CapacityBuffersOut, "the buffer manifests (YAML stream) or a summary"),
    summary="Placeholder capacity per pool: CapacityBuffer or overprovisioning",
)
async def get_capacity_buffers(
    request: Request, service: ServiceDep, fmt: FormatQuery = None, shape: ShapeQuery = None
) -> Response:
    """Return each pool's desired buffer (``headroom_pods`` placeholder pods).

    YAML is one shape, ready to apply: ``capacity_buffer`` (a PodTemplate and a
    ``CapacityBuffer`` per pool) or ``overprovisioning`` (a negative-priority
    PriorityClass and a Deployment of pause pods per pool). Apply one, not both.
    """
    recs, missing = await run_in_threadpool(_current, service)
    settings = BufferSettings(namespace=service.services.settings.publish.buffers_namespace)
    manifests = capacity_buffers(recs, settings)
    if wants(fmt, request.headers.get("accept")) == "yaml":
        return Response(manifests.yaml_text(shape or _default_shape(service)), media_type=YAML)
    body = CapacityBuffersOut(
        pools=[
            BufferPoolOut(pool=b.pool, replicas=b.replicas, gpus_per_pod=b.gpus_per_pod)
            for b in manifests.buffers
        ],
        capacity_buffer=manifests.objects("capacity_buffer")
        if shape in (None, "capacity_buffer")
        else [],
        overprovisioning=manifests.objects("overprovisioning")
        if shape in (None, "overprovisioning")
        else [],
        unavailable=details(missing),
    )
    return Response(body.model_dump_json(), media_type="application/json")
