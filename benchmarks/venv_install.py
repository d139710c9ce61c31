"""How long ``make run``'s venv takes to install on a fresh machine: pip against uv.

Subject: the Makefile's own recipe (``make .venv/.installed-run``, then
``.venv/.installed-dev`` for ``make test``), run in a fresh copy of the project with
empty package caches, as a new user's first ``make run`` does.
``VENV_INSTALLER=pip`` is the recipe before (pip resolves, downloads, unpacks and
byte-compiles every file in one thread); ``VENV_INSTALLER=uv`` is the recipe now
(the venv's pip installs uv, which resolves, downloads, links and byte-compiles in
parallel). Both are measured side by side in one
run, interleaved over ``--rounds`` (the order alternates each round).

Besides the install (wall and CPU seconds), each venv records its size and the CPU
seconds of a first and a second import of what ``foresight train`` and ``foresight
serve`` import: equal when the install byte-compiled everything (an install that
left it to the first import pays it there, or on every import where
PYTHONDONTWRITEBYTECODE is set).

The machine's load average is recorded beside every figure (a shared 2-core machine:
compare the two installers of one run, not runs on different days).

Run: ``python benchmarks/venv_install.py [--rounds 1] [--no-dev]``. Prints a table and
writes ``benchmarks/results/venv_install.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "venv_install.json"
TARGET_S = 120.0
"""The issue's target (#38): the venv for ``make run`` within 120 s."""
INSTALLERS = ("pip", "uv")
BUILD_FILES = ("Makefile", "pyproject.toml", "README.md")
"""What the recipe reads besides the packages (pyproject's ``packages.find``)."""
FIRST_IMPORT = (
    "import mlflow, mlflow.server, sklearn.ensemble, statsmodels.tsa.api, pandas, "
    "fastapi, uvicorn, apscheduler, cli, api.main"
)
"""The heavy imports of ``foresight train`` and ``foresight serve``."""
console = Console(width=120)


@dataclass
class Install:
    """One installer's figures in one round (seconds; None: that step failed)."""

    installer: str
    round: int
    runtime_s: float | None = None
    runtime_cpu_s: float | None = None
    dev_extra_s: float | None = None
    runtime_mb: float | None = None
    first_import_cpu_s: float | None = None
    second_import_cpu_s: float | None = None
    load_before: float = 0.0
    load_after: float = 0.0
    notes: list[str] = field(default_factory=list)


def load1() -> float:
    """The 1-minute load average."""
    return round(os.getloadavg()[0], 2)


def packages() -> list[str]:
    """The top-level packages the project installs (pyproject's ``packages.find``)."""
    found = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return [pattern.rstrip("*") for pattern in found["packages"]["find"]["include"]]


def copy_project(into: Path) -> Path:
    """A copy of what the install reads (the working tree, uncommitted edits included)."""
    project = into / "project"
    project.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in (*BUILD_FILES, *packages()):
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, project / name, ignore=ignore)
        else:
            shutil.copy2(source, project / name)
    return project


def children_cpu() -> float:
    """CPU seconds (user + system) of every child process waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def make(project: Path, target: str, env: dict[str, str], log: Path) -> tuple[float, float] | None:
    """Run ``make target`` in ``project``; its wall and CPU seconds (None: it failed)."""
    began, cpu = time.perf_counter(), children_cpu()
    with log.open("a") as out:
        done = subprocess.run(
            ["make", "-C", str(project), target],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    if done.returncode != 0:
        return None
    return round(time.perf_counter() - began, 1), round(children_cpu() - cpu, 1)


def megabytes(path: Path) -> float:
    """The size on disk of the files under ``path``, in MB (hard links counted once)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for item in path.rglob("*"):
        stat = item.lstat()
        if item.is_file() and not item.is_symlink() and (stat.st_dev, stat.st_ino) not in seen:
            seen.add((stat.st_dev, stat.st_ino))
            total += stat.st_blocks * 512
    return round(total / 1e6, 1)


def import_cpu_seconds(python: Path, cwd: Path) -> float | None:
    """CPU seconds of one fresh interpreter importing :data:`FIRST_IMPORT`.

    CPU rather than wall time: on a shared machine the wall time of a few seconds of
    imports swings with the other work far more than the compile cost it measures.
    """
    cpu = children_cpu()
    done = subprocess.run(
        [str(python), "-c", FIRST_IMPORT], cwd=cwd, capture_output=True, check=False
    )
    return round(children_cpu() - cpu, 1) if done.returncode == 0 else None


