"""Pacer: background loops pause after every budget of work, never before."""

from __future__ import annotations

import time

import pytest

from api.pacing import Pacer


def _busy(seconds: float) -> None:
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


def test_a_pacer_pauses_once_the_budget_has_passed() -> None:
    pacer = Pacer(budget=0.002, pause=0.0)
    pacer.tick()
    assert pacer.pauses == 0  # no work yet

    _busy(0.003)
    pacer.tick()
    pacer.tick()

    assert pacer.pauses == 1  # the second tick starts a new budget


def test_a_pause_sleeps() -> None:
    pacer = Pacer(budget=1e-9, pause=0.01)
    _busy(1e-6)
    started = time.perf_counter()
    pacer.tick()
    assert time.perf_counter() - started >= 0.009


@pytest.mark.parametrize(("budget", "pause"), [(0.0, 0.1), (0.1, -1.0)])
def test_a_pacer_refuses_a_budget_or_pause_out_of_range(budget: float, pause: float) -> None:
    with pytest.raises(ValueError, match="budget"):
        Pacer(budget=budget, pause=pause)
