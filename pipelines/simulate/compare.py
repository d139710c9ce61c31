"""Replay several policies on one pool's demand, and sweep Foresight's and the references' knobs.

Details: docs/simulate.md, "Notes from the code", `pipelines/simulate/compare.py`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Final, Literal, get_args

import pandas as pd

from forecaster.exceptions import ConfigError, DataValidationError
from forecaster.models.catalog import steps_in
from forecaster.types import Progress
from pipelines.config.pools import PoolConfig
from pipelines.config.settings import Settings
from pipelines.simulate.champion import CHAMPION, champion_forecaster
from pipelines.simulate.engine import simulate
from pipelines.simulate.foresight import ForesightPolicy
from pipelines.simulate.oracle import OraclePolicy
from pipelines.simulate.peak import PEAK, PeakReplayForecaster
from pipelines.simulate.reactive import ReactivePolicy
from pipelines.simulate.reference import Base, reference_policy
from pipelines.simulate.result import SimResult
from pipelines.simulate.static import smallest_static_meeting
from pipelines.simulate.types import History, Policy
from pipelines.simulate.walkforward import WalkForwardForecaster

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
REFERENCES: Final[dict[str, Base]] = {
    "reference": "persistence",
    "reference-seasonal": "seasonal_naive",
}
"""Reference policies by name, and the naive forecast under each one's margin."""

STATIC_GAP: Final = 0.9
"""The static size is the smallest that closes this share of reactive's gap to the oracle."""


@dataclass(frozen=True)
class Replay:
    """A pool's demand split into what is learnt from and what is replayed.

    Attributes:
        prehistory: demand before the replay (may be empty), seen by learning policies.
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
        forecaster: the forecaster shared by Foresight replays (walk-forward champion or
            family, or the peak-quantile forecaster).
        carry: the accounting (unmet work carried to the next step, or dropped).
    """

    replay: Replay
    runs: dict[str, SimResult]
    forecaster: WalkForwardForecaster | PeakReplayForecaster
    carry: bool = True

    @property
    def fit_log(self) -> list[pd.Timestamp]:
        """When the forecaster was fitted (the last observation each fit saw)."""
        return sorted(set(self.forecaster.fit_log))


def compare(
    replay: Replay,
    policies: Sequence[str],
    *,
    settings: Settings,
    model: str = CHAMPION,
    retrain_every: timedelta = timedelta(days=1),
    reference_k: float = 2.0,
    carry: bool = True,
    progress: Progress | None = None,
    fleet: pd.DataFrame | None = None,
    levels: Sequence[float] = (),
) -> Comparison:
    """Replay each named policy on the replay's demand.

    Args:
        policies: names from :data:`POLICY_NAMES`; ``static`` also needs reactive and the
            oracle (replayed for its budget even if not listed).
        settings: the deployment's settings: Foresight's model set and training plan.
        model: ``champion`` (what ``foresight train`` builds), ``peak`` (the peak-quantile
            forecaster learning from ``fleet``) or one family pinned.
        retrain_every: how often Foresight's forecaster is refitted.
        reference_k: the standard deviations of margin of the reference policies.
        carry: the accounting (see :func:`~pipelines.simulate.engine.simulate`).
        fleet: for ``peak``: the long frame it learns from, holding the replayed demand
            (its series id is the demand's name) and the pools' covariates.
        levels: for ``peak``: the quantiles a sweep will ask for (the pool's is added).

    Raises:
        ConfigError: an unknown policy name, or ``peak`` without a fleet.
    """
    unknown = sorted(set(policies) - set(POLICY_NAMES))
    if unknown:
        raise ConfigError(
            f"unknown policies {unknown}; choose from {', '.join(POLICY_NAMES)} "
            "(comma-separated, e.g. --policies reactive,static,foresight,oracle)"
        )
    demand, pool = replay.demand, replay.pool
    forecaster = _forecaster(replay, settings, model, retrain_every, fleet, levels)
    builders = _builders(replay, forecaster, reference_k)
    runs: dict[str, SimResult] = {}
    needed = [p for p in POLICY_NAMES if p in policies]
    if "static" in needed:
        needed = [*dict.fromkeys(["reactive", "oracle", *needed])]
    for i, name in enumerate(needed):
        if progress is not None:
            progress("policies", i, len(needed))
        if name == "static":
            runs[name] = _static(demand, pool, runs["reactive"], runs["oracle"], carry)
            continue
        policy = builders[name]()
        if progress is not None and name == "foresight":
            policy = _Reporting(policy, "foresight replay", len(demand), progress)
        runs[name] = simulate(demand, pool, policy, carry=carry)
    if progress is not None:
        progress("policies", len(needed), len(needed))
    ordered = {name: runs[name] for name in POLICY_NAMES if name in runs and name in policies}
    return Comparison(replay=replay, runs=ordered, forecaster=forecaster, carry=carry)