def install(installer: str, round_: int, dev: bool) -> Install:
    """Run the Makefile's recipe with ``installer`` in a fresh copy and an empty cache."""
    figures = Install(installer, round_, load_before=load1())
    with tempfile.TemporaryDirectory(prefix=f"venv-install-{installer}-") as tmp:
        project = copy_project(Path(tmp))
        log = Path(tmp) / "log.txt"
        env = {
            **os.environ,
            "VENV_INSTALLER": installer,
            # A new machine's empty caches, for both pip (and the uv wheel) and uv.
            "PIP_CACHE_DIR": str(Path(tmp) / "pip-cache"),
            "UV_CACHE_DIR": str(Path(tmp) / "uv-cache"),
        }
        for name in ("VIRTUAL_ENV", "PYTHONPATH", "MAKEFLAGS", "MAKELEVEL"):
            env.pop(name, None)
        runtime = make(project, ".venv/.installed-run", env, log)
        if runtime is not None:
            figures.runtime_s, figures.runtime_cpu_s = runtime
            venv = project / ".venv"
            figures.runtime_mb = megabytes(venv)
            python = venv / "bin" / "python"
            figures.first_import_cpu_s = import_cpu_seconds(python, project)
            figures.second_import_cpu_s = import_cpu_seconds(python, project)
            if dev:
                extra = make(project, ".venv/.installed-dev", env, log)
                figures.dev_extra_s = None if extra is None else extra[0]
        if figures.runtime_s is None or (dev and figures.dev_extra_s is None):
            figures.notes.append(log.read_text()[-2000:])
    figures.load_after = load1()
    return figures


def median(values: Sequence[float | None]) -> float | None:
    """The median of the values that were measured (None when none was)."""
    measured = [value for value in values if value is not None]
    return round(statistics.median(measured), 1) if measured else None


def summary(runs: list[Install]) -> dict[str, dict[str, float | None]]:
    """Per installer, the median of each figure over the rounds."""
    keys = (
        "runtime_s",
        "runtime_cpu_s",
        "dev_extra_s",
        "runtime_mb",
        "first_import_cpu_s",
        "second_import_cpu_s",
    )
    return {
        name: {
            key: median([getattr(run, key) for run in runs if run.installer == name])
            for key in keys
        }
        for name in INSTALLERS
    }


def table(runs: list[Install]) -> Table:
    """Every round's figures, one column per installer and round."""
    out = Table(title="make run's venv from nothing (s; empty caches; fresh copy)")
    out.add_column("figure")
    for run in runs:
        out.add_column(f"{run.installer} (round {run.round})", justify="right")

    def cell(value: object) -> str:
        return "-" if value is None else str(value)

    for label, key in (
        ("runtime install (make run's venv)", "runtime_s"),
        ("  its CPU seconds", "runtime_cpu_s"),
        ("dev extra on top (make test)", "dev_extra_s"),
        ("runtime venv size (MB)", "runtime_mb"),
        ("first import of train + serve, CPU s", "first_import_cpu_s"),
        ("second import (compiled), CPU s", "second_import_cpu_s"),
    ):
        out.add_row(label, *(cell(getattr(run, key)) for run in runs))
    out.add_row("load average before / after", *(f"{r.load_before} / {r.load_after}" for r in runs))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Install with each installer in turn, print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="Installs per installer.")
    parser.add_argument("--no-dev", action="store_true", help="Skip the dev extra.")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    if shutil.which("make") is None:
        parser.error("the benchmark runs the Makefile's recipe: install make first")
    runs = []
    for round_ in range(1, args.rounds + 1):
        order = INSTALLERS if round_ % 2 else tuple(reversed(INSTALLERS))
        runs += [install(name, round_, not args.no_dev) for name in order]
    console.print(table(runs))
    for run in runs:
        for note in run.notes:
            console.print(
                f"{run.installer} round {run.round}: {note}", soft_wrap=True, markup=False
            )
    medians = summary(runs)
    new = medians["uv"]["runtime_s"]
    met = new is not None and new <= TARGET_S
    payload: dict[str, Any] = {
        "target_runtime_install_s": TARGET_S,
        "met": met,
        "median": medians,
        "runs": [asdict(run) for run in runs],
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(payload, indent=1))
    console.print(f"Written {RESULTS}; runtime install with uv <= {TARGET_S:.0f} s: {met}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
