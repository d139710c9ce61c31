"""Every documented KEDA ``valueLocation`` reads a number in every mode (issue #36 item 7).

KEDA's ``metrics-api`` scaler reads one number from the served JSON with a GJSON path;
a path that is missing makes the trigger fail. The paths are collected from the docs
and the deploy examples and evaluated against the wire form the API serves
(:class:`~api.schemas.RecommendationSet` for ``/recommendation?pool=``,
:class:`~api.schemas.PoolRecommendation` for ``/recommendation/{pool}``) of a
predictive decision, a reactive one without any forecast, and a reactive one whose
forecast is not trusted.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from api.schemas import PoolRecommendation, RecommendationSet
from pipelines.config.pools import PoolConfig
from policy.decide import decide
from policy.recommendation import Recommendation
from policy.state import StabilisationState
from policy.types import NO_LATENCY, DemandForecast, ForecastHealth, LiveSignals, Sample

ROOT = Path(__file__).resolve().parents[3]
NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)
POOL = PoolConfig(name="a100", node_group_id="a100-asg", gpus_per_node=8, quantile=0.9)
_LOCATION = re.compile(r"""valueLocation:\s*(?:"([^"]+)"|'([^']+)'|([^\s"'#`]+))""")


def documented_paths() -> list[tuple[str, str]]:
    """``(file, path)`` of every valueLocation in the docs and the deploy examples."""
    files = [*sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "deploy").rglob("*.yaml"))]
    found = []
    for file in files:
        for match in _LOCATION.finditer(file.read_text(encoding="utf-8")):
            path = next(group for group in match.groups() if group)
            found.append((str(file.relative_to(ROOT)), path))
    return found


def gjson(document: Any, path: str) -> Any:
    """Evaluate the GJSON subset KEDA's examples use: dot paths, indexes, ``\\.`` escapes.

    Raises:
        KeyError: the path leads nowhere (KEDA's trigger would fail).
    """
    node = document
    for part in re.split(r"(?<!\\)\.", path):
        key = part.replace("\\.", ".")
        if isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        elif isinstance(node, dict) and key in node:
            node = node[key]
        else:
            raise KeyError(f"{path!r}: nothing at {key!r}")
    return node


def forecast() -> DemandForecast:
    return DemandForecast(
        timestamps=tuple(NOW + (5 + 10 * i) * MIN for i in range(3)),
        quantiles={0.5: (10.0, 18.5, 50.0), 0.9: (20.0, 37.0, 100.0)},
        level=0.9,
        model_version="7",
        generated_at=NOW - 2 * MIN,
        step=10 * MIN,
    )


def decision(mode: str) -> Recommendation:
    live = LiveSignals(Sample(10.0, NOW - MIN), Sample(4.0, NOW - MIN), Sample(35.0, NOW - MIN))
    trusted = ForecastHealth(0.8, 1.5, 5 * MIN, 30 * MIN, error_at=NOW - 5 * MIN)
    drifting = ForecastHealth(9.0, 1.5, 5 * MIN, 30 * MIN, error_at=NOW - 5 * MIN)
    given = {
        "predictive": (forecast(), trusted),
        "reactive, no forecast": (None, trusted),
        "reactive, forecast not trusted": (forecast(), drifting),
    }
    demand, health = given[mode]
    return decide(POOL, demand, live, health, NO_LATENCY, StabilisationState(), NOW)


MODES = ["predictive", "reactive, no forecast", "reactive, forecast not trusted"]


def test_the_docs_document_paths_to_check() -> None:
    paths = {path for _, path in documented_paths()}
    # A pattern that matched nothing would make the check below vacuous.
    assert {"pools.0.headroom_pods", "headroom_pods", "pools.0.forecast_quantiles.q0\\.9"} <= paths


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("where", "path"), documented_paths())
def test_each_documented_value_location_is_a_number(mode: str, where: str, path: str) -> None:
    rec = decision(mode)
    assert rec.mode == mode.split(",", maxsplit=1)[0]
    one = PoolRecommendation.of(rec)
    listed = RecommendationSet(generated_at=NOW, pools=[one]).model_dump(mode="json")
    served = listed if path.startswith("pools.") else one.model_dump(mode="json")

    value = gjson(served, path)

    assert isinstance(value, int | float), (where, path, value)
    assert not isinstance(value, bool), (where, path, value)


def test_without_a_forecast_the_quantiles_are_the_live_demand_the_decision_used() -> None:
    body = PoolRecommendation.of(decision("reactive, no forecast")).model_dump(mode="json")

    assert body["forecast_quantiles"] == {"q0.5": 10.0, "q0.9": 10.0, "q0.95": 10.0}
    assert body["explanation"]["inputs"]["live_demand_gpus"]["value"] == 10.0
