"""Merging Foresight's priorities into a live priority-expander ConfigMap (docs/consumers.md)."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Collection, Mapping
from typing import Any, Final

import yaml

from api.consumers.go_regex import compile_re2
from api.consumers.k8s import Manifest, load_yaml
from api.consumers.priority_expander import (
    CATCH_ALL,
    CATCH_ALL_PRIORITY,
    CONFIGMAP_KEY,
    CONFIGMAP_NAME,
    MANAGED_NODE_GROUPS,
    node_group_regex,
    render_priorities,
    validate_value_text,
)
from api.settings import ClusterAutoscalerVersion
from pipelines.errors import PublishError

NEWEST_VERSION: Final[ClusterAutoscalerVersion] = "1.36"
"""The newest cluster-autoscaler release checked (1.36.1); the setting's default."""

_QUOTED_KEYS_FROM: Final = (1, 35)
"""The first release reading ``priorities`` through ``sigs.k8s.io/yaml``."""

_DECIMAL: Final = re.compile(r"[0-9]+")


def accepts_quoted_keys(version: ClusterAutoscalerVersion) -> bool:
    """Whether cluster-autoscaler ``version`` reads a quoted decimal key such as ``"15":``."""
    major, minor = (int(part) for part in version.split("."))
    return (major, minor) >= _QUOTED_KEYS_FROM


class PriorityConflictError(PublishError):
    """The live ConfigMap holds an entry Foresight did not write that it cannot keep."""


