"""Time to first value: from a ready venv to the first predictive recommendation.

Subject: what ``make run`` does on a fresh checkout, in a fresh temporary root (its own
store and MLflow store; the committed sample): ``foresight train --fast
--unless-champion`` (the quick first version: persistence, seasonal naive, ETS and the
peak model, through the gate), then ``foresight serve --clock replay --train-now``
(the startup forecast job, then the full training in the background). The clock
stops when ``GET /recommendation`` answers with every pool ``predictive``. It then
waits (``--full-timeout``) for the background training and records whether the gate
promoted its version and when that version served.

Baseline (``--baseline``): the flow before, in another fresh root, side by side in
this run: ``foresight train`` (the full model set) and then ``foresight serve --clock
replay``.

``--venv`` also times ``pip install -e .`` (the runtime dependencies ``make run``
installs) into a new virtual environment, against the dev extra installed on top.

The machine's load average is recorded beside every figure (shared, noisy machines:
compare the two flows of one run, not runs on different days).

Run: ``python benchmarks/first_value.py [--baseline] [--venv]``. Prints a table and
writes ``benchmarks/results/first_value.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "first_value.json"
FORESIGHT = Path(sys.executable).with_name("foresight")
TARGET_S = 120.0
"""The issue's target (#38): a first recommendation within 120 s of the venv."""
console = Console(width=120)


@dataclass
class Flow:
    """One flow's figures (seconds from its start; None: did not happen in time)."""

    name: str
    train_s: float | None = None
    first_recommendation_s: float | None = None
    full_training_s: float | None = None
    full_promoted: bool | None = None
    full_serving_s: float | None = None
    served_version: str | None = None
    load_before: float = 0.0
    load_after: float = 0.0
    notes: list[str] = field(default_factory=list)


def load1() -> float:
    """The 1-minute load average."""
    return round(os.getloadavg()[0], 2)


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def config_in(root: Path) -> Path:
    """A settings file whose root is ``root``, on the committed sample."""
    path = root / "foresight.yaml"
    path.write_text(
        f"root: {root}\nsample_dir: {ROOT / 'data' / 'sample'}\n"
        f"pools_file: {ROOT / 'data' / 'sample' / 'pools.yaml'}\n"
    )
    return path


def run(args: Sequence[str], log: Path) -> float:
    """Run a foresight command to completion; its seconds (raises on failure)."""
    began = time.perf_counter()
    with log.open("a") as out:
        done = subprocess.run(
            [str(FORESIGHT), *args], stdout=out, stderr=subprocess.STDOUT, check=False
        )
    if done.returncode != 0:
        raise RuntimeError(f"foresight {' '.join(args)} failed; see {log}")
    return time.perf_counter() - began


def predictive(url: str) -> tuple[bool, str | None]:
    """Whether every pool is predictive, and the model version served."""
    try:
        answer = httpx.get(f"{url}/recommendation", timeout=5)
    except httpx.HTTPError:
        return False, None
    if answer.status_code != 200:
        return False, None
    pools = answer.json()["pools"]
    versions = {pool.get("model_version") for pool in pools}
    ok = bool(pools) and all(pool["mode"] == "predictive" for pool in pools)
    return ok, next(iter(versions)) if len(versions) == 1 else None


def train_job(root: Path) -> tuple[str, str] | None:
    """The background training's outcome and summary, once it finished."""
    from pipelines.store.store import open_store

    with open_store(f"sqlite:///{root / 'data' / 'foresight.db'}", migrate=False) as store:
        runs = [run for run in store.job_runs.history("train") if run.finished_at is not None]
    return (runs[0].outcome, runs[0].summary) if runs else None


def flow(name: str, quick: bool, full_timeout: float) -> Flow:
    """Run one flow in a fresh root and time it."""
    figures = Flow(name, load_before=load1())
    with tempfile.TemporaryDirectory(prefix=f"first-value-{name[:8]}-") as tmp:
        root = Path(tmp)
        config, log = config_in(root), root / "log.txt"
        began = time.perf_counter()
        train = ["train", "--config", str(config)]
        if quick:
            train += ["--fast", "--unless-champion"]
        figures.train_s = round(run(train, log), 1)
        port = free_port()
        serve = ["serve", "--config", str(config), "--clock", "replay", "--port", str(port)]
        serve += ["--mlflow-ui-port", str(free_port())]
        if quick:
            serve.append("--train-now")
        with log.open("a") as out:
            server = subprocess.Popen(
                [str(FORESIGHT), *serve], stdout=out, stderr=subprocess.STDOUT
            )
        try:
            url = f"http://127.0.0.1:{port}"
            first = wait_first(figures, server, url, began)
            if quick and first is not None:
                wait_full(figures, Wait(root, url, first, began, full_timeout))
        finally:
            server.terminate()
            server.wait(60)
        figures.load_after = load1()
        if figures.first_recommendation_s is None:
            figures.notes.append(log.read_text()[-2000:])
    return figures


