"""Replay a demand trace against scaling policies and account for GPU-hours and waiting.

:func:`simulate` is the engine (the model is in :mod:`pipelines.simulate.engine`);
policies are small objects behind the :class:`Policy` protocol: :class:`ReactivePolicy`
(cluster-autoscaler), :class:`StaticPolicy` (with :func:`smallest_static_meeting`) and
:class:`OraclePolicy` (knows the future). :func:`plot_runs` draws demand against each
policy's capacity.
"""

from pipelines.simulate.engine import demand_index, simulate
from pipelines.simulate.oracle import OraclePolicy, zero_wait_nodes
from pipelines.simulate.plot import plot_runs
from pipelines.simulate.reactive import ReactivePolicy, Utilisation
from pipelines.simulate.result import FRAME_COLUMNS, SimResult, weighted_quantile
from pipelines.simulate.static import StaticChoice, StaticPolicy, smallest_static_meeting
from pipelines.simulate.types import DeclaresStart, History, Policy, PoolLike, SimPool

__all__ = [
    "FRAME_COLUMNS",
    "DeclaresStart",
    "History",
    "OraclePolicy",
    "Policy",
    "PoolLike",
    "ReactivePolicy",
    "SimPool",
    "SimResult",
    "StaticChoice",
    "StaticPolicy",
    "Utilisation",
    "demand_index",
    "plot_runs",
    "simulate",
    "smallest_static_meeting",
    "weighted_quantile",
    "zero_wait_nodes",
]