def managed_node_groups(manifest: Manifest) -> list[str] | None:
    """Return the node group ids a ConfigMap's annotation records, None without one.

    Raises:
        PublishError: the annotation is there but is not a JSON list of strings.
    """
    annotations = (manifest.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(MANAGED_NODE_GROUPS)
    if text is None:
        return None
    try:
        value = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise PublishError(
            f"annotation {MANAGED_NODE_GROUPS} is not JSON ({exc}); remove it and publish again"
        ) from exc
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise PublishError(
            f"annotation {MANAGED_NODE_GROUPS} must be a JSON list of node group ids, "
            f"got {text!r}; remove it and publish again"
        )
    return value


def is_priority_configmap(manifest: Manifest) -> bool:
    """Whether ``manifest`` is the priority-expander ConfigMap."""
    metadata = manifest.get("metadata") or {}
    return manifest.get("kind") == "ConfigMap" and metadata.get("name") == CONFIGMAP_NAME


def merge_priorities(
    existing: Manifest, desired: Manifest, *, version: ClusterAutoscalerVersion = NEWEST_VERSION
) -> Manifest:
    """Return ``desired`` with the entries of ``existing`` that Foresight did not write added.

    Args:
        existing: the live ConfigMap (owned by Foresight: the caller checked the label).
        desired: the ConfigMap Foresight built, with its :data:`MANAGED_NODE_GROUPS`
            annotation.
        version: the cluster-autoscaler version reading it (quoted keys).

    Returns:
        A copy of ``desired`` whose ``priorities`` also hold the operator's entries, at
        their own priorities after Foresight's regexes; validated as cluster-autoscaler
        reads it.

    Raises:
        PriorityConflictError: the live value does not parse, or an entry Foresight did
            not write matches one of its node groups or sits at the catch-all's priority.
        PublishError: ``desired`` has no annotation or an invalid value.
    """
    current = managed_node_groups(desired)
    if current is None:
        raise PublishError(f"the desired ConfigMap has no {MANAGED_NODE_GROUPS} annotation")
    wanted = validate_value_text(desired["data"][CONFIGMAP_KEY])
    extra = operator_entries(existing, current, version=version)
    if not extra:
        return desired
    _check_conflicts(extra, current)
    merged: dict[int, list[str]] = {p: list(r) for p, r in wanted.items()}
    for priority, regexes in extra.items():
        # ``desired`` may carry them already (merged once to show a dry run).
        kept = merged.get(priority, [])
        merged[priority] = [*kept, *(r for r in regexes if r not in kept)]
    value = render_priorities(merged)
    validate_value_text(value)
    result = copy.deepcopy(desired)
    result["data"][CONFIGMAP_KEY] = value
    return result


def operator_entries(
    live: Manifest,
    managed: Collection[str],
    *,
    version: ClusterAutoscalerVersion = NEWEST_VERSION,
) -> dict[int, list[str]]:
    """Return the entries of a live ConfigMap that Foresight did not write, by priority.

    Args:
        live: the live ConfigMap, Foresight's or hand-made.
        managed: the node group ids of Foresight's pools now.
        version: the cluster-autoscaler version reading it (quoted keys).

    Raises:
        PriorityConflictError: the value does not parse, or an entry's key is not one
            cluster-autoscaler ``version`` reads as an integer.
        PublishError: the annotation is not a JSON list.
    """
    live_text = (live.get("data") or {}).get(CONFIGMAP_KEY)
    if live_text is None:
        return {}
    previous = managed_node_groups(live)
    # Written before the annotation existed (or by hand): Foresight's entries are the
    # ones it would write now (and the catch-all); anything else is the operator's.
    owned_ids = set(managed) | set(previous if previous is not None else managed)
    owned = {node_group_regex(node_group) for node_group in owned_ids} | {CATCH_ALL}
    return _operator_entries(_parse_live(live_text), owned, version)


def _parse_live(text: Any) -> Mapping[Any, Any]:
    if not isinstance(text, str):
        raise PriorityConflictError(
            f"the live {CONFIGMAP_KEY!r} of {CONFIGMAP_NAME} is not text; fix or delete it"
        )
    try:
        parsed = load_yaml(text)
    except yaml.YAMLError as exc:
        raise PriorityConflictError(
            f"the live {CONFIGMAP_KEY!r} of {CONFIGMAP_NAME} is not valid YAML ({exc}); "
            "Foresight will not overwrite what it cannot read: fix or delete it"
        ) from exc
    if not isinstance(parsed, Mapping):
        raise PriorityConflictError(
            f"the live {CONFIGMAP_KEY!r} of {CONFIGMAP_NAME} is not a map of priority to "
            "regexes; fix or delete it"
        )
    return parsed


def _operator_entries(
    live: Mapping[Any, Any], owned: set[str], version: ClusterAutoscalerVersion
) -> dict[int, list[str]]:
    """Return the live entries Foresight did not write, by priority, in their order."""
    extra: dict[int, list[str]] = {}
    for key, regexes in live.items():
        items = regexes if isinstance(regexes, list) else [regexes]
        mine = [r for r in items if not (isinstance(r, str) and r in owned)]
        if not mine:
            continue
        priority = _priority_key(key, mine, version)
        for pattern in mine:
            if not isinstance(pattern, str) or not pattern:
                raise PriorityConflictError(
                    f"the live entry at priority {priority} holds {pattern!r}, not a regex; fix it"
                )
        # '15:' and '"15":' are one priority to a reader that accepts both.
        extra[priority] = [*extra.get(priority, []), *mine]
    return extra


def _priority_key(key: Any, entry: list[Any], version: ClusterAutoscalerVersion) -> int:
    """Return a live key as cluster-autoscaler ``version`` reads it, or refuse it."""
    if isinstance(key, int) and not isinstance(key, bool):
        return key
    quoted = isinstance(key, str) and _DECIMAL.fullmatch(key) is not None
    if quoted and accepts_quoted_keys(version):
        return int(key)
    if quoted:
        raise PriorityConflictError(
            f"the live entry {key!r}: {entry} of {CONFIGMAP_NAME} has a quoted priority; "
            f"cluster-autoscaler {version} (publish.cluster_autoscaler_version) reads the "
            "value with gopkg.in/yaml.v2, which refuses a quoted key, so it ignores this "
            f"ConfigMap today; write the key unquoted ({key}:), or set "
            "publish.cluster_autoscaler_version to your release if it is 1.35 or later"
        )
    raise PriorityConflictError(
        f"the live entry {key!r}: {entry} of {CONFIGMAP_NAME} does not have an integer "
        f"priority, which cluster-autoscaler {version} requires (map[int][]string); "
        "write a plain integer key such as 15: or delete the entry"
    )


def _check_conflicts(extra: Mapping[int, list[str]], managed: list[str]) -> None:
    for priority, regexes in sorted(extra.items(), reverse=True):
        for pattern in regexes:
            if priority <= CATCH_ALL_PRIORITY:
                raise PriorityConflictError(
                    f"the entry {pattern!r} at priority {priority} was not written by "
                    f"Foresight and sits at the catch-all's priority {CATCH_ALL_PRIORITY}; "
                    "move it to a priority above 0 or delete it"
                )
            compiled = compile_re2(pattern)
            # Unanchored search, as cluster-autoscaler matches.
            clashes = [node_group for node_group in managed if compiled.search(node_group)]
            if clashes:
                raise PriorityConflictError(
                    f"the entry {pattern!r} at priority {priority} was not written by "
                    f"Foresight but matches node group {clashes[0]!r}, whose priority "
                    "Foresight manages; remove the entry (or narrow it), or remove that "
                    "pool from the pools file"
                )
