"""Foresight's lead over the best simple buffer at equal cost, and the held-out constants."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.buffer_lead import family_rows, lead_at_caps, targets
from benchmarks.decision_quality import case_constants, read_folds
from benchmarks.decision_sweep import static_sizes
from benchmarks.peak_lofo import SERVED, Constants
from forecaster.exceptions import SourceError
from pipelines.config.pools import PoolConfig

OTHER = Constants(0.002, 30.0, 72.0, 0.0, 1.0)


def test_the_lead_is_against_the_best_buffer_at_each_cap_where_both_reach() -> None:
    policies = {
        "foresight": [(1.005, 0.5), (1.03, 0.8), (1.3, 0.99)],
        "ref-persistence": [(1.015, 0.4), (1.06, 0.7), (1.4, 0.95)],
        "ref-seasonal_naive": [(1.04, 0.75)],
        "static": [(2.0, 0.9)],
    }
    got = lead_at_caps(policies, caps=(1.01, 1.02, 1.05, 1.5))
    caps = got["caps"]

    assert math.isnan(caps["1.01"]["lead"])  # no buffer that cheap: not counted
    assert caps["1.01"]["foresight"] == 0.5
    assert caps["1.02"]["lead"] == pytest.approx(0.1)  # 0.5 - 0.4
    assert caps["1.05"]["buffer"] == "ref-seasonal_naive"
    assert caps["1.05"]["lead"] == pytest.approx(0.05)  # 0.8 - 0.75
    assert caps["1.5"]["lead"] == pytest.approx(0.04)  # 0.99 - 0.95; static is dearer
    assert got["caps_both_reach"] == 3
    assert got["mean_lead"] == pytest.approx((0.1 + 0.05 + 0.04) / 3)
    assert got["worst_lead"] == pytest.approx(0.04)


def test_a_buffer_reaching_further_is_a_negative_lead() -> None:
    policies = {
        "foresight": [(1.01, 0.6), (1.1, 0.9)],
        "ref-persistence": [(1.01, 0.5), (1.2, 0.99)],
    }
    got = lead_at_caps(policies, caps=(1.01, 1.2))
    assert got["caps"]["1.2"]["lead"] == pytest.approx(-0.09)
    assert got["worst_lead"] == pytest.approx(-0.09)


def test_a_setting_worse_than_reactive_does_not_reach_its_cost() -> None:
    policies = {
        "foresight": [(1.02, 0.4), (1.1, 0.9)],
        "static-ksd": [(1.02, -3000.0), (1.5, 1.0)],
        "ref-persistence": [(1.08, 0.8)],
    }
    got = lead_at_caps(policies, caps=(1.02, 1.1, 1.5))
    assert math.isnan(got["caps"]["1.02"]["lead"])  # not +3000.4 over a static starving demand
    assert got["caps"]["1.1"]["lead"] == pytest.approx(0.1)
    assert got["caps"]["1.5"]["lead"] == pytest.approx(-0.1)
    assert got["caps_both_reach"] == 2


def test_no_buffer_is_a_mistake_said_at_once() -> None:
    with pytest.raises(KeyError, match="none of the buffers"):
        lead_at_caps({"foresight": [(1.0, 0.5)]})


def case(name: str, family: str, lead: int, leads: list[float]) -> dict[str, object]:
    caps = {f"c{i}": {"lead": v} for i, v in enumerate(leads)}
    finite = [v for v in leads if math.isfinite(v)]
    return {
        "case": name,
        "family": family,
        "lead_minutes": lead,
        "buffer_lead": {
            "caps": caps,
            "mean_lead": sum(finite) / len(finite),
            "worst_lead": min(finite),
        },
    }


def test_family_rows_average_their_cases_and_targets_say_what_is_short() -> None:
    cases = [
        case("vc1", "earth_vc", 10, [0.1, 0.2]),
        case("vc2", "earth_vc", 10, [0.0, math.nan]),
        case("total", "earth_total", 10, [0.02, -0.01]),
        case("total", "earth_total", 5, [0.3, 0.3]),
    ]
    rows = family_rows(cases)
    vc = next(r for r in rows if r["family"] == "earth_vc")
    assert vc["cases"] == 2
    assert vc["lead_at_cap"] == {"c0": pytest.approx(0.05), "c1": pytest.approx(0.2)}
    assert vc["mean_lead"] == pytest.approx((0.15 + 0.0) / 2)
    assert vc["worst_lead"] == 0.0

    judged = targets(cases, rows, lead=10)
    assert judged["mean_lead_per_family"]["met"] is False
    assert set(judged["mean_lead_per_family"]["short"]) == {"earth_total"}
    assert judged["never_below"]["met"] is False
    assert judged["never_below"]["below"] == {"total lead 10": pytest.approx(-0.01)}


def test_held_out_constants_are_each_familys_fold_and_in_sample_is_labelled() -> None:
    families = {"earth_total": "earth_total", "x": "outside"}
    held = case_constants(families, {"earth_total": OTHER}, SERVED)
    assert held == {"earth_total": (OTHER, "held out"), "x": (SERVED, "held out")}
    inside = case_constants(families, None, SERVED)
    assert inside == {"earth_total": (SERVED, "in-sample"), "x": (SERVED, "in-sample")}


def test_read_folds_takes_peak_quantiles_per_family_choice(tmp_path: Path) -> None:
    path = tmp_path / "peak.json"
    path.write_text(
        json.dumps(
            {
                "folds": {"nab": {"constants": OTHER.as_dict()}},
                "production": {"constants": SERVED.as_dict()},
            }
        )
    )
    folds, production = read_folds(path)
    assert folds == {"nab": OTHER}
    assert production == SERVED


def test_read_folds_says_what_to_run_when_there_are_none(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"run benchmarks/peak_quantile\.py first"):
        read_folds(tmp_path / "missing.json")
    empty = tmp_path / "in_sample.json"
    empty.write_text(json.dumps({"folds": {}}))
    with pytest.raises(SourceError, match="no per-family folds"):
        read_folds(empty)


def test_static_sizes_are_the_prehistorys_mean_plus_k_sd_in_whole_nodes() -> None:
    pre = pd.Series([8.0, 24.0] * 50)  # mean 16, sd 8
    pool = PoolConfig(name="p", node_group_id="g", gpus_per_node=8, max_nodes=4)
    sizes = static_sizes(pre, pool)
    # k 0 -> 2 nodes, 0.5 -> 20 -> 3, 1 -> 3 (left out), 1.5 -> 28 -> 4, then capped at 4
    assert sizes == {0.0: 2, 0.5: 3, 1.5: 4}
