"""GET /scorecard, /scorecard/{pool} and the scorecard gauges, over a recorded history.

The expected figures are summed here from the history's own frame (each 5-min sample
held for 5 minutes), apart from the code under test.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from api.scorecard_metrics import ScorecardCollector
from api.service import RecommendationService
from api.services import Services
from pipelines.store.store import Store
from tests.api.app.conftest import END, STEP, history

HOURS_PER_SAMPLE = STEP / timedelta(hours=1)
PLENTY = 40
"""Nodes of a plan that covers every demand of the synthetic history (8 GPUs each)."""


def _last_day(pool: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Demand and nodes of the samples in [END - 1 day, END), as the store holds them."""
    frame = history(pool, seed=seed)
    frame = frame[(frame["ds"] >= END - timedelta(days=1)) & (frame["ds"] < END)]
    by = {name: part.sort_values("ds")["y"].to_numpy() for name, part in frame.groupby("unique_id")}
    return by[f"{pool}/demand_gpus"], by[f"{pool}/nodes"]


def _waiting(demand: np.ndarray, nodes: np.ndarray | float, gpus: int) -> float:
    return float(np.sum(np.maximum(0.0, demand - np.asarray(nodes) * gpus)) * HOURS_PER_SAMPLE)


def test_shadow_mode_records_what_it_recommended(services: Services, client: TestClient) -> None:
    # Forecast-only (the default): nothing is written to a cluster, the trail still fills.
    assert services.settings.service.forecast_only
    assert services.store.recommendations.latest("alpha") is None
    client.get("/recommendation")
    recorded = services.store.recommendations.latest("alpha")
    assert recorded is not None
    assert recorded.generated_at == END


def test_a_plan_equal_to_reality_then_a_generous_one(store: Store, client: TestClient) -> None:
    # A plan of 0 nodes is never above what existed: the plan is what happened.
    store.recommendations.append("alpha", END - timedelta(days=3), 0, "hold", {})
    demand, nodes = _last_day("alpha", seed=0)
    body = client.get("/scorecard/alpha").json()
    day = body["windows"]["day"]
    assert day["samples"] == len(demand) == 288
    assert day["coverage"] == pytest.approx(1.0)
    assert day["waiting_gpu_hours"]["actual"] == pytest.approx(_waiting(demand, nodes, 8))
    assert day["waiting_gpu_hours"]["actual"] > 0
    assert day["waiting_gpu_hours"]["difference"] == 0.0
    assert day["node_hours"]["actual"] == pytest.approx(nodes.sum() * HOURS_PER_SAMPLE)
    # The history holds two days up to END; the sample at END (now) is not before the end.
    assert body["windows"]["week"]["samples"] == 2 * 288 - 1
    assert body["windows"]["week"]["coverage"] == pytest.approx((2 * 288 - 1) / (7 * 288))
    assert len(body["timeline"]) == 288
    assert body["timeline"][-1]["plan_nodes"] == body["timeline"][-1]["nodes"]

    # From one lead time (10 min) before the day on, 40 nodes were asked for.
    store.recommendations.append("alpha", END - timedelta(days=1, minutes=10), PLENTY, "hold", {})
    day = client.get("/scorecard/alpha", params={"window": "day"}).json()["windows"]["day"]
    assert day["waiting_gpu_hours"]["plan"] == 0.0
    assert day["waiting_gpu_hours_avoided"] == pytest.approx(_waiting(demand, nodes, 8))
    added = float(np.sum(PLENTY - nodes)) * HOURS_PER_SAMPLE
    assert day["node_hours_added"] == pytest.approx(added)
    assert day["added_cost"] == pytest.approx(added * 32.77)


