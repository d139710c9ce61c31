"""Progress of a benchmark's long loops: one line redrawn on a terminal, plain lines elsewhere.

On a terminal a counter redraws its line in place (``\\r``). In a CI job or a log file
the same redraws would make the whole loop one long line, so there every step is its
own newline-terminated line instead. The benchmarks that count steps share this one
helper, so they all behave the same way.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

Counter = Callable[[int, int], None]
"""``(done, total)``: called after each step of a loop."""


def counter(label: str, unit: str = "steps", stream: TextIO | None = None) -> Counter:
    """A ``(done, total)`` callback printing ``label: done/total unit``.

    Args:
        label: what is counted, e.g. ``"champion walk-forward 0:10:00"``.
        unit: the steps' name, e.g. ``"cutoff times"``.
        stream: where the lines go (default stdout); redrawn only if it is a terminal.
    """
    out = stream if stream is not None else sys.stdout
    redraw = out.isatty()

    def report(done: int, total: int) -> None:
        line = f"{label}: {done}/{total} {unit}"
        if redraw:
            out.write(f"\r{line}" + ("\n" if done >= total else ""))
        else:
            out.write(f"{line}\n")
        out.flush()

    return report
