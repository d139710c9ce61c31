"""The one wire form of a recommendation: plain JSON numbers, UTC times, no state.

``GET /recommendation``, webhooks and the audit trail all write
:class:`api.schemas.PoolRecommendation`; these tests read what it writes.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

from api.consumers.webhooks import payload
from api.schemas import HeldLatencyOut, PoolRecommendation
from policy.decide import decide
from policy.explain import HeldLatency
from policy.recommendation import Recommendation
from policy.types import LatencyAdjustment
from tests.policy.test_decide import EMPTY, HEALTH, MIN, NOW, POOL, forecast, live


def decided(now: datetime = NOW) -> Recommendation:
    """A predictive decision that latency raised: 37 GPUs at q0.9 plus one node."""
    latency = LatencyAdjustment(1, "slow", services=("llm",))
    return decide(POOL, forecast(), live(), HEALTH, latency, EMPTY, now)


def wire(rec: Recommendation) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(PoolRecommendation.of(rec).model_dump_json())
    return found


def test_numbers_are_plain_json_and_times_are_utc_with_z() -> None:
    back = wire(decided())

    assert back["desired_nodes"] == 7
    assert isinstance(back["desired_nodes"], int)
    assert back["action"] == "scale_up"
    assert back["forecast_quantiles"] == {"q0.5": 18.5, "q0.9": 37.0}
    assert back["generated_at"] == "2024-05-01T12:00:00Z"
    assert back["valid_until"] == "2024-05-01T12:10:00Z"
    assert back["data_freshness_seconds"] == 30.0
    assert back["explanation"]["term"] == "latency"
    assert back["explanation"]["latency"] == {
        "extra_nodes": 1,
        "applied_nodes": 1,
        "not_gpu_bound": False,
        "reason": "slow",
        "services": ["llm"],
    }
    assert back["explanation"]["inputs"]["ready_nodes"] == {
        "value": 4.0,
        "at": "2024-05-01T11:59:40Z",
        "age_seconds": 20.0,
    }
    assert back["explanation"]["stages"]["forecast_nodes"] == 6
    assert back["explanation"]["settings"]["lead_time_seconds"] == 600.0
    assert "state" not in back


def test_a_decision_in_another_timezone_is_written_in_utc() -> None:
    plus_two = NOW.astimezone(timezone(timedelta(hours=2)))

    back = wire(decided(plus_two))

    assert back["generated_at"] == "2024-05-01T12:00:00Z"
    assert back["valid_until"] == "2024-05-01T12:10:00Z"


def test_held_latency_names_its_services_and_times() -> None:
    held = HeldLatency(2, ("llm",), NOW + 4 * MIN, NOW + 14 * MIN, "llm p95 800 ms vs SLO 400 ms")

    assert HeldLatencyOut.model_validate(held, from_attributes=True).model_dump(mode="json") == {
        "nodes": 2,
        "services": ["llm"],
        "until": "2024-05-01T12:04:00Z",
        "released_at": "2024-05-01T12:14:00Z",
        "reason": "llm p95 800 ms vs SLO 400 ms",
    }


def test_webhooks_deliver_the_same_pools_as_the_http_api() -> None:
    rec = decided()

    body = payload([rec], NOW)

    assert body == {"generated_at": "2024-05-01T12:00:00Z", "pools": [wire(rec)]}
