"""The cluster-autoscaler priority expander ConfigMap, built and validated offline.

Details: docs/consumers.md, "Notes from the code", `api/consumers/priority_expander.py`."""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import re2  # type: ignore[import-untyped]
import yaml

from api.consumers.go_regex import compile_re2, quote_meta, re2_options
from api.consumers.k8s import (
    MANAGED_BY,
    Manifest,
    check_typed,
    load_yaml,
    require_dns_label,
    to_yaml,
)
from pipelines.config.pools import PoolConfig
from pipelines.errors import PublishError
from policy.recommendation import Recommendation
from policy.types import Mode

CONFIGMAP_NAME: Final = "cluster-autoscaler-priority-expander"
"""The name cluster-autoscaler looks for (``PriorityConfigMapName`` in its source)."""

CONFIGMAP_KEY: Final = "priorities"
"""The data key cluster-autoscaler reads."""

DEFAULT_NAMESPACE: Final = "kube-system"
"""The usual namespace of cluster-autoscaler; the ConfigMap must live in the same one."""

CATCH_ALL: Final = ".*"
"""The lowest-priority regex that keeps every node group eligible."""

CATCH_ALL_PRIORITY: Final = 0
DEFAULT_SPACING: Final = 10

_PLAIN_INT_KEY: Final = re.compile(r"(0|[1-9][0-9]*):")
_GO_INT_MAX: Final = 2**63 - 1


def node_group_regex(node_group_id: str) -> str:
    """Return the anchored regex matching exactly one node group id."""
    return f"^{quote_meta(node_group_id)}$"


@dataclass(frozen=True)
class RankedPool:
    """One pool's place in the priority order, with the numbers that put it there.

    Attributes:
        node_group_id: the id cluster-autoscaler sees.
        regex: the anchored regex for ``node_group_id``.
        shortfall_gpus: ``(desired - current) x gpus_per_node``; None without a
            recommendation.
        cost_per_gpu_hour: ``cost_per_node_hour / gpus_per_node``.
        mode: the recommendation's mode (``reactive``: no trusted forecast behind the
            shortfall); None without a recommendation.
    """

    pool: str
    node_group_id: str
    regex: str
    shortfall_gpus: int | None
    cost_per_gpu_hour: float
    priority: int
    mode: Mode | None = None


@dataclass(frozen=True)
class PriorityExpanderConfig:
    """The validated ConfigMap, as an object and as YAML text.

    Attributes:
        namespace: where the ConfigMap goes (cluster-autoscaler's namespace).
        priorities: priority -> regexes, highest priority first.
        ranking: the pools in priority order, with the numbers behind it.
        yaml_text: the ConfigMap as YAML, ready for ``kubectl apply -f -``.
    """

    namespace: str
    priorities: Mapping[int, tuple[str, ...]]
    ranking: tuple[RankedPool, ...]
    value: str
    manifest: Manifest
    yaml_text: str


def rank_pools(
    pools: Sequence[PoolConfig],
    recommendations: Iterable[Recommendation],
    *,
    spacing: int = DEFAULT_SPACING,
    reserved: Collection[int] = (),
) -> tuple[RankedPool, ...]:
    """Order pools by the ranking rule and give each place its priority.

    Args:
        recommendations: the latest recommendation per pool; those of pools not in
            ``pools`` are ignored.
        spacing: the gap between consecutive slots, >= 1.
        reserved: priorities an operator's hand-made entries use; no pool gets one.

    Returns:
        The pools, highest priority first (pools in one place in name order).

    Raises:
        PublishError: a slot and every other number of its gap are reserved.
    """
    if spacing < 1:
        raise ValueError(f"spacing must be >= 1, got {spacing}")
    by_pool = {rec.pool: rec for rec in recommendations}

    def shortfall(pool: PoolConfig) -> int | None:
        rec = by_pool.get(pool.name)
        if rec is None:
            return None
        return (rec.desired_nodes - rec.current_nodes) * pool.gpus_per_node

    def key(pool: PoolConfig) -> tuple[int, int, float]:
        gpus = shortfall(pool)
        missing = 1 if gpus is None else 0
        return (missing, -(gpus or 0), pool.cost_per_node_hour / pool.gpus_per_node)

    ordered = sorted(pools, key=lambda pool: (key(pool), pool.name))
    places = sorted({key(pool) for pool in pools})
    taken = {int(number) for number in reserved}
    slots = {
        place: _free_priority(spacing * (len(places) - rank), spacing, taken)
        for rank, place in enumerate(places)
    }
    return tuple(
        RankedPool(
            pool=pool.name,
            node_group_id=pool.node_group_id,
            regex=node_group_regex(pool.node_group_id),
            shortfall_gpus=shortfall(pool),
            cost_per_gpu_hour=pool.cost_per_node_hour / pool.gpus_per_node,
            priority=slots[key(pool)],
            mode=None if pool.name not in by_pool else by_pool[pool.name].mode,
        )
        for pool in ordered
    )


