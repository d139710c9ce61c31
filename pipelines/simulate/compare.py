"""Replay several policies on one pool's demand, and sweep Foresight's quantile.

The glue between the simulator's policies and its users (``foresight simulate`` and
the decision-quality benchmark): it builds each policy by name, shares one
walk-forward forecaster between every Foresight replay of the same series (so a
quantile sweep fits the model once), and splits the series into a *prehistory* the
learning policies may look at before the replay starts and the replayed span.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Final, Literal, get_args

import pandas as pd

from forecaster.config.pools import PoolConfig
from forecaster.exceptions import ConfigError, DataValidationError
from forecaster.models.catalog import steps_in
from forecaster.models.ets import ExponentialSmoothing
from forecaster.models.naive import Persistence
from pipelines.simulate.engine import simulate
from pipelines.simulate.foresight import ForesightPolicy
from pipelines.simulate.oracle import OraclePolicy
from pipelines.simulate.reactive import ReactivePolicy
from pipelines.simulate.reference import ReferencePolicy
from pipelines.simulate.result import SimResult
from pipelines.simulate.static import smallest_static_meeting
from pipelines.simulate.types import History, Policy
from pipelines.simulate.walkforward import ModelFactory, WalkForwardForecaster

PolicyName = Literal[
    "reactive",
    "reactive-spread",
    "static",
    "foresight",
    "oracle",
    "reference",
    "reference-seasonal",
]
"""Policies ``foresight simulate`` can replay."""

POLICY_NAMES: Final = get_args(PolicyName)
ForecasterFamily = Literal["ets", "persistence"]
"""Forecaster families the walk-forward Foresight refits (cheap enough for months)."""

Progress = Callable[[str, int, int], None]
"""``(stage, done, total)`` callback, as ``pipelines.reporting.progress_bar`` yields."""

STATIC_GAP: Final = 0.9
"""The static size is the smallest that closes this share of reactive's gap to the oracle."""


@dataclass(frozen=True)
class Replay:
    """A pool's demand split into what is learnt from and what is replayed.

    Attributes:
        prehistory: demand before the replay (may be empty), seen by learning policies.
        demand: the replayed demand.
        pool: the pool config replayed.
    """

    prehistory: pd.Series
    demand: pd.Series
    pool: PoolConfig

    @classmethod
    def split(cls, demand: pd.Series, pool: PoolConfig, warmup: timedelta) -> Replay:
        """Keep the first ``warmup`` as prehistory, replay the rest.

        Raises:
            DataValidationError: fewer than two steps would be left to replay.
        """
        cut = demand.index[0] + warmup
        pre, rest = demand[demand.index < cut], demand[demand.index >= cut]
        if len(rest) < 2:
            raise DataValidationError(
                f"the series spans {demand.index[-1] - demand.index[0]}; a warm-up of {warmup} "
                "leaves nothing to replay; shorten --warmup"
            )
        return cls(prehistory=pre, demand=rest, pool=pool)


