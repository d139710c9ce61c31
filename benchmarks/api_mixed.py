"""Reads under pushes: per-pool reads at 1,000 rps, the full set at 200 rps, each with 4 writers.

The mixed scenario of ``benchmarks/api_load.py --scenario mixed`` (issues #13, #41).
The server is :mod:`benchmarks.api_load`'s (the real app served as ``foresight serve``
serves it: uvicorn, one worker, background refresh every 5 s, 100 pools over two days
of 5-minute history). Each run starts a fresh server on a fresh store and runs two
phases against it, each one client process (:mod:`benchmarks.api_mixed_load`, open
loop, latency from each request's intended send time) on the same machine:

- ``per-pool``: one pool per read (``/recommendation/{pool}`` and ``?pool=``, half
  each), ``--read-rate`` a second (1,000), while 4 writers push 100-sample batches at
  ``--push-rate`` a second in all (5);
- ``full-set``: ``GET /recommendation`` (every pool in one body), ``--set-rate`` a
  second (200), with the same pushes.

Each phase warms up (``--warmup`` s, reads and pushes at the same rates) and then
measures (``--duration`` s). After the run the server is stopped and the store read
back: every accepted push's samples must be there with their values (0 lost, 0
changed) and every derived ``demand_gpus`` row must be ``allocated + queued``.

Targets per phase (issue #41): reads p99 < 10 ms at the full rate (achieved within 2 %
of it), pushes p99 < 50 ms, 0 errors; 0 lost samples; in every run (``--runs``, 3 for
the issue's "three consecutive runs"). Recorded per phase: achieved rate, p50/p90/p99/max
of reads (also per form) and pushes, errors, the client's own send lag and CPU, the
server's CPU, and the load average before and after: on a shared 2-core machine the
tail is noise as much as code. Prints a table, writes ``benchmarks/results/api_mixed.json``.

``--py-spy DIR`` records the server with py-spy through each phase (raw stacks per
thread, ``DIR/run<n>-<phase>.txt``): where its time goes, the push threads apart from
the event loop. The sampling costs the server CPU: compare latencies without it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.api_mixed_load import (  # noqa: E402
    BATCH,
    PHASES,
    WRITERS,
    Phase,
    add_client_arguments,
    batch,
    main_client,
)

RESULTS = ROOT / "benchmarks" / "results" / "api_mixed.json"
READ_P99_MS = 10.0
PUSH_P99_MS = 50.0
RATE_SHORTFALL = 0.02
"""A phase whose reads achieved less than its rate by more than this share failed."""
HISTORY_STEPS = 2 * 288
"""Steps of history :func:`api_load.prepare` writes: pushes go back at most this far."""


def history_end() -> datetime:
    """The last 5-minute step, where :func:`api_load.prepare` ends the history."""
    now = datetime.now(UTC)
    step = timedelta(minutes=5).total_seconds()
    return now - timedelta(seconds=now.timestamp() % step)


def lost_samples(
    workdir: Path, pools: Sequence[str], statuses: Sequence[Sequence[int]], end: datetime
) -> dict[str, int]:
    """Compare the store with every accepted push: missing or changed samples, bad demand.

    Args:
        workdir: the run's directory (its ``store.db``).
        pools: the pool names, in the pools file's order.
        statuses: ``[writer, push, status]`` of every push of the run.
        end: the history's end the pushes counted back from.
    """
    from pipelines.store.store import open_store

    expected: dict[tuple[str, str], float] = {}
    for writer, push, status in statuses:
        if status == 200:
            for sample in batch(pools, writer, push, end):
                expected[(sample["series_id"], sample["ts"])] = sample["value"]
    series = sorted({sid for sid, _ in expected} | {f"{p}/demand_gpus" for p in pools})
    with open_store(f"sqlite:///{workdir / 'store.db'}") as store:
        frame = store.samples.read(series, start=end - timedelta(days=3))
    stored = {
        (str(uid), ts.isoformat().replace("+00:00", "Z")): float(y)
        for uid, ts, y in zip(frame["unique_id"], frame["ds"], frame["y"], strict=True)
    }
    missing = sum(1 for key in expected if key not in stored)
    changed = sum(1 for key, value in expected.items() if key in stored and stored[key] != value)
    bad_demand = 0
    for (sid, ts), value in expected.items():
        pool, _, signal = sid.rpartition("/")
        if signal == "allocated_gpus":
            want = value + expected[(f"{pool}/queue_gpus", ts)]
            bad_demand += stored.get((f"{pool}/demand_gpus", ts)) != want
    return {
        "pushed_samples": len(expected),
        "rejected_pushes": sum(1 for _, _, status in statuses if status != 200),
        "missing": missing,
        "changed": changed,
        "wrong_demand_rows": bad_demand,
    }


def phase_rate(args: argparse.Namespace, phase: Phase) -> float:
    """The reads per second of ``phase``."""
    rate: float = args.read_rate if phase == "per-pool" else args.set_rate
    return rate


def verdicts(phase: dict[str, Any], rate: float) -> dict[str, bool]:
    """Whether one phase met each target."""
    reads, pushes = phase["reads"], phase["pushes"]
    return {
        "read_p99": reads["p99"] is not None and reads["p99"] < READ_P99_MS,
        "read_rate": reads["achieved_rps"] >= rate * (1 - RATE_SHORTFALL),
        "push_p99": pushes["p99"] is not None and pushes["p99"] < PUSH_P99_MS,
        "no_errors": reads["errors"] == 0 and pushes["errors"] == 0,
    }


def profiler(args: argparse.Namespace, pid: int, name: str) -> subprocess.Popen[bytes] | None:
    """Start py-spy recording the server (``--py-spy DIR``) into ``DIR/name.txt``, or None.

    Raw collapsed stacks per thread, idle time left out; stop it with SIGINT to write.
    """
    if args.py_spy is None:
        return None
    args.py_spy.mkdir(parents=True, exist_ok=True)
    tool, output = str(shutil.which("py-spy")), str(args.py_spy / f"{name}.txt")
    flags = ["--format", "raw", "--threads", "--nonblocking", "--rate", "200"]
    return subprocess.Popen(
        [tool, "record", "--pid", str(pid), *flags, "--output", output],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def stop(spy: subprocess.Popen[bytes] | None) -> None:
    """Have py-spy write what it recorded and end."""
    if spy is not None:
        spy.send_signal(signal.SIGINT)
        spy.wait(timeout=60)


def one_run(args: argparse.Namespace, workdir: Path, number: int = 1) -> dict[str, Any]:
    """Serve a fresh store; run each phase against it; stop; check the store."""
    from benchmarks import api_load

    api_load.prepare(workdir, args.pools)
    end = history_end()
    port = api_load.free_port()
    me = [sys.executable, str(Path(api_load.__file__).resolve())]
    server = subprocess.Popen(
        [
            *me,
            "serve",
            f"--dir={workdir}",
            f"--port={port}",
            f"--refresh={args.refresh}",
            f"--parser={args.parser}",
            f"--switch-ms={args.switch_ms or 0}",
        ]
    )
    phases: dict[str, Any] = {}
    statuses: list[list[int]] = []
    try:
        api_load.wait_ready(port, timeout=180)
        if args.gc_freeze:  # as `foresight serve` does once it is ready
            api_load.wait_ready(port, timeout=30, path=api_load.GC_FREEZE)
        for phase in args.phases:
            before = api_load.load_average()
            spy = profiler(args, server.pid, f"run{number}-{phase}")
            done = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "client",
                    f"--phase={phase}",
                    f"--dir={workdir}",
                    f"--port={port}",
                    f"--server-pid={server.pid}",
                    f"--end={end.isoformat()}",
                    f"--first-push={1 + max((s[1] for s in statuses), default=-1)}",
                    f"--rate={phase_rate(args, phase)}",
                    f"--push-rate={args.push_rate}",
                    f"--duration={args.duration}",
                    f"--warmup={args.warmup}",
                    f"--connections={args.connections}",
                ],
                check=True,
                capture_output=True,
                text=True,
            )
            stop(spy)
            found = json.loads(done.stdout)
            statuses.extend(found.pop("push_statuses"))
            found["load_average_before"] = before
            found["load_average_after"] = api_load.load_average()
            found["met"] = verdicts(found, phase_rate(args, phase))
            phases[phase] = found
    finally:
        server.terminate()
        server.wait(timeout=30)
    pools = api_load.pool_names(args.pools)
    check = lost_samples(workdir, pools, statuses, end)
    none_lost = check["missing"] == 0 and check["changed"] == 0 and check["wrong_demand_rows"] == 0
    met = none_lost and all(all(p["met"].values()) for p in phases.values())
    return {"phases": phases, "store_check": check, "none_lost": none_lost, "met": met}


def report(args: argparse.Namespace, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Print the table and return the JSON document."""
    from rich.console import Console
    from rich.table import Table

    from api.settings import ServiceSettings
    from benchmarks import api_load

    table = Table(
        title=f"mixed, {args.pools} pools, {WRITERS} writers pushing {BATCH}-sample "
        f"batches at {args.push_rate:g}/s in all, {args.duration:g} s per phase (open loop, ms "
        "from intended send; lag: the client's own p99 send lag; cpu: share of one core)"
    )
    columns = ("run", "phase", "rps", "p50", "p90", "p99", "max", "errors", "lag", "cpu srv/cli")
    for column in (*columns, "load before -> after"):
        table.add_column(column, justify="left" if column in ("run", "phase") else "right")
    for number, run in enumerate(runs, 1):
        for name, phase in run["phases"].items():
            load = f"{phase['load_average_before'][0]:.2f} -> {phase['load_average_after'][0]:.2f}"
            cpu = (
                f"{phase['server_cpu_share_of_one_core']:.2f}/"
                f"{phase['client_cpu_share_of_one_core']:.2f}"
            )
            for kind in ("reads", "pushes"):
                row = phase[kind]
                table.add_row(
                    str(number),
                    f"{name} {kind}",
                    f"{row['achieved_rps']:.0f}",
                    *(_ms(row[k]) for k in ("p50", "p90", "p99", "max")),
                    str(row["errors"]),
                    _ms(row["send_lag_p99"]),
                    cpu if kind == "reads" else "",
                    load if kind == "reads" else "",
                )
    Console(width=160).print(table)
    for number, run in enumerate(runs, 1):
        check = run["store_check"]
        failed = [
            f"{name} {target}"
            for name, phase in run["phases"].items()
            for target, ok in phase["met"].items()
            if not ok
        ]
        print(
            f"run {number}: {check['pushed_samples']} samples pushed and accepted, "
            f"{check['missing']} missing, {check['changed']} changed, "
            f"{check['wrong_demand_rows']} wrong demand rows; targets "
            + ("met" if run["met"] else "NOT met: " + ", ".join(failed or ["store check"]))
        )
    every = all(run["met"] for run in runs)
    print(f"targets met in all {len(runs)} runs: {'yes' if every else 'no'}")
    return {
        "generated_at": datetime.now(UTC).isoformat(),
        "config": {
            key: getattr(args, key)
            for key in (
                "pools",
                "phases",
                "read_rate",
                "set_rate",
                "push_rate",
                "duration",
                "warmup",
                "connections",
                "refresh",
                "gc_freeze",
                "parser",
                "switch_ms",
                "runs",
            )
        },
        "writers": WRITERS,
        "profiled_with_py_spy": args.py_spy is not None,
        "server": api_load.server_description(args.parser),
        "gil_switch_ms": args.switch_ms or ServiceSettings().gil_switch_ms,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "targets": {
            "read_p99_ms": READ_P99_MS,
            "push_p99_ms": PUSH_P99_MS,
            "read_rate_shortfall_at_most": RATE_SHORTFALL,
            "errors": 0,
            "lost_or_changed_samples": 0,
        },
        "met_in_every_run": every,
        "runs": runs,
    }


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The mixed scenario's options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("role", nargs="?", default="bench", choices=("bench", "client"))
    parser.add_argument("--pools", type=int, default=100)
    parser.add_argument("--phases", nargs="+", choices=PHASES, default=list(PHASES))
    parser.add_argument("--read-rate", type=float, default=1000.0, help="per-pool reads/s")
    parser.add_argument("--set-rate", type=float, default=200.0, help="full-set reads/s")
    parser.add_argument("--push-rate", type=float, default=5.0, help="pushes per second in all")
    parser.add_argument("--duration", type=float, default=30.0, help="measured s per phase")
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=32, help="read connections")
    parser.add_argument("--refresh", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=1, help="consecutive runs (3 for #41)")
    parser.add_argument(
        "--parser", choices=("auto", "httptools", "h11"), default="auto", help="server's parser"
    )
    parser.add_argument(
        "--switch-ms",
        type=float,
        default=None,
        help="the server's GIL switch interval in ms (default: as foresight serve sets it)",
    )
    parser.add_argument(
        "--gc-freeze",
        action="store_true",
        help="gc.freeze() in the server once ready, as serve does",
    )
    parser.add_argument(
        "--py-spy",
        type=Path,
        metavar="DIR",
        help="record the server with py-spy (on PATH) through each phase into "
        "DIR/run<n>-<phase>.txt (raw stacks per thread); it costs the server some CPU",
    )
    parser.add_argument("--quick", action="store_true", help="10 s phases, 2 s warm-up")
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the JSON")
    parser.add_argument("--rate", type=float, help=argparse.SUPPRESS)  # the client's
    add_client_arguments(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.duration, args.warmup = 10.0, 2.0
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.py_spy is not None and shutil.which("py-spy") is None:
        parser.error("--py-spy needs py-spy on PATH (pip install py-spy)")
    pushes_per_writer = args.push_rate / WRITERS * (args.warmup + args.duration)
    if pushes_per_writer * len(args.phases) >= HISTORY_STEPS:
        parser.error("too many pushes per writer for the two days of history: shorten phases")
    return args


def run(argv: Sequence[str] | None = None) -> None:
    """The mixed scenario's command line (``api_load.py --scenario mixed`` lands here)."""
    args = parse(argv)
    if args.role == "client":
        main_client(args)
        return
    runs = []
    for number in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="foresight-api-mixed-") as tmp:
            runs.append(one_run(args, Path(tmp), number))
    document = report(args, runs)
    if not args.no_write:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(document, indent=2) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    run()