def _free_priority(slot: int, spacing: int, taken: set[int]) -> int:
    """Return ``slot``, or the nearest number of its gap no operator entry uses."""
    candidates: list[int] = [
        slot,
        *range(slot + 1, slot + spacing),
        *range(slot - 1, slot - spacing, -1),
    ]
    for number in candidates:
        if number > CATCH_ALL_PRIORITY and number not in taken:
            return number
    raise PublishError(
        f"hand-made priority entries use every number from {slot - spacing + 1} to "
        f"{slot + spacing - 1}, so a Foresight pool would tie with one; move some of them"
    )


def build_priorities(ranking: Sequence[RankedPool]) -> dict[int, tuple[str, ...]]:
    """Return priority -> regexes for a ranking, highest first, with the catch-all last."""
    priorities: dict[int, tuple[str, ...]] = {}
    for entry in sorted(ranking, key=lambda r: -r.priority):
        priorities[entry.priority] = (*priorities.get(entry.priority, ()), entry.regex)
    priorities[CATCH_ALL_PRIORITY] = (*priorities.get(CATCH_ALL_PRIORITY, ()), CATCH_ALL)
    return priorities


def render_priorities(priorities: Mapping[int, Sequence[str]]) -> str:
    """Return the ``priorities`` value: YAML with plain integer keys, highest first."""
    ordered = {int(p): list(priorities[p]) for p in sorted(priorities, reverse=True)}
    return to_yaml(ordered)


def validate_priorities(
    priorities: Mapping[Any, Any], ranking: Sequence[RankedPool] = ()
) -> dict[int, list[str]]:
    """Check a priorities map as cluster-autoscaler will read it.

    Args:
        priorities: priority -> regexes (e.g. as parsed back from the YAML).
        ranking: the pools it is meant to rank; each pool's regex must match its own
            node group id (unanchored, as cluster-autoscaler matches) and no other's.

    Raises:
        PublishError: a key is not an integer >= 0, a value is not a non-empty list of
            strings, a regex is not RE2-compatible, the ``.*`` catch-all is not alone at
            the lowest priority, or a pool's regex matches the wrong ids.
    """
    if not isinstance(priorities, Mapping) or not priorities:
        raise PublishError("priorities must be a non-empty mapping of priority to regexes")
    checked: dict[int, list[str]] = {}
    for key, regexes in priorities.items():
        # bool is an int subclass; YAML 'true:' must not pass as priority 1.
        if isinstance(key, bool) or not isinstance(key, int) or not 0 <= key <= _GO_INT_MAX:
            raise PublishError(
                f"priority {key!r} must be a plain integer in [0, 2^63-1] "
                "(cluster-autoscaler reads map[int][]string; quoted keys and floats are rejected)"
            )
        if not isinstance(regexes, list | tuple) or not regexes:
            raise PublishError(f"priority {key} must hold a non-empty list of regexes")
        for pattern in regexes:
            if not isinstance(pattern, str) or not pattern:
                raise PublishError(f"priority {key} holds {pattern!r}; regexes are strings")
            compile_re2(pattern)
        checked[key] = list(regexes)
    lowest = min(checked)
    if checked[lowest] != [CATCH_ALL]:
        raise PublishError(
            f"the lowest priority ({lowest}) must hold only the catch-all {CATCH_ALL!r}, "
            f"got {checked[lowest]}"
        )
    for entry in ranking:
        if entry.regex not in checked.get(entry.priority, []):
            raise PublishError(f"pool {entry.pool!r}: {entry.regex!r} is not at {entry.priority}")
    _check_matches(ranking)
    return checked