def model_factory(family: ForecasterFamily, step: timedelta, horizon: int) -> ModelFactory:
    """Return a factory of the forecaster refitted on the replay's schedule.

    ``ets`` (additive Holt-Winters with a daily season and damped trend, parameters
    estimated once per fit) gives the walk-forward forecast its daily shape;
    ``persistence`` makes it pure persistence with online conformal intervals.

    Raises:
        ConfigError: an unknown family.
    """
    day = steps_in(pd.Timedelta(days=1), pd.Timedelta(step))
    if family == "ets":
        return lambda: ExponentialSmoothing(
            season_length=day,
            horizon=horizon,
            max_history=14 * day,
            calibration_window=max(1, day // 3),
            select=False,
        )
    if family == "persistence":
        return lambda: Persistence(horizon=horizon, window=7 * day)
    raise ConfigError(
        f"unknown forecaster family {family!r}; use one of {get_args(ForecasterFamily)}"
    )


class _Reporting:
    """Wraps a policy to report progress every ``every`` steps (replays can be long)."""

    def __init__(self, inner: Policy, stage: str, total: int, report: Progress, every: int = 200):
        self.inner, self.stage, self.total, self.report, self.every = (
            inner,
            stage,
            total,
            report,
            every,
        )

    def reset(self) -> None:
        self.inner.reset()

    def decide(self, history: History) -> int:
        if history.t % self.every == 0 or history.t == self.total - 1:
            self.report(self.stage, history.t + 1, self.total)
        return self.inner.decide(history)


@dataclass
class Comparison:
    """Replays of one pool's demand by several policies, and the pieces to extend them.

    Attributes:
        replay: the prehistory, the replayed demand and the pool.
        runs: policy label -> its replay.
        forecaster: the walk-forward forecaster shared by Foresight replays.
    """

    replay: Replay
    runs: dict[str, SimResult]
    forecaster: WalkForwardForecaster


def compare(
    replay: Replay,
    policies: Sequence[str],
    *,
    family: ForecasterFamily = "ets",
    retrain_every: timedelta = timedelta(days=1),
    reference_k: float = 2.0,
    progress: Progress | None = None,
) -> Comparison:
    """Replay each named policy on the replay's demand.

    Args:
        replay: what to replay.
        policies: names from :data:`POLICY_NAMES`; ``static`` also needs reactive and the
            oracle (replayed for its budget even if not listed).
        family: Foresight's forecaster family.
        retrain_every: how often Foresight's forecaster is refitted.
        reference_k: the standard deviations of margin of the reference policies.
        progress: an optional ``(stage, done, total)`` callback.

    Raises:
        ConfigError: an unknown policy name.
    """
    unknown = sorted(set(policies) - set(POLICY_NAMES))
    if unknown:
        raise ConfigError(
            f"unknown policies {unknown}; choose from {', '.join(POLICY_NAMES)} "
            "(comma-separated, e.g. --policies reactive,static,foresight,oracle)"
        )
    demand, pool = replay.demand, replay.pool
    step = demand.index[1] - demand.index[0]
    forecaster = WalkForwardForecaster(
        model_factory(family, step, 2),  # the horizon is only the fit's own calibration
        retrain_every=retrain_every,
        min_history=min(steps_in(pd.Timedelta(days=1), pd.Timedelta(step)), len(demand)),
        max_history=None,
        prehistory=replay.prehistory,
    )
    builders: dict[str, Callable[[], Policy]] = {
        "reactive": lambda: ReactivePolicy("packed"),
        "reactive-spread": lambda: ReactivePolicy("spread"),
        "oracle": lambda: OraclePolicy(demand),
        "foresight": lambda: ForesightPolicy(pool, forecaster),
        "reference": lambda: ReferencePolicy(
            "persistence", reference_k, prehistory=replay.prehistory
        ),
        "reference-seasonal": lambda: ReferencePolicy(
            "seasonal_naive", reference_k, prehistory=replay.prehistory
        ),
    }
    runs: dict[str, SimResult] = {}
    needed = [p for p in POLICY_NAMES if p in policies]
    if "static" in needed:
        needed = [*dict.fromkeys(["reactive", "oracle", *needed])]
    for i, name in enumerate(needed):
        if progress is not None:
            progress("policies", i, len(needed))
        if name == "static":
            runs[name] = _static(demand, pool, runs["reactive"], runs["oracle"])
            continue
        policy = builders[name]()
        if progress is not None and name == "foresight":
            policy = _Reporting(policy, "foresight replay", len(demand), progress)
        runs[name] = simulate(demand, pool, policy)
    if progress is not None:
        progress("policies", len(needed), len(needed))
    ordered = {name: runs[name] for name in POLICY_NAMES if name in runs and name in policies}
    return Comparison(replay=replay, runs=ordered, forecaster=forecaster)


def _static(
    demand: pd.Series, pool: PoolConfig, reactive: SimResult, oracle: SimResult
) -> SimResult:
    w_r, w_o = reactive.waiting_gpu_hours, oracle.waiting_gpu_hours
    budget = w_o + (1 - STATIC_GAP) * max(0.0, w_r - w_o)
    return smallest_static_meeting(demand, pool, max_waiting_gpu_hours=budget).result


def sweep_quantiles(
    comparison: Comparison,
    quantiles: Sequence[float],
    *,
    progress: Progress | None = None,
) -> dict[float, SimResult]:
    """Replay Foresight at each quantile, reusing the comparison's forecaster.

    Raises:
        ConfigError: a quantile outside (0, 1).
    """
    bad = [q for q in quantiles if not 0 < q < 1]
    if bad:
        raise ConfigError(f"quantiles {bad} are outside (0, 1); sweep levels such as 0.8,0.9,0.95")
    out: dict[float, SimResult] = {}
    replay = comparison.replay
    for i, q in enumerate(sorted(quantiles)):
        if progress is not None:
            progress("quantile sweep", i, len(quantiles))
        pool = replay.pool.model_copy(update={"quantile": q})
        out[q] = simulate(replay.demand, pool, ForesightPolicy(pool, comparison.forecaster))
    if progress is not None:
        progress("quantile sweep", len(quantiles), len(quantiles))
    return out
