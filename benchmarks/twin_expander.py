"""cluster-autoscaler's priority expander, as the twin's cluster applies it.

Applied by the multi-pool twin's cluster (``benchmarks/twin_groups.py``); details:
docs/twin.md, "Notes from the code", `benchmarks/twin_expander.py`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import re2  # type: ignore[import-untyped]
import yaml

CONFIGMAP_KEY = "priorities"
"""The ConfigMap's data key cluster-autoscaler reads."""


class ExpanderConfigError(ValueError):
    """The ConfigMap or its ``priorities`` value is not what cluster-autoscaler reads."""


@dataclass(frozen=True)
class Priorities:
    """A parsed ``priorities`` value: priority -> compiled regexes.

    Attributes:
        entries: ``(priority, regex texts)``, highest priority first.
    """

    entries: tuple[tuple[int, tuple[str, ...]], ...]

    def priority_of(self, node_group_id: str) -> int | None:
        """The highest priority whose regexes match ``node_group_id``; None if none does."""
        for priority, patterns in self.entries:
            if any(re2.search(pattern, node_group_id) for pattern in patterns):
                return priority
        return None


def parse_priorities(value: str) -> Priorities:
    """Parse the ``priorities`` text as cluster-autoscaler reads it (``map[int][]string``).

    Raises:
        ExpanderConfigError: not YAML, a key is not a plain integer >= 0, or a value is
            not a non-empty list of regexes RE2 compiles.
    """
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError as exc:
        raise ExpanderConfigError(f"the priorities value is not YAML: {exc}") from exc
    if not isinstance(parsed, Mapping) or not parsed:
        raise ExpanderConfigError("the priorities value must be a non-empty mapping")
    entries: list[tuple[int, tuple[str, ...]]] = []
    for key, patterns in parsed.items():
        if isinstance(key, bool) or not isinstance(key, int) or key < 0:
            raise ExpanderConfigError(f"priority {key!r} is not a plain integer >= 0")
        if not isinstance(patterns, list) or not patterns:
            raise ExpanderConfigError(f"priority {key} must hold a non-empty list of regexes")
        for pattern in patterns:
            if not isinstance(pattern, str):
                raise ExpanderConfigError(f"priority {key} holds {pattern!r}, not a regex")
            try:
                re2.compile(pattern)
            except re2.error as exc:
                raise ExpanderConfigError(f"priority {key}: {pattern!r} is not RE2: {exc}") from exc
        entries.append((key, tuple(patterns)))
    return Priorities(tuple(sorted(entries, key=lambda entry: -entry[0])))


def priorities_of_configmap(manifest: Any) -> Priorities:
    """The ``priorities`` of a ConfigMap object (as parsed from its YAML).

    Raises:
        ExpanderConfigError: it is not a ConfigMap with a ``priorities`` key, or the
            value does not parse (:func:`parse_priorities`).
    """
    data = manifest.get("data") if isinstance(manifest, Mapping) else None
    if not isinstance(data, Mapping) or not isinstance(data.get(CONFIGMAP_KEY), str):
        raise ExpanderConfigError(
            f"expected a ConfigMap with data.{CONFIGMAP_KEY} (a YAML text), got {manifest!r:.200}"
        )
    return parse_priorities(data[CONFIGMAP_KEY])


def choose(priorities: Priorities, candidates: Sequence[str]) -> str | None:
    """The node group cluster-autoscaler grows among ``candidates`` (ids that can take it).

    The highest priority matching a candidate wins; candidates matching no entry are
    dropped unless none matches (then all stay); a tie goes to the id that sorts
    first (the twin's stand-in for the next expander). None when there is no candidate.
    """
    if not candidates:
        return None
    ranked = {group: priorities.priority_of(group) for group in candidates}
    matched = [p for p in ranked.values() if p is not None]
    if not matched:
        return min(candidates)
    best = max(matched)
    return min(group for group, p in ranked.items() if p == best)
