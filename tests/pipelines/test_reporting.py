"""Progress without a terminal: plain lines as work proceeds, not bars at the end."""

from __future__ import annotations

import io

from rich.console import Console

from pipelines.reporting import ProgressLines, progress_bar


def _piped() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=False, width=80), out


def test_piped_progress_prints_a_line_per_tenth_as_it_goes() -> None:
    console, out = _piped()
    ticks = iter(float(t) for t in range(1000))
    lines = ProgressLines(console, clock=lambda: next(ticks))
    seen_after_half = ""
    for done in range(101):
        lines.report("backtest", done, 100)
        if done == 50:
            seen_after_half = out.getvalue()
    printed = out.getvalue().splitlines()
    assert printed[0] == "Backtesting series: 0/100 (0 s)"
    assert printed[-1] == "Backtesting series: 100/100 (100 s)"
    assert len(printed) == 11
    # Half-way, the first half is already out: nothing waits for the end.
    assert seen_after_half.splitlines()[-1] == "Backtesting series: 50/100 (50 s)"


def test_each_stage_gets_its_own_lines() -> None:
    console, out = _piped()
    with progress_bar(console) as report:
        report("fit", 0, 1)
        report("fit", 1, 1)
        report("register", 1, 1)
    assert out.getvalue().splitlines() == [
        "Fitting the champion: 0/1 (0 s)",
        "Fitting the champion: 1/1 (0 s)",
        "Logging: 1/1 (0 s)",
    ]
