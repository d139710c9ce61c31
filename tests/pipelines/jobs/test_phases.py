"""Phases: seconds per named phase, summed over re-entries, on the clock given."""

from __future__ import annotations

import pytest

from pipelines.jobs.phases import Phases


def test_each_phase_sums_its_entries_in_first_entered_order() -> None:
    ticks = iter([0.0, 2.0, 2.0, 2.5, 10.0, 11.25])
    phases = Phases(clock=lambda: next(ticks))
    with phases("read"):
        pass
    with phases("store"):
        pass
    with phases("read"):
        pass
    assert phases.seconds == {"read": 3.25, "store": 0.5}
    assert list(phases.rounded(1)) == ["read", "store"]


def test_a_phase_that_raises_is_still_timed() -> None:
    ticks = iter([1.0, 4.0])
    phases = Phases(clock=lambda: next(ticks))
    with pytest.raises(RuntimeError), phases("refit_predict"):
        raise RuntimeError("boom")
    assert phases.seconds == {"refit_predict": 3.0}
