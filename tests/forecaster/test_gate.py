"""The promotion gate's decision: every check typed, the failed ones named."""

from __future__ import annotations

import pandas as pd
import pytest

from forecaster.gate import (
    CHALLENGER,
    INCUMBENT,
    Check,
    GateDecision,
    check_lines,
    compare_peak,
    gate_metrics,
    gate_tags,
    guard_check,
    point_check,
    relative_line,
    verdict,
)
from forecaster.metrics import RelativeMase
from forecaster.peak.heldout import BUFFER
from forecaster.selection import PromotionDecision

BEATS = PromotionDecision(True, "challenger mase 0.9 beats champion 1.0", 0.9, 1.0)
FIRST = PromotionDecision(True, "no champion yet", None, None)


def losses(challenger: float, buffer: float, incumbent: float) -> pd.DataFrame:
    rows = []
    for level, shift in ((0.5, 5.0), (0.9, 0.0)):  # 0.5 is not served: it must not count
        for method, value in ((CHALLENGER, challenger), (BUFFER, buffer), (INCUMBENT, incumbent)):
            bonus = -shift if method == CHALLENGER else 0.0
            rows.append((2, level, method, value + bonus, 50))
    return pd.DataFrame(rows, columns=["lead", "level", "method", "pinball", "n_origins"])


def test_the_peak_is_compared_at_the_served_levels_only_and_a_tie_passes() -> None:
    frame = losses(challenger=0.40, buffer=0.30, incumbent=0.40)

    worse = compare_peak("peak_vs_buffer", frame, (0.9,), BUFFER)
    tie = compare_peak("peak_vs_incumbent", frame, (0.9,), INCUMBENT)

    assert worse.status == "failed"
    assert (worse.challenger, worse.reference) == (pytest.approx(0.40), pytest.approx(0.30))
    assert "q0.9" in worse.detail
    assert tie.status == "passed"
    # At the unserved 0.5 the challenger is far better; served alone, that cannot rescue it.
    assert compare_peak("peak_vs_buffer", frame, (0.5, 0.9), BUFFER).status == "passed"


def test_no_scored_origin_fails_the_peak_check() -> None:
    empty = pd.DataFrame(columns=["lead", "level", "method", "pinball", "n_origins"])
    assert compare_peak("peak_vs_buffer", empty, (0.9,), BUFFER).status == "failed"


def test_a_decision_promotes_only_when_no_check_failed_and_names_those_that_did() -> None:
    frame = losses(challenger=0.40, buffer=0.30, incumbent=0.35)
    checks = (
        point_check(BEATS),
        guard_check(None),
        compare_peak("peak_vs_buffer", frame, (0.9,), BUFFER),
        compare_peak("peak_vs_incumbent", frame, (0.9,), INCUMBENT),
    )
    decision = GateDecision(BEATS, checks, peak_losses=frame)

    assert not decision.promote
    assert decision.failed == ("peak_vs_buffer", "peak_vs_incumbent")
    assert decision.reason.startswith("failed peak_vs_buffer, peak_vs_incumbent: ")
    assert verdict(decision) == "not promoted (failed: peak_vs_buffer, peak_vs_incumbent)"
    assert decision.check("point_guard").status == "skipped"
    assert relative_line(decision.relative) is None
    metrics = gate_metrics(decision, (0.9,))
    assert metrics["gate/promote"] == 0.0
    assert metrics["gate/point"] == 1.0
    assert metrics["gate/peak_vs_incumbent"] == 0.0
    assert "gate/point_guard" not in metrics  # skipped: no figure
    assert metrics["heldout/peak_pinball/buffer/lead2/q0.9"] == pytest.approx(0.30)
    assert metrics["heldout/peak_pinball/challenger/served"] == pytest.approx(0.40)
    tags = gate_tags(decision)
    assert tags["foresight.gate.failed"] == "peak_vs_buffer,peak_vs_incumbent"
    assert tags["foresight.gate.point"].startswith("passed: ")
    assert [line.split(":")[0] for line in check_lines(decision)] == [
        "point passed",
        "point_guard skipped",
        "peak_vs_buffer failed",
        "peak_vs_incumbent failed",
    ]


def test_the_first_champion_skips_the_comparisons_with_it() -> None:
    decision = GateDecision(
        FIRST,
        (point_check(FIRST), Check("peak_vs_incumbent", "skipped", "no champion yet")),
    )
    assert decision.promote
    assert decision.failed == ()
    assert verdict(decision) == "promoted to @champion"
    with pytest.raises(KeyError, match="peak_vs_buffer"):
        decision.check("peak_vs_buffer")


def test_the_first_version_is_promoted_with_its_failed_checks_said() -> None:
    # Refusing the first version leaves nothing serving (every pool reactive); with a
    # champion in place, the same failed check blocks.
    frame = losses(challenger=0.40, buffer=0.30, incumbent=0.35)
    checks = (
        point_check(FIRST),
        compare_peak("peak_vs_buffer", frame, (0.9,), BUFFER),
        Check("peak_vs_incumbent", "skipped", "no champion yet"),
    )
    first = GateDecision(FIRST, checks, peak_losses=frame, first=True)

    assert first.promote
    assert first.failed == ("peak_vs_buffer",)
    assert first.reason.startswith(
        "promoted as the first version although it failed peak_vs_buffer"
    )
    assert verdict(first).startswith(
        "promoted to @champion as the first version although it failed peak_vs_buffer"
    )
    assert gate_metrics(first, (0.9,))["gate/promote"] == 1.0
    assert not GateDecision(FIRST, checks, peak_losses=frame).promote


def test_a_cell_above_the_guard_fails_it() -> None:
    relative = RelativeMase(0.97, 0.98, 1.2, ("a/demand_gpus", "10min"), 6, 0)
    over = guard_check(relative)
    line = relative_line(relative)
    assert line is not None
    assert "geometric mean 0.970x over 6" in line
    assert "ratio of means 0.980x" in line
    assert over.status == "failed"
    assert "a/demand_gpus at 10min is 1.200x" in over.detail
    assert guard_check(relative, limit=1.25).status == "passed"
    within = RelativeMase(0.97, 0.98, 1.1, ("a/demand_gpus", "10min"), 6, 0)
    assert guard_check(within).status == "passed"  # at the limit is within it