def _forecaster(
    replay: Replay,
    settings: Settings,
    model: str,
    retrain_every: timedelta,
    fleet: pd.DataFrame | None,
    levels: Sequence[float],
) -> WalkForwardForecaster | PeakReplayForecaster:
    """Build the forecaster every Foresight replay of ``replay`` shares (see :func:`compare`).

    Raises:
        ConfigError: ``peak`` without a fleet.
    """
    demand, pool = replay.demand, replay.pool
    step = demand.index[1] - demand.index[0]
    forecaster: WalkForwardForecaster | PeakReplayForecaster
    if model == PEAK:
        if fleet is None:
            raise ConfigError("--model peak needs the data the forecaster learns from (fleet)")
        wanted = sorted({pool.quantile, *levels})
        forecaster = PeakReplayForecaster(fleet, str(demand.name), wanted)
    else:
        forecaster = champion_forecaster(
            settings,
            step,
            family=model,
            retrain_every=retrain_every,
            prehistory=replay.prehistory,
            min_history=max(
                2, min(steps_in(pd.Timedelta(days=1), pd.Timedelta(step)), len(demand))
            ),
        )
    return forecaster


def _builders(
    replay: Replay,
    forecaster: WalkForwardForecaster | PeakReplayForecaster,
    reference_k: float,
) -> dict[str, Callable[[], Policy]]:
    """Return a maker of each policy :func:`compare` replays by name (``static`` aside)."""
    demand, pool = replay.demand, replay.pool
    return {
        "reactive": lambda: ReactivePolicy("packed"),
        "reactive-spread": lambda: ReactivePolicy("spread"),
        "oracle": lambda: OraclePolicy(demand),
        "foresight": lambda: ForesightPolicy(pool, forecaster),
        "reference": lambda: reference_policy(
            pool, "persistence", reference_k, prehistory=replay.prehistory
        ),
        "reference-seasonal": lambda: reference_policy(
            pool, "seasonal_naive", reference_k, prehistory=replay.prehistory
        ),
    }


def _static(
    demand: pd.Series, pool: PoolConfig, reactive: SimResult, oracle: SimResult, carry: bool
) -> SimResult:
    w_r, w_o = reactive.waiting_gpu_hours, oracle.waiting_gpu_hours
    budget = w_o + (1 - STATIC_GAP) * max(0.0, w_r - w_o)
    return smallest_static_meeting(demand, pool, max_waiting_gpu_hours=budget, carry=carry).result


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
        policy = ForesightPolicy(pool, comparison.forecaster)
        out[q] = simulate(replay.demand, pool, policy, carry=comparison.carry)
    if progress is not None:
        progress("quantile sweep", len(quantiles), len(quantiles))
    return out


def sweep_references(
    comparison: Comparison,
    ks: Sequence[float],
    *,
    names: Sequence[str] = tuple(REFERENCES),
    progress: Progress | None = None,
) -> dict[str, dict[float, SimResult]]:
    """Replay each reference at each ``k`` through the policy chain, with the pool's settings.

    Raises:
        ConfigError: a negative ``k`` or an unknown reference name.
    """
    bad = [k for k in ks if not k >= 0]
    if bad:
        raise ConfigError(f"reference margins {bad} are negative; sweep k such as 0,1,2,3")
    unknown = sorted(set(names) - set(REFERENCES))
    if unknown:
        raise ConfigError(f"unknown references {unknown}; choose from {', '.join(REFERENCES)}")
    replay = comparison.replay
    out: dict[str, dict[float, SimResult]] = {}
    total, done = len(names) * len(ks), 0
    for name in names:
        out[name] = {}
        for k in sorted(ks):
            if progress is not None:
                progress("reference sweep", done, total)
            policy = reference_policy(
                replay.pool, REFERENCES[name], k, prehistory=replay.prehistory
            )
            out[name][k] = simulate(replay.demand, replay.pool, policy, carry=comparison.carry)
            done += 1
    if progress is not None:
        progress("reference sweep", total, total)
    return out
