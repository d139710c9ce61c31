"""The settings each policy of ``decision_quality.py`` is swept over: its frontier's points.

A frontier is every setting a user could choose, so a coarse grid understates a policy
wherever the cap falls between two of its points (the best gap at a cost or less is a
step function of the grid). Foresight and the buffers are swept at the same density.

- Foresight: its pool's ``quantile``; past the highest, its ``safety_margin``; a few
  lower quantiles with a margin too (:data:`LOW_MARGIN_QUANTILES` x :data:`LOW_MARGINS`:
  a pool's ``quantile`` and ``safety_margin`` are set together, and a margin on a
  lower quantile buys headroom at the jumps for less than a higher quantile); and a
  ``min_nodes`` floor (a pool setting the policy's bounds serve) at each static size of
  the prehistory, combined with a few quantiles and with :data:`FLOOR_MARGINS`, so that
  where a fixed size is the cheapest way to stop waiting Foresight can be that size
  and still follow the peaks above it with headroom. Margins apply only where the
  forecast carries a volatility scale (the peak model).
- Persistence and seasonal naive + ``k`` standard deviations: ``k`` from 0 to 6.
- A static ``mean + k sd`` of the prehistory's demand: ``k`` from 0 to 6.
- The pool's scale-down hold, for Foresight and the buffers alike: every quantile and
  every ``k`` also with no hold (:data:`NO_HOLD`: nodes shed as soon as they are not
  wanted). The hold is a pool setting every policy of a pool shares; where demand is
  spiky it sets the cost of every policy (Alibaba LoRA), so neither side is judged
  only at the default. Nothing is chosen: both settings are points of both frontiers.

The floors swept are chosen on the prehistory only: the static sizes whose fixed cost
there is at least :data:`FLOOR_MIN_COST` times the GPUs its demand occupied
(:func:`prehistory_cost`), never by their cost on the scored window: every size the
static buffer is swept at, so Foresight can always be that size and follow peaks above.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import timedelta
from typing import Final

import numpy as np
import pandas as pd

from pipelines.config.pools import PoolConfig
from policy.config import ScaleDownConfig

QUANTILES: Final = (
    *(0.05, 0.1, 0.2, 0.3, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9),
    *(0.95, 0.97, 0.98, 0.99, 0.995, 0.998, 0.999),
)
"""The pool's ``quantile`` values swept (the peak model is fitted at each, as the forecast
job fits it at every pool's level)."""
KS: Final = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0)
"""``k`` of the persistence and seasonal naive buffers."""
MARGINS: Final = (0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 12.0, 20.0, 30.0, 60.0)
"""``safety_margin`` values swept at the highest quantile (volatility units)."""
STATIC_KS: Final = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0)
"""``k`` of the static size ``mean + k sd`` of the prehistory's demand."""
LOW_MARGIN_QUANTILES: Final = (0.9, 0.95, 0.99)
"""Quantiles below the highest also swept with each of :data:`LOW_MARGINS`."""
LOW_MARGINS: Final = (1.0, 2.0, 3.0, 5.0)
"""``safety_margin`` values swept at each of :data:`LOW_MARGIN_QUANTILES` (volatility units)."""
FLOOR_QUANTILES: Final = (0.05, 0.9, 0.99)
"""Quantiles combined with each ``min_nodes`` floor."""
FLOOR_MARGINS: Final = ((0.99, 3.0),)
"""``(quantile, safety_margin)`` pairs also combined with each ``min_nodes`` floor."""
FLOOR_MIN_COST: Final = 1.0
"""The floors swept: those whose static size alone cost, on the prehistory, at least this
multiple of the GPUs its demand occupied (:func:`prehistory_cost`); a cheaper one sits
below the demand the reactive floor already serves. No upper bound: on a series that
grows after its prehistory a size that cost more than 1.5x there can cost 1.48x on the
replay (Earth total's static mean + 6 sd), and a floor past every cap only adds points past
them."""
NO_HOLD: Final = ScaleDownConfig(window=timedelta(0), max_step_nodes=1000)
"""The scale-down swept beside the pool's own: no window, no step limit."""
NO_HOLD_LABEL: Final = "+nohold"


def prehistory_cost(pre: pd.Series, pool: PoolConfig, nodes: int) -> float:
    """A fixed size's GPU-hours on the prehistory over those its demand occupied.

    The demand occupies ``ceil(demand / gpus per node)`` nodes each step (what an oracle
    provisions, booting aside); a fixed size pays ``nodes`` every step.
    """
    occupied = np.ceil(np.maximum(pre.to_numpy(dtype=float), 0.0) / pool.gpus_per_node - 1e-9)
    total = float(occupied.sum())
    return nodes * len(occupied) / total if total > 0 else math.inf


def no_hold(pool: PoolConfig) -> PoolConfig | None:
    """The pool with no scale-down hold, or None when it already has none."""
    if pool.scale_down == NO_HOLD:
        return None
    return pool.model_copy(update={"scale_down": NO_HOLD})


def static_sizes(pre: pd.Series, pool: PoolConfig) -> dict[float, int]:
    """Static sizes ``ceil((mean + k sd) / gpus per node)`` of the prehistory, per ``k``.

    Within the pool's bounds; a ``k`` giving a size an earlier ``k`` gave is left out.
    """
    mean, sd = float(pre.mean()), float(pre.std(ddof=0))
    sizes: dict[float, int] = {}
    for k in STATIC_KS:
        nodes = math.ceil(max(0.0, mean + k * sd) / pool.gpus_per_node - 1e-9)
        nodes = min(pool.max_nodes, max(pool.min_nodes, nodes))
        if nodes not in sizes.values():
            sizes[k] = nodes
    return sizes


def foresight_settings(
    pool: PoolConfig, *, margins: bool, floors: dict[int, float]
) -> Iterator[tuple[str, PoolConfig]]:
    """Foresight's swept pools, each with its label.

    Args:
        pool: the case's pool.
        margins: whether the forecast carries a scale (the peak model) so the safety
            margin applies (else no setting with a margin is swept).
        floors: ``min_nodes`` values to sweep, each with its static size's cost on the
            prehistory (:func:`prehistory_cost`; those below :data:`FLOOR_MIN_COST` are
            skipped).
    """
    for q in QUANTILES:
        yield f"q{q:g}", pool.model_copy(update={"quantile": q})
    unheld = no_hold(pool)
    if unheld is not None:
        for q in QUANTILES:
            yield f"q{q:g}{NO_HOLD_LABEL}", unheld.model_copy(update={"quantile": q})
    if margins:
        top = QUANTILES[-1]
        for m in MARGINS:
            yield f"q{top:g}+m{m:g}", pool.model_copy(update={"quantile": top, "safety_margin": m})
        for q in LOW_MARGIN_QUANTILES:
            for m in LOW_MARGINS:
                yield f"q{q:g}+m{m:g}", pool.model_copy(update={"quantile": q, "safety_margin": m})
    for nodes, cost in sorted(floors.items()):
        if not (cost >= FLOOR_MIN_COST and 0 < nodes <= pool.max_nodes):
            continue
        for q in FLOOR_QUANTILES:
            yield f"q{q:g}+min{nodes}", pool.model_copy(update={"quantile": q, "min_nodes": nodes})
        for q, m in FLOOR_MARGINS if margins else ():
            yield (
                f"q{q:g}+min{nodes}+m{m:g}",
                pool.model_copy(update={"quantile": q, "min_nodes": nodes, "safety_margin": m}),
            )
