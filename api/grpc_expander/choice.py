"""Which of the offered node groups to grow: the merged priority ConfigMap, applied live.

Details: docs/consumers.md, "Notes from the code", `api/grpc_expander/choice.py`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from api.consumers.go_regex import compile_re2
from api.consumers.priority_expander import CATCH_ALL_PRIORITY, RankedPool
from api.settings import ExpanderReactive
from pipelines.errors import PublishError

Basis = Literal["ranked", "operator_tier", "no_opinion"]
"""``ranked``: a Foresight pool's number decided; ``operator_tier``: a hand-made entry
did; ``no_opinion``: every option returned."""

Tiers = Mapping[int, tuple[str, ...]]
"""Hand-made entries of the priority ConfigMap: priority -> regexes."""


@dataclass(frozen=True)
class ExpanderView:
    """What the expander decides from, computed together (with a time budget).

    Attributes:
        ranking: Foresight's pools, their priorities clear of the hand-made numbers.
        tiers: the live ConfigMap's hand-made entries; None when they are unknown.
        problem: why ``tiers`` is None (or what was odd about them).
    """

    ranking: tuple[RankedPool, ...]
    tiers: Tiers | None
    problem: str = ""
    compiled: tuple[tuple[int, Any], ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def of(
        cls, ranking: Sequence[RankedPool], tiers: Tiers | None, problem: str = ""
    ) -> ExpanderView:
        """Build the view, compiling the hand-made regexes once.

        A regex RE2 refuses makes cluster-autoscaler ignore the whole ConfigMap, so
        the tiers count as unknown then (no opinion) rather than half applied.
        """
        if tiers is None:
            return cls(tuple(ranking), None, problem)
        try:
            compiled = tuple(
                (priority, compile_re2(regex))
                for priority, regexes in tiers.items()
                for regex in regexes
            )
        except PublishError as exc:
            return cls(tuple(ranking), None, f"a hand-made entry is invalid: {exc}")
        return cls(tuple(ranking), dict(tiers), problem, compiled)


@dataclass(frozen=True)
class Choice:
    """The node groups to prefer and why.

    Attributes:
        node_group_ids: the offered ids to keep, in the order offered.
        basis: what decided (:data:`Basis`).
        reason: one line for logs: what decided and among how many.
    """

    node_group_ids: tuple[str, ...]
    basis: Basis
    reason: str


def choose(
    offered: Sequence[str], view: ExpanderView, reactive: ExpanderReactive = "no_opinion"
) -> Choice:
    """Return the offered node groups to prefer.

    Args:
        offered: the node group ids of the options, as cluster-autoscaler sent them.
        reactive: ``no_opinion``: an offered pool without a trusted forecast means
            every option back; ``rank``: it is ranked like the others.

    Returns:
        The offered groups at the highest priority (several on a tie), or every one.
    """
    ids = list(dict.fromkeys(offered))
    if view.tiers is None:
        return _all(offered, f"hand-made priority tiers unknown ({view.problem})")
    by_id = {entry.node_group_id: entry for entry in view.ranking}
    known = [by_id[node_group] for node_group in ids if node_group in by_id]
    unsure = [entry.pool for entry in known if entry.mode != "predictive"]
    if unsure and reactive == "no_opinion":
        return _all(offered, f"no trusted forecast for {', '.join(unsure)} (reactive mode)")
    best: dict[str, int] = {}
    decided_by: dict[str, Basis] = {}
    for node_group in ids:
        best[node_group], decided_by[node_group] = CATCH_ALL_PRIORITY, "no_opinion"
        entry = by_id.get(node_group)
        if entry is not None and entry.priority > best[node_group]:
            best[node_group], decided_by[node_group] = entry.priority, "ranked"
        for priority, regex in view.compiled:
            # Unanchored, as cluster-autoscaler matches (FindStringIndex).
            if priority > best[node_group] and regex.search(node_group) is not None:
                best[node_group], decided_by[node_group] = priority, "operator_tier"
    top = max(best.values())
    keep = tuple(node_group for node_group in ids if best[node_group] == top)
    basis = decided_by[keep[0]]
    if basis == "no_opinion":
        return _all(offered, "no offered group is a Foresight pool or in a hand-made tier")
    what = "hand-made tier" if basis == "operator_tier" else "Foresight's ranking"
    names = ", ".join(keep)
    return Choice(keep, basis, f"priority {top} ({what}): {names} of {len(ids)} offered")


def _all(offered: Sequence[str], why: str) -> Choice:
    return Choice(tuple(dict.fromkeys(offered)), "no_opinion", why)
