"""The priority ConfigMap as it would be written: Foresight's ranking merged with the live one.

Details: docs/consumers.md, "Notes from the code", `api/consumers/priority_live.py`."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from api.consumers.k8s import MANAGED_BY, Manifest, to_yaml
from api.consumers.priority_expander import (
    CONFIGMAP_NAME,
    PriorityExpanderConfig,
    priority_expander_configmap,
)
from api.consumers.priority_merge import PriorityConflictError, merge_priorities, operator_entries
from api.settings import ClusterAutoscalerVersion
from pipelines.config.pools import PoolConfig
from pipelines.errors import PublishError
from policy.recommendation import Recommendation

LiveBasis = Literal["merged", "no_live_configmap", "unreadable", "skipped"]
"""How the planned object relates to the live one:

``merged``: the live ConfigMap was read and its hand-made entries are in the plan;
``no_live_configmap``: there is none, the plan is the whole object; ``unreadable``: the
live one could not be read, so the plan lacks any hand-made entries; ``skipped``: the
live one must not be overwritten (the reason says why), nothing is written.
"""

READ_TIMEOUT_S = 5.0
"""Seconds a read of the live ConfigMap may take."""


class ConfigMapReader(Protocol):
    """Reads one live object (:class:`~api.consumers.kube_writer.KubeWriter`, or a fake)."""

    def read(
        self, kind: str, name: str, namespace: str | None, *, timeout_s: float = READ_TIMEOUT_S
    ) -> Manifest | None:
        """Return the live object, None when there is none.

        Raises:
            PublishError: it could not be read.
        """
        ...


@dataclass(frozen=True)
class LiveConfigMap:
    """The live priority ConfigMap as read, or why it could not be.

    Attributes:
        manifest: the object, None when there is none (or it could not be read).
        problem: why it could not be read; empty when it was.
    """

    manifest: Manifest | None
    problem: str = ""

    @property
    def readable(self) -> bool:
        """Whether the cluster answered (with the object or with "none")."""
        return not self.problem


def read_live(reader: ConfigMapReader | None, namespace: str, why_none: str) -> LiveConfigMap:
    """Read the live priority ConfigMap; never raises.

    Args:
        reader: the cluster, None when there is none to ask.
        namespace: cluster-autoscaler's namespace.
        why_none: the reason to give when ``reader`` is None.
    """
    if reader is None:
        return LiveConfigMap(None, why_none)
    try:
        return LiveConfigMap(reader.read("ConfigMap", CONFIGMAP_NAME, namespace))
    except PublishError as exc:
        return LiveConfigMap(None, str(exc))


@dataclass(frozen=True)
class ConfigMapPlan:
    """The priority ConfigMap Foresight would write now, and how it got there.

    Attributes:
        config: Foresight's own part, its pools' numbers clear of the hand-made ones.
        manifest: the object to write: ``config`` merged with the live hand-made entries.
        basis: how it relates to the live object (:data:`LiveBasis`).
        note: one line for people: merged, or why not.
        operator: the hand-made entries, by priority (empty when unknown).
    """

    config: PriorityExpanderConfig
    manifest: Manifest
    basis: LiveBasis
    note: str
    operator: Mapping[int, tuple[str, ...]] = field(default_factory=dict)

    @property
    def yaml_text(self) -> str:
        """The object as YAML, ready for ``kubectl apply -f -`` (no line is wrapped)."""
        return to_yaml(self.manifest)

    @property
    def skipped(self) -> bool:
        """Whether the ConfigMap is left as it is (the note says why)."""
        return self.basis == "skipped"


def plan_configmap(
    pools: Sequence[PoolConfig],
    recommendations: Iterable[Recommendation],
    live: LiveConfigMap,
    *,
    namespace: str,
    version: ClusterAutoscalerVersion,
) -> ConfigMapPlan:
    """Return the ConfigMap to write, merged with ``live``, or the reason not to write it.

    Raises:
        PublishError: Foresight's own part is invalid (a configuration problem).
    """
    recs = tuple(recommendations)
    ids = [pool.node_group_id for pool in pools]

    def build(reserved: Collection[int] = ()) -> PriorityExpanderConfig:
        return priority_expander_configmap(pools, recs, namespace=namespace, reserved=reserved)

    if not live.readable:
        config = build()
        note = (
            f"NOT merged with the live ConfigMap, which could not be read ({live.problem}); "
            "applying this by hand would drop any hand-made entries"
        )
        return ConfigMapPlan(config, config.manifest, "unreadable", note)
    if live.manifest is None:
        config = build()
        note = "no live ConfigMap: this is the whole object"
        return ConfigMapPlan(config, config.manifest, "no_live_configmap", note)
    try:
        found = operator_entries(live.manifest, ids, version=version)
    except PriorityConflictError as exc:
        config = build()
        return ConfigMapPlan(config, config.manifest, "skipped", str(exc))
    operator = {priority: tuple(regexes) for priority, regexes in found.items()}
    config = build(operator)
    if not _owned(live.manifest):
        note = (
            f"ConfigMap {namespace}/{CONFIGMAP_NAME} exists and is not managed by Foresight; "
            f"label it {_label()} to hand it over (its entries are then kept), or delete it"
        )
        return ConfigMapPlan(config, config.manifest, "skipped", note, operator)
    try:
        merged = merge_priorities(live.manifest, config.manifest, version=version)
    except PriorityConflictError as exc:
        return ConfigMapPlan(config, config.manifest, "skipped", str(exc), operator)
    kept = sum(len(regexes) for regexes in operator.values())
    note = f"merged with the live ConfigMap ({kept} hand-made entries kept)"
    return ConfigMapPlan(config, merged, "merged", note, operator)


def _owned(manifest: Manifest) -> bool:
    labels = (manifest.get("metadata") or {}).get("labels") or {}
    return all(labels.get(key) == value for key, value in MANAGED_BY.items())


def _label() -> str:
    return ",".join(f"{key}={value}" for key, value in MANAGED_BY.items())