def wait_first(
    figures: Flow, server: subprocess.Popen[bytes], url: str, began: float
) -> str | None:
    """Poll until every pool is predictive; the version served then (None: never)."""
    assert figures.train_s is not None
    while time.perf_counter() - began < figures.train_s + 600:
        ok, version = predictive(url)
        if ok:
            figures.first_recommendation_s = round(time.perf_counter() - began, 1)
            figures.served_version = version
            return version
        if server.poll() is not None:
            figures.notes.append(f"serve exited {server.returncode}; see the log")
            return None
        time.sleep(0.5)
    return None


@dataclass(frozen=True)
class Wait:
    """What waiting for the background training needs."""

    root: Path
    url: str
    first: str
    began: float
    timeout: float


def wait_full(figures: Flow, wait: Wait) -> None:
    """Wait for the background training; record its outcome and when its version served."""
    deadline = time.perf_counter() + wait.timeout
    while time.perf_counter() < deadline:
        finished = train_job(wait.root)
        if finished is not None:
            figures.full_training_s = round(time.perf_counter() - wait.began, 1)
            outcome, summary = finished
            figures.full_promoted = "not promoted" not in summary and outcome == "ok"
            figures.notes.append(f"background training: {outcome}: {summary}")
            break
        time.sleep(2)
    if not figures.full_promoted:
        return
    while time.perf_counter() < deadline:
        ok, version = predictive(wait.url)
        if ok and version is not None and version != wait.first:
            figures.full_serving_s = round(time.perf_counter() - wait.began, 1)
            figures.served_version = version
            return
        time.sleep(1)


def time_venv() -> dict[str, float]:
    """Seconds to install the runtime set into a new venv, then the dev extra on top."""
    with tempfile.TemporaryDirectory(prefix="first-value-venv-") as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, "--upgrade", "pip"], check=True)
        began = time.perf_counter()
        subprocess.run([*pip, "-e", str(ROOT)], check=True)
        runtime = time.perf_counter() - began
        began = time.perf_counter()
        subprocess.run([*pip, "-e", f"{ROOT}[dev]"], check=True)
        dev = time.perf_counter() - began
    return {"runtime_install_s": round(runtime, 1), "dev_extra_install_s": round(dev, 1)}


def table(flows: list[Flow], venv: dict[str, float] | None) -> Table:
    """The figures side by side."""
    out = Table(title="Time to first value (s from the flow's start; venv ready)")
    out.add_column("figure")
    for item in flows:
        out.add_column(item.name, justify="right")

    def cell(value: object) -> str:
        return "-" if value is None else str(value)

    for label, key in (
        ("training before serve", "train_s"),
        ("first predictive recommendation", "first_recommendation_s"),
        ("background full training done", "full_training_s"),
        ("full version promoted", "full_promoted"),
        ("full version serving", "full_serving_s"),
        ("version serving at the end", "served_version"),
        ("load average before / after", None),
    ):
        if key is None:
            out.add_row(label, *(f"{f.load_before} / {f.load_after}" for f in flows))
        else:
            out.add_row(label, *(cell(getattr(f, key)) for f in flows))
    if venv:
        for key, value in venv.items():
            out.add_row(key.replace("_", " "), str(value), *([""] * (len(flows) - 1)))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Run the flows, print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", action="store_true", help="Also time the flow before.")
    parser.add_argument("--venv", action="store_true", help="Also time the venv installs.")
    parser.add_argument(
        "--full-timeout", type=float, default=900.0, help="Seconds to wait for the full training."
    )
    args = parser.parse_args(argv)
    venv = time_venv() if args.venv else None
    flows = [flow("make run (fast first)", True, args.full_timeout)]
    if args.baseline:
        flows.append(flow("before (full, then serve)", False, 0.0))
    console.print(table(flows, venv))
    for item in flows:
        for note in item.notes:
            console.print(f"{item.name}: {note}", soft_wrap=True, markup=False)
    quick = flows[0].first_recommendation_s
    met = quick is not None and quick <= TARGET_S
    payload: dict[str, Any] = {
        "target_first_recommendation_s": TARGET_S,
        "met": met,
        "flows": [asdict(item) for item in flows],
        "venv": venv,
        "cpus": os.cpu_count(),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(payload, indent=1))
    console.print(f"Written {RESULTS}; first recommendation <= {TARGET_S:.0f} s: {met}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
