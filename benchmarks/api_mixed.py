"""Reads under pushes: ``GET /recommendation`` while writers push sample batches.

The mixed scenario of ``benchmarks/api_load.py --scenario mixed`` (issue #13): the
same server as :mod:`benchmarks.api_load` (real app, uvicorn, one worker, background
refresh every 5 s, 100 pools over two days of 5-minute history), and at once

- a reader process sending ``GET /recommendation`` (every pool in one body) at 200
  rps, open loop, latency from each request's intended send time;
- a writer process with 4 writers pushing 100-sample batches to
  ``POST /signals/metrics``, 5 pushes a second in all (1.25 each), also open loop.
  Each writer owns 25 pools; push ``k`` of a writer carries ``queue_gpus``,
  ``allocated_gpus``, ``nodes`` and ``gpu_util`` of its pools at the ``k``-th
  5-minute step before the history's end, each with a value that identifies the push,
  so every (series, time) is written exactly once and checkable.

After the run the server is stopped and the store is read back: every pushed sample
must be there with its value (0 lost), and every derived ``demand_gpus`` row must be
``allocated + queued``. Then ``GET /recommendation`` alone is measured at 1,000 rps.

Targets: reads p99 < 10 ms, pushes p99 < 50 ms, 0 errors, 0 lost samples; alone at
1,000 rps, p99 < 50 ms. Prints a table, writes ``benchmarks/results/api_mixed.json``
with the load averages seen: on a shared 2-core machine the tail is noise as much as
code.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import api_load  # noqa: E402
from pipelines.store.store import open_store  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "api_mixed.json"
WRITERS = 4
BATCH = 100
SIGNALS = ("queue_gpus", "allocated_gpus", "nodes", "gpu_util")
TARGETS = {"read_p99_ms": 10.0, "push_p99_ms": 50.0, "alone_p99_ms": 50.0}


def history_end() -> datetime:
    """The last 5-minute step, where :func:`api_load.prepare` ends the history."""
    now = datetime.now(UTC)
    return now - timedelta(seconds=now.timestamp() % api_load.STEP.total_seconds())


def writer_pools(pools: Sequence[str], writer: int) -> list[str]:
    """The pools writer ``writer`` owns (disjoint, BATCH / len(SIGNALS) each)."""
    per = BATCH // len(SIGNALS)
    return list(pools[writer * per : (writer + 1) * per])


def batch(pools: Sequence[str], writer: int, push: int, end: datetime) -> list[dict[str, Any]]:
    """Push ``push`` of ``writer``: its pools' four signals at step ``push + 1`` before end."""
    ts = (end - (push + 1) * api_load.STEP).isoformat().replace("+00:00", "Z")
    values = {
        "queue_gpus": float(push % 5),
        "allocated_gpus": float(40 + push % 7),
        "nodes": float(6 + push % 3),
        "gpu_util": 50.0 + push % 40 + writer * 0.25,
    }
    return [
        {"series_id": f"{pool}/{signal}", "ts": ts, "value": values[signal]}
        for pool in writer_pools(pools, writer)
        for signal in SIGNALS
    ]


