"""The scale policy: pure functions from forecast and live signals to a recommendation.

The chain (each step a public function, ``decide`` composes them):
forecast -> :func:`peak_demand` / :func:`nodes_for_gpus` -> :func:`add_latency` ->
:func:`reactive_floor` -> :func:`assess_health` -> :func:`clamp` -> :func:`stabilise`
-> :class:`Recommendation` with its :class:`Explanation`.
"""

from policy.bounds import clamp
from policy.decide import decide
from policy.explain import Explanation, HeldLatency, InputReading, Stages, term_that_set
from policy.floor import apply_floor, reactive_floor
from policy.health import HealthVerdict, assess_health, covers_window
from policy.need import PeakDemand, add_latency, ceil_nodes, nodes_for_gpus, peak_demand
from policy.peak import PeakForecast
from policy.recommendation import Recommendation, action_for, headroom
from policy.stabilise import StabilisationLimit, Stabilised, record, stabilise
from policy.state import DesiredSpan, LatencyCause, StabilisationState
from policy.types import (
    DEFAULT_VALIDITY,
    NO_LATENCY,
    Action,
    Calibration,
    DemandForecast,
    ForecastHealth,
    HealthReason,
    LatencyAdjustment,
    LiveSignals,
    Mode,
    Sample,
    Term,
)

__all__ = [
    "DEFAULT_VALIDITY",
    "NO_LATENCY",
    "Action",
    "Calibration",
    "DemandForecast",
    "DesiredSpan",
    "Explanation",
    "ForecastHealth",
    "HealthReason",
    "HealthVerdict",
    "HeldLatency",
    "InputReading",
    "LatencyAdjustment",
    "LatencyCause",
    "LiveSignals",
    "Mode",
    "PeakDemand",
    "PeakForecast",
    "Recommendation",
    "Sample",
    "StabilisationLimit",
    "StabilisationState",
    "Stabilised",
    "Stages",
    "Term",
    "action_for",
    "add_latency",
    "apply_floor",
    "assess_health",
    "ceil_nodes",
    "clamp",
    "covers_window",
    "decide",
    "headroom",
    "nodes_for_gpus",
    "peak_demand",
    "reactive_floor",
    "record",
    "stabilise",
    "term_that_set",
]
