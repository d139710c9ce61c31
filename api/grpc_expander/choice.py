"""Which of the offered node groups to grow: the priority ConfigMap's rule, applied live.

cluster-autoscaler's gRPC expander offers the node groups that could absorb the
pending pods and keeps those the answer names. Foresight ranks them exactly as the
priority-expander ConfigMap would (:func:`~api.consumers.priority_expander.rank_pools`:
largest predicted shortfall, then cheaper per GPU, then name; every pool above the
catch-all) but with the recommendations of this moment instead of those of the last
publish. The offered group of the best-ranked pool is the answer. With no offered
group among Foresight's pools there is no opinion, and the answer is every option:
an empty answer would make cluster-autoscaler skip the scale-up altogether.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from api.consumers.priority_expander import RankedPool

Basis = Literal["ranked", "no_opinion"]
"""``ranked``: one option chosen by the ranking; ``no_opinion``: every option returned."""


@dataclass(frozen=True)
class Choice:
    """The node groups to prefer and why.

    Attributes:
        node_group_ids: the offered ids to keep, in the order offered.
        basis: whether the ranking chose, or every option passed through.
        reason: one line for logs: the pool chosen and its place, or why none was.
    """

    node_group_ids: tuple[str, ...]
    basis: Basis
    reason: str


def choose(offered: Sequence[str], ranking: Sequence[RankedPool]) -> Choice:
    """Return the offered node groups to prefer under ``ranking``.

    Args:
        offered: the node group ids of the options, as cluster-autoscaler sent them.
        ranking: Foresight's pools in priority order (:func:`rank_pools`).

    Returns:
        The best-ranked offered group alone, or every offered id when none of them is
        one of Foresight's pools.
    """
    by_id = {entry.node_group_id: entry for entry in ranking}
    known = [by_id[node_group] for node_group in dict.fromkeys(offered) if node_group in by_id]
    if not known:
        return Choice(
            tuple(offered),
            "no_opinion",
            f"none of the {len(offered)} offered node groups is a Foresight pool",
        )
    best = max(known, key=lambda entry: entry.priority)
    shortfall = (
        "no recommendation"
        if best.shortfall_gpus is None
        else (f"shortfall {best.shortfall_gpus} GPUs")
    )
    return Choice(
        (best.node_group_id,),
        "ranked",
        f"pool {best.pool} (priority {best.priority}, {shortfall}) "
        f"of {len(known)} Foresight pools offered",
    )