async def post(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, body: bytes
) -> tuple[int, bytes]:
    """One ``POST /signals/metrics`` on a keep-alive connection: status and body."""
    writer.write(
        b"POST /signals/metrics HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return int(head[9:12]), await reader.readexactly(length)


async def write_load(
    port: int, pools: Sequence[str], rate: float, seconds: float, end: datetime
) -> list[list[Any]]:
    """Each writer pushes at ``rate / WRITERS`` per second, open loop; return records."""
    loop = asyncio.get_running_loop()
    records: list[list[Any]] = []
    start = loop.time() + 0.1
    per_writer = rate / WRITERS
    count = int(per_writer * seconds)

    async def one_writer(index: int) -> None:
        reader, stream = await asyncio.open_connection("127.0.0.1", port)
        offset = index / rate  # stagger the writers evenly
        for push in range(count):
            intended = start + offset + push / per_writer
            delay = intended - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            body = json.dumps(batch(pools, index, push, end)).encode()
            try:
                status, answer = await post(reader, stream, body)
            except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                status, answer = 0, str(exc).encode()
                reader, stream = await asyncio.open_connection("127.0.0.1", port)
            records.append(
                [intended - start, loop.time() - intended, status, index, push, answer[:300]]
            )
        stream.close()

    await asyncio.gather(*(one_writer(i) for i in range(WRITERS)))
    return records


def run_writers(args: argparse.Namespace) -> None:
    """The writer subprocess: print the push records as JSON."""
    pools = api_load.pool_names(args.pools)
    end = datetime.fromisoformat(args.end)
    gc.disable()
    records = asyncio.run(write_load(args.port, pools, args.push_rate, args.duration, end))
    print(json.dumps([[*r[:5], r[5].decode(errors="replace")] for r in records]))


def summarise_pushes(records: Sequence[Sequence[Any]]) -> dict[str, Any]:
    """Push latency percentiles (ms), rate and errors, with the first error's answer."""
    summary = api_load.summarise([[r[0], r[1], r[2], 0] for r in records], 0.0)
    summary.pop("body_bytes", None)
    failed = [r for r in records if r[2] != 200]
    summary["first_error"] = None if not failed else {"status": failed[0][2], "body": failed[0][5]}
    summary["samples_per_push"] = BATCH
    return summary


def lost_samples(
    workdir: Path, pools: Sequence[str], records: Sequence[Sequence[Any]], end: datetime
) -> dict[str, int]:
    """Compare the store with every accepted push: missing or changed samples, bad demand."""
    expected: dict[tuple[str, str], float] = {}
    for record in records:
        if record[2] == 200:
            for sample in batch(pools, int(record[3]), int(record[4]), end):
                expected[(sample["series_id"], sample["ts"])] = sample["value"]
    series = sorted({sid for sid, _ in expected} | {f"{p}/demand_gpus" for p in pools})
    with open_store(f"sqlite:///{workdir / 'store.db'}") as store:
        frame = store.samples.read(series, start=end - timedelta(days=2))
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
        "missing": missing,
        "changed": changed,
        "wrong_demand_rows": bad_demand,
    }


