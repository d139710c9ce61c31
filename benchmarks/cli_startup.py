"""How long ``foresight`` takes before it does anything: help, option errors, imports.

Every command pays Python's start-up and its imports before its own work; a user
typing ``foresight --help`` or mistyping an option waits for exactly that. Each case
runs ``--runs`` times as a fresh process (the installed console script, as a user
runs it) and reports the median and best wall time; the machine's load average is
recorded with them, since a shared machine stretches every figure.

Run: ``python benchmarks/cli_startup.py [--label after] [--runs 7]``. The JSON in
``benchmarks/results/cli_startup.json`` keeps one entry per label (e.g. ``before``
and ``after`` a change), and the table prints every label side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "cli_startup.json"
TARGET_S = 1.5
"""The goal for ``foresight --help`` (issue #14)."""

CASES: dict[str, list[str]] = {
    "foresight --help": ["--help"],
    "foresight train --help": ["train", "--help"],
    "foresight serve --help": ["serve", "--help"],
    "foresight simulate --help": ["simulate", "--help"],
    "foresight train --workers 0 (option error)": ["train", "--workers", "0"],
    "foresight simulate --lead 10 (option error)": ["simulate", "--pool", "x", "--lead", "10"],
    "foresight jobs --help": ["jobs", "--help"],
    "foresight serve on a busy port (refused)": ["serve", "--port", "{busy_port}"],
}
"""Each case's arguments; ``{busy_port}`` is a port this process holds while timing."""


def time_case(executable: Path, args: list[str], runs: int) -> dict[str, float]:
    """Run ``executable args`` ``runs`` times; return median and best seconds."""
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(
            [str(executable), *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
            cwd=ROOT,
        )
        seconds.append(time.perf_counter() - start)
    return {"median_s": statistics.median(seconds), "best_s": min(seconds), "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="after", help="Name of this measurement.")
    parser.add_argument("--runs", type=int, default=7, help="Runs per case.")
    args = parser.parse_args()
    executable = Path(sys.executable).with_name("foresight")
    if not executable.exists():
        raise SystemExit(f"{executable} not found: run `make venv` first")

    results: dict[str, Any] = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    labels = results.setdefault("labels", {})
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        cases = {
            name: time_case(executable, [a.replace("{busy_port}", port) for a in case], args.runs)
            for name, case in CASES.items()
        }
    labels[args.label] = {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "load_average_1m": os.getloadavg()[0],
        "cpus": os.cpu_count(),
        "cases": cases,
    }
    results["target_help_s"] = TARGET_S
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print_table(labels)
    print(f"\nwritten to {RESULTS.relative_to(ROOT)}")


def print_table(labels: dict[str, Any]) -> None:
    """Median (best) seconds per case, one column per label."""
    names = sorted(labels, key=lambda name: (name != "before", name))
    header = ["case", *(f"{n} median (best) s" for n in names)]
    rows = [header]
    for case in CASES:
        cells = [case]
        for name in names:
            got = labels[name]["cases"].get(case)
            cells.append("-" if got is None else f"{got['median_s']:.2f} ({got['best_s']:.2f})")
        rows.append(cells)
    rows.append(["load average (1 min)", *(f"{labels[n]['load_average_1m']:.2f}" for n in names)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for i, row in enumerate(rows):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
        if i == 0:
            print("  ".join("-" * width for width in widths))
    print(f"\ntarget: `foresight --help` under {TARGET_S} s")


if __name__ == "__main__":
    main()
