"""Reactive autoscaling with cluster-autoscaler's semantics, the baseline to beat.

Details: docs/simulate.md, "Notes from the code", `pipelines/simulate/reactive.py`."""

from __future__ import annotations

from datetime import timedelta
from typing import Literal, get_args

from pipelines.simulate.types import History
from policy.need import ceil_nodes

Utilisation = Literal["packed", "spread"]
"""Where the work sits on the nodes when measuring their utilisation."""


class ReactivePolicy:
    """Cluster-autoscaler: add nodes for pending work, remove long-unneeded ones."""

    def __init__(
        self,
        utilisation: Utilisation = "packed",
        *,
        scale_down_utilization_threshold: float = 0.5,
        scale_down_unneeded_time: timedelta = timedelta(minutes=10),
        scale_down_delay_after_add: timedelta = timedelta(minutes=10),
    ) -> None:
        """Store the variant and cluster-autoscaler's flags (their defaults are CA's).

        Raises:
            ValueError: an unknown variant, a threshold outside [0, 1] or a negative time.
        """
        if utilisation not in get_args(Utilisation):
            raise ValueError(
                f"utilisation must be one of {get_args(Utilisation)}, got {utilisation!r}"
            )
        if not 0.0 <= scale_down_utilization_threshold <= 1.0:
            raise ValueError(
                "scale_down_utilization_threshold must be in [0, 1], got "
                f"{scale_down_utilization_threshold}"
            )
        if scale_down_unneeded_time < timedelta(0) or scale_down_delay_after_add < timedelta(0):
            raise ValueError("scale_down_unneeded_time and scale_down_delay_after_add must be >= 0")
        self.utilisation = utilisation
        self.scale_down_utilization_threshold = scale_down_utilization_threshold
        self.scale_down_unneeded_time = scale_down_unneeded_time
        self.scale_down_delay_after_add = scale_down_delay_after_add
        self._unneeded_since: list[int] = []  # one step per unneeded node, oldest first
        self._last_scale_up: int | None = None

    def reset(self) -> None:
        """Forget the unneeded clocks and the last scale-up."""
        self._unneeded_since = []
        self._last_scale_up = None

    def decide(self, history: History) -> int:
        """Return the nodes cluster-autoscaler would want after observing ``history``."""
        t, gpn = history.t, history.pool.gpus_per_node
        ready, held = history.ready_now, history.ready_now + history.pending_now
        wanted = history.wanted_now
        need = ceil_nodes(wanted / gpn)
        if need > held:
            self._last_scale_up = t
            self._unneeded_since = []
            return need

        unneeded = self.unneeded_nodes(min(wanted, ready * gpn), ready, gpn)
        since = self._unneeded_since
        if unneeded > len(since):
            since.extend([t] * (unneeded - len(since)))
        else:
            del since[unneeded:]
        if self._within_delay_after_add(history):
            return held
        step = history.pool.step
        due = sum(1 for s in since if (t - s) * step >= self.scale_down_unneeded_time)
        del since[:due]
        return held - due

    def unneeded_nodes(self, used_gpus: float, ready: int, gpus_per_node: int) -> int:
        """Return how many of ``ready`` nodes are unneeded with ``used_gpus`` running."""
        if ready == 0:
            return 0
        spare = ready - ceil_nodes(used_gpus / gpus_per_node)
        threshold = self.scale_down_utilization_threshold
        if self.utilisation == "packed":
            # Spare nodes are empty (utilisation 0): unneeded unless the threshold is 0.
            return spare if threshold > 0 else 0
        utilisation = used_gpus / (ready * gpus_per_node)
        return spare if utilisation < threshold else 0

    def _within_delay_after_add(self, history: History) -> bool:
        if self._last_scale_up is None:
            return False
        elapsed = (history.t - self._last_scale_up) * history.pool.step
        return elapsed < self.scale_down_delay_after_add