def test_the_list_answers_every_pool_without_timelines(store: Store, client: TestClient) -> None:
    store.recommendations.append("beta", END - timedelta(hours=2), 3, "hold", {})
    body = client.get("/scorecard", params={"window": "week"}).json()
    assert [card["pool"] for card in body["pools"]] == ["alpha", "beta"]
    assert "t - lead_time" in body["definition"]
    alpha, beta = body["pools"]
    assert list(alpha["windows"]) == ["week"]
    assert alpha["windows"]["week"]["samples"] == 0  # alpha has no recommendation yet
    assert alpha["recommendations"] == 0
    assert alpha["timeline"] is None
    # Beta's one recommendation is in force from END - 2 h + 15 min: 21 samples.
    assert beta["windows"]["week"]["samples"] == 21
    assert beta["recommendations"] == 1


def test_bad_input_gets_a_4xx_that_says_what_to_fix(client: TestClient) -> None:
    unknown = client.get("/scorecard/gamma")
    assert unknown.status_code == 404
    assert unknown.json()["known_pools"] == ["alpha", "beta"]
    assert "alpha, beta" in unknown.json()["message"]
    listed = client.get("/scorecard", params={"pool": ["alpha", "nope"]})
    assert listed.status_code == 404
    assert "'nope'" in listed.json()["message"]
    for path in ("/scorecard", "/scorecard/alpha"):
        bad = client.get(path, params={"window": "month"})
        assert bad.status_code == 422
        assert "window" in bad.json()["message"]
        assert "'day' or 'week'" in bad.json()["message"]


def test_the_gauges_carry_both_sides_per_window(store: Store, client: TestClient) -> None:
    store.recommendations.append("alpha", END - timedelta(days=3), PLENTY, "hold", {})
    demand, nodes = _last_day("alpha", seed=0)
    text = client.get("/metrics").text
    got = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.startswith("foresight_scorecard_")
    }

    def key(name: str, window: str, side: str | None = None) -> tuple[str, tuple]:
        labels = {"pool": "alpha", "window": window} | ({"side": side} if side else {})
        return f"foresight_scorecard_{name}", tuple(sorted(labels.items()))

    assert got[key("waiting_gpu_hours", "day", "actual")] == pytest.approx(
        _waiting(demand, nodes, 8)
    )
    assert got[key("waiting_gpu_hours", "day", "plan")] == 0.0
    assert got[key("node_hours", "day", "plan")] == pytest.approx(PLENTY * 24.0)
    assert got[key("coverage_ratio", "week")] == pytest.approx((2 * 288 - 1) / (7 * 288))
    assert got[key("samples", "day")] == 288
    # Beta has no recommendation: its gauges say so with zero coverage.
    beta = ("foresight_scorecard_samples", (("pool", "beta"), ("window", "day")))
    assert got[beta] == 0


def test_the_timeline_is_thinned_to_a_plot_size(store: Store, client: TestClient) -> None:
    # Two days at 5 min are 575 samples before END; the week's timeline keeps 500, in order.
    store.recommendations.append("alpha", END - timedelta(days=3), 0, "hold", {})
    body = client.get("/scorecard/alpha", params={"window": "week"}).json()
    stamps = pd.to_datetime([point["ds"] for point in body["timeline"]])
    assert len(stamps) == 500
    assert stamps.is_monotonic_increasing
    assert stamps.is_unique
    assert stamps[-1] == pd.Timestamp(END - STEP)


def test_scrapes_reuse_one_scoring_for_a_minute(services: Services, store: Store) -> None:
    service = RecommendationService(services)
    ticks = [0.0]
    collector = ScorecardCollector(lambda: service, max_age_seconds=60, monotonic=lambda: ticks[0])

    def day_samples() -> float:
        for family in collector.collect():
            for sample in family.samples:
                if sample.name == "foresight_scorecard_samples" and sample.labels == {
                    "pool": "alpha",
                    "window": "day",
                }:
                    return sample.value
        raise AssertionError("no day samples gauge for alpha")

    assert day_samples() == 0
    store.recommendations.append("alpha", END - timedelta(days=3), 0, "hold", {})
    ticks[0] = 59.0
    assert day_samples() == 0  # the first scoring still answers
    ticks[0] = 60.0
    assert day_samples() == 288
