"""The headline and the table of terms, for each term that can set the number."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.dashboard.explain import headline, terms
from api.schemas import PoolRecommendation


@pytest.fixture
def served(client: TestClient) -> dict[str, Any]:
    body: dict[str, Any] = client.get("/recommendation/alpha").json()
    return body


def _with(body: dict[str, Any], action: str, **explanation: Any) -> PoolRecommendation:
    ex = {**body["explanation"], **explanation}
    return PoolRecommendation.model_validate({**body, "action": action, "explanation": ex})


def _stages(body: dict[str, Any], **stages: int) -> dict[str, int]:
    merged: dict[str, int] = {**body["explanation"]["stages"], **stages}
    return merged


@pytest.mark.parametrize(
    ("action", "change", "words"),
    [
        ("scale_up", {"term": "forecast"}, ["Scale up to", "q0.9 demand peak", "within 10 min"]),
        (
            "hold",
            {"term": "reactive", "mode": "reactive", "health_reasons": ["stale_forecast"]},
            ["Hold at", "reactive (stale forecast)", "demand now"],
        ),
        ("scale_up", {"term": "floor"}, ["demand now", "needs more than forecast"]),
        ("hold", {"term": "stabilisation", "stabilisation_limit": "window"}, ["window"]),
        ("scale_down", {"term": "stabilisation", "stabilisation_limit": "step"}, ["one step"]),
    ],
)
def test_the_headline_says_what_and_why_in_few_words(
    served: dict[str, Any], action: str, change: dict[str, Any], words: list[str]
) -> None:
    said = headline(_with(served, action, **change))

    assert len(said.split()) <= 15, said
    assert str(served["desired_nodes"]) in said
    for word in words:
        assert word in said, (word, said)


def test_a_capped_pool_names_its_max(served: dict[str, Any]) -> None:
    capped = _stages(served, need=60, bounded=40, stabilised=40, final=40)
    said = headline(_with(served, "scale_up", term="bounds", stages=capped))
    assert "capped at the pool's max of 40" in said


def test_the_terms_table_marks_the_term_that_set_the_number(served: dict[str, Any]) -> None:
    rows = terms(_with(served, "hold", term="latency"))
    assert [row.term for row in rows if row.decisive] == ["latency"]
    reactive = terms(_with(served, "hold", term="reactive", mode="reactive"))
    assert [row.term for row in reactive if row.decisive] == ["floor"]
    assert reactive[0].detail.startswith("not used")