def _check_matches(ranking: Sequence[RankedPool]) -> None:
    """Check that each pool's id is matched by its own regex and by no other pool's."""
    if not ranking:
        return
    # One RE2 set of every pool regex, searched unanchored as cluster-autoscaler does:
    # n set matches instead of n x n searches.
    regex_set = re2.Set.SearchSet(re2_options())
    for entry in ranking:
        regex_set.Add(entry.regex)
    regex_set.Compile()
    for index, entry in enumerate(ranking):
        hits = set(regex_set.Match(entry.node_group_id))
        if index not in hits:
            raise PublishError(
                f"pool {entry.pool!r}: {entry.regex!r} does not match its own node group "
                f"id {entry.node_group_id!r}"
            )
        clashes = sorted(hits - {index})
        if clashes:
            other = clashes[0]
            raise PublishError(
                f"pool {ranking[other].pool!r}: {ranking[other].regex!r} also matches "
                f"{entry.node_group_id!r}, the node group id of pool {entry.pool!r}; give "
                "each pool its own node_group_id"
            )


def validate_value_text(value: str, ranking: Sequence[RankedPool] = ()) -> dict[int, list[str]]:
    """Check the ``priorities`` text: plain decimal keys, parsable, and a valid map.

    Raises:
        PublishError: a top-level key is quoted, a float, signed or not decimal, the
            text is not YAML, or :func:`validate_priorities` fails on the parsed map.
    """
    for line in value.splitlines():
        if line and not line[0].isspace() and not _PLAIN_INT_KEY.fullmatch(line.rstrip()):
            raise PublishError(
                f"priorities line {line!r} is not a plain unquoted integer key such as '10:'"
            )
    try:
        parsed = load_yaml(value)
    except yaml.YAMLError as exc:
        raise PublishError(f"priorities value is not valid YAML: {exc}") from exc
    return validate_priorities(parsed, ranking)


MANAGED_NODE_GROUPS: Final = "foresight.io/managed-node-groups"
"""Annotation: the JSON list of node group ids whose priorities Foresight writes.

Entries of the live ConfigMap that are not these groups' regexes (or the catch-all)
are an operator's and are kept (see :mod:`api.consumers.priority_merge`).
"""


def _managed_annotation(node_group_ids: Iterable[str]) -> dict[str, str]:
    ids = sorted(set(node_group_ids))
    return {MANAGED_NODE_GROUPS: json.dumps(ids, separators=(",", ":"))}


def priority_expander_configmap(
    pools: Sequence[PoolConfig],
    recommendations: Iterable[Recommendation],
    *,
    namespace: str = DEFAULT_NAMESPACE,
    spacing: int = DEFAULT_SPACING,
    reserved: Collection[int] = (),
) -> PriorityExpanderConfig:
    """Build the priority expander ConfigMap from the latest recommendations.

    Args:
        recommendations: the latest recommendation per pool.
        namespace: cluster-autoscaler's namespace.
        reserved: the priorities of the live ConfigMap's hand-made entries, which no
            pool may share.

    Returns:
        The ConfigMap, validated: every regex compiles with RE2 and matches exactly its
        pool's id, the value parses back to ``dict[int, list[str]]`` with plain integer
        keys, and the object matches the ``V1ConfigMap`` model.

    Raises:
        PublishError: any check fails; nothing invalid is ever returned.
    """
    require_dns_label(namespace, "namespace")
    ranking = rank_pools(pools, recommendations, spacing=spacing, reserved=reserved)
    priorities = build_priorities(ranking)
    value = render_priorities(priorities)
    parsed = validate_value_text(value, ranking)
    if parsed != {p: list(r) for p, r in priorities.items()}:
        raise PublishError("priorities value does not parse back to the map it was built from")
    manifest: Manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": CONFIGMAP_NAME,
            "namespace": namespace,
            "labels": dict(MANAGED_BY),
            "annotations": _managed_annotation(entry.node_group_id for entry in ranking),
        },
        "data": {CONFIGMAP_KEY: value},
    }
    check_typed((manifest, "V1ConfigMap"))
    text = to_yaml(manifest)
    if load_yaml(text) != manifest:
        raise PublishError("ConfigMap YAML does not parse back to the object it was built from")
    return PriorityExpanderConfig(namespace, priorities, ranking, value, manifest, text)
