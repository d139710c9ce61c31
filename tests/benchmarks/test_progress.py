"""The benchmarks' progress: redrawn on a terminal, one plain line per step in a log."""

from __future__ import annotations

import io

from benchmarks.progress import counter


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_in_a_log_every_step_is_its_own_line() -> None:
    log = io.StringIO()
    report = counter("champion walk-forward", "cutoff times", log)
    for done in (1, 2, 3):
        report(done, 3)
    assert "\r" not in log.getvalue()
    assert log.getvalue().splitlines() == [
        "champion walk-forward: 1/3 cutoff times",
        "champion walk-forward: 2/3 cutoff times",
        "champion walk-forward: 3/3 cutoff times",
    ]


def test_on_a_terminal_one_line_is_redrawn_and_ended_at_the_last_step() -> None:
    screen = Terminal()
    report = counter("fits", "days", screen)
    for done in (1, 2):
        report(done, 2)
    assert screen.getvalue() == "\rfits: 1/2 days\rfits: 2/2 days\n"