def mixed(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """Serve, read and write at once; then check the store and measure reads alone."""
    me = [sys.executable, str(Path(api_load.__file__).resolve())]
    port = api_load.free_port()
    end = history_end()
    server = subprocess.Popen(
        [
            *me,
            "serve",
            f"--dir={workdir}",
            f"--port={port}",
            f"--refresh={args.refresh}",
            f"--parser={args.parser}",
        ]
    )
    try:
        api_load.wait_ready(port, timeout=180)
        if args.gc_freeze:  # as `foresight serve` does once it is ready
            api_load.wait_ready(port, timeout=30, path=api_load.GC_FREEZE)
        before = api_load.load_average()
        cpu_before = api_load.cpu_seconds(server.pid)
        started = time.monotonic()
        reads = subprocess.Popen(
            [
                *me,
                "load",
                f"--port={port}",
                "--path=/recommendation",
                f"--rate={args.rate}",
                f"--duration={args.duration}",
                f"--warmup={args.warmup}",
                f"--connections={args.connections}",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        time.sleep(args.warmup)  # the writers start with the measured reads
        writes = subprocess.run(
            [
                sys.executable,
                __file__,
                "writers",
                f"--port={port}",
                f"--pools={args.pools}",
                f"--push-rate={args.push_rate}",
                f"--duration={args.duration}",
                f"--end={end.isoformat()}",
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        read_out, _ = reads.communicate(timeout=args.duration * 4 + 120)
        wall = time.monotonic() - started
        server_cpu = api_load.cpu_seconds(server.pid) - cpu_before
        after = api_load.load_average()
    finally:
        server.terminate()
        server.wait(timeout=30)
    records = json.loads(writes.stdout)
    pools = api_load.pool_names(args.pools)
    return {
        "reads": json.loads(read_out),
        "pushes": summarise_pushes(records),
        "store_check": lost_samples(workdir, pools, records, end),
        "server_cpu_share_of_one_core": server_cpu / wall,
        "load_average_before": before,
        "load_average_after": after,
    }


def reads_alone(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """``GET /recommendation`` alone at ``args.alone_rate`` with api_load's measurement."""
    alone = argparse.Namespace(**vars(args))
    alone.rate, alone.targets, alone.switch_ms = (args.alone_rate, ["/recommendation"], None)
    result: dict[str, Any] = api_load.measure(alone, workdir)["/recommendation"]
    return result


def report(
    args: argparse.Namespace, found: dict[str, Any], alone: dict[str, Any] | None
) -> dict[str, Any]:
    """Print the table and return the JSON document."""
    from rich.console import Console
    from rich.table import Table

    reads, pushes, check = found["reads"], found["pushes"], found["store_check"]
    table = Table(
        title=f"mixed: GET /recommendation at {args.rate:g} rps, {args.pools} pools, while "
        f"{WRITERS} writers push {BATCH}-sample batches at {args.push_rate:g}/s in all, "
        f"{args.duration:g} s (open loop, ms from intended send)"
    )
    for column in ("phase", "rps", "p50", "p90", "p99", "max", "errors", "load avg after"):
        table.add_column(column, justify="left" if column == "phase" else "right")
    rows = [
        ("reads (mixed)", reads, found["load_average_after"]),
        ("pushes (mixed)", pushes, found["load_average_after"]),
    ]
    if alone is not None:
        rows.append((f"reads alone at {args.alone_rate:g} rps", alone, alone["load_average_after"]))
    for name, row, load in rows:
        table.add_row(
            name,
            f"{row['achieved_rps']:.0f}",
            *(f"{row[k]:.2f}" for k in ("p50", "p90", "p99", "max")),
            str(row["errors"]),
            " ".join(f"{x:.2f}" for x in load),
        )
    Console(width=150).print(table)
    print(
        f"store check: {check['pushed_samples']} samples pushed and accepted, "
        f"{check['missing']} missing, {check['changed']} changed, "
        f"{check['wrong_demand_rows']} wrong demand rows; server used "
        f"{found['server_cpu_share_of_one_core']:.2f} of a core; load average before "
        f"{found['load_average_before']}"
    )
    verdicts = {
        "read_p99": reads["p99"] < TARGETS["read_p99_ms"],
        "push_p99": pushes["p99"] < TARGETS["push_p99_ms"],
        "no_errors": reads["errors"] == 0 and pushes["errors"] == 0,
        "none_lost": check["missing"] == 0
        and check["changed"] == 0
        and check["wrong_demand_rows"] == 0,
    }
    if alone is not None:
        verdicts["alone_p99"] = alone["p99"] < TARGETS["alone_p99_ms"] and alone["errors"] == 0
    for name, met in verdicts.items():
        print(f"target {name}: {'met' if met else 'NOT met'}")
    return {
        "generated_at": datetime.now(UTC).isoformat(),
        "config": {
            key: getattr(args, key)
            for key in (
                "pools",
                "rate",
                "push_rate",
                "duration",
                "warmup",
                "connections",
                "refresh",
                "alone_rate",
                "gc_freeze",
            )
        },
        "writers": WRITERS,
        "samples_per_push": BATCH,
        "targets": TARGETS,
        "met": verdicts,
        "mixed": found,
        "reads_alone": alone,
    }


def run(argv: Sequence[str] | None = None) -> None:
    """The mixed scenario's command line (``api_load.py --scenario mixed`` lands here)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("role", nargs="?", default="bench", choices=("bench", "writers"))
    parser.add_argument("--pools", type=int, default=100)
    parser.add_argument("--rate", type=float, default=200.0, help="reads per second")
    parser.add_argument("--push-rate", type=float, default=5.0, help="pushes per second in all")
    parser.add_argument("--alone-rate", type=float, default=1000.0, help="0 skips reads alone")
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--refresh", type=float, default=5.0)
    parser.add_argument(
        "--gc-freeze",
        action="store_true",
        help="gc.freeze() in the server once ready, as serve does",
    )
    parser.add_argument("--quick", action="store_true", help="10 s phases, 2 s warm-up")
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON")
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--end", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role == "writers":
        run_writers(args)
        return
    if args.quick:
        args.duration, args.warmup = 10.0, 2.0
    with tempfile.TemporaryDirectory(prefix="foresight-api-mixed-") as tmp:
        workdir = Path(tmp)
        api_load.prepare(workdir, args.pools)
        found = mixed(args, workdir)
        alone = None
        if args.alone_rate > 0:
            fresh = workdir / "alone"
            fresh.mkdir()
            api_load.prepare(fresh, args.pools)
            alone = reads_alone(args, fresh)
    document = report(args, found, alone)
    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(document, indent=2) + "\n")
        print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    run()
