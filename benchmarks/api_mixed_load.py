"""The mixed scenario's requests, and its client process (``api_mixed.py client``).

One phase of :mod:`benchmarks.api_mixed` is one client process
(:mod:`benchmarks.api_client`, open loop) sending at once

- the phase's reads: ``per-pool``, one pool per request, half as
  ``GET /recommendation/{pool}`` and half as ``GET /recommendation?pool={pool}`` (what a
  KEDA ``metrics-api`` scaler or a hook polls), the pools taken in turn; or
  ``full-set``, ``GET /recommendation`` (every pool in one body);
- the pushes of :data:`WRITERS` writers, each on its own connection, together
  ``push_rate`` a second (staggered evenly), each a ``POST /signals/metrics`` of
  :data:`BATCH` samples: push ``k`` of writer ``w`` carries ``queue_gpus``,
  ``allocated_gpus``, ``nodes`` and ``gpu_util`` of the writer's pools at the
  ``k + 1``-th 5-minute step before the history's end, with values that identify the
  push, so every (series, time) is written once and the store can be checked after.

Every request's bytes are built before the phase starts. The process reads nothing of
the app (only the pools file), so it stays small.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import numpy as np
import yaml

from benchmarks.api_client import Records, Stream, event_loop, run_streams, summarise

Phase = Literal["per-pool", "full-set"]
PHASES: tuple[Phase, ...] = ("per-pool", "full-set")
WRITERS = 4
BATCH = 100
SIGNALS = ("queue_gpus", "allocated_gpus", "nodes", "gpu_util")
STEP = timedelta(minutes=5)
PUSH = "push"
"""Name prefix of the writers' streams (``push-0`` ...)."""


def pool_names(pools_file: Path) -> list[str]:
    """The pool names of a pools file, in its order."""
    return [pool["name"] for pool in yaml.safe_load(pools_file.read_text())["pools"]]


def writer_pools(pools: Sequence[str], writer: int) -> list[str]:
    """The pools writer ``writer`` owns (disjoint, BATCH / len(SIGNALS) each)."""
    per = BATCH // len(SIGNALS)
    return list(pools[writer * per : (writer + 1) * per])


def batch(pools: Sequence[str], writer: int, push: int, end: datetime) -> list[dict[str, Any]]:
    """Push ``push`` of ``writer``: its pools' four signals at step ``push + 1`` before end."""
    ts = (end - (push + 1) * STEP).isoformat().replace("+00:00", "Z")
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


def get_request(path: str) -> bytes:
    """The bytes of ``GET path`` on a keep-alive connection."""
    return f"GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n".encode()


def push_request(body: bytes) -> bytes:
    """The bytes of a ``POST /signals/metrics`` of ``body`` (JSON)."""
    head = (
        "POST /signals/metrics HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def read_streams(
    phase: Phase, pools: Sequence[str], rate: float, seconds: float, connections: int
) -> list[Stream]:
    """The phase's reads at ``rate`` in all for ``seconds``, over ``connections``."""
    if phase == "full-set":
        count = int(rate * seconds)
        paths = [get_request("/recommendation")]
        return [Stream("full-set", paths, rate, count, connections)]
    # Two forms, each at half the rate, interleaved: path, query, path, query...
    half = rate / 2
    count = int(half * seconds)
    forms = {
        "per-pool-path": [get_request(f"/recommendation/{pool}") for pool in pools],
        "per-pool-query": [get_request(f"/recommendation?pool={pool}") for pool in pools],
    }
    return [
        Stream(name, requests, half, count, max(1, connections // 2), offset=i / rate)
        for i, (name, requests) in enumerate(forms.items())
    ]


def push_streams(
    pools: Sequence[str], rate: float, seconds: float, first: int, end: datetime
) -> list[Stream]:
    """The writers' pushes at ``rate`` in all for ``seconds``, numbered from ``first``."""
    per_writer = rate / WRITERS
    count = int(per_writer * seconds)
    return [
        Stream(
            f"{PUSH}-{writer}",
            [
                push_request(json.dumps(batch(pools, writer, first + k, end)).encode())
                for k in range(count)
            ],
            per_writer,
            count,
            connections=1,
            offset=writer / rate,
        )
        for writer in range(WRITERS)
    ]


def server_cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def phase_summary(
    records: dict[str, Records], measured_from: float, first_push: int
) -> dict[str, Any]:
    """The JSON of one phase: reads (all, and per stream), pushes, and each push's status."""
    reads = {name: r for name, r in records.items() if not name.startswith(PUSH)}
    pushes = {name: r for name, r in records.items() if name.startswith(PUSH)}
    found: dict[str, Any] = {
        "reads": summarise(list(reads.values()), measured_from),
        "pushes": summarise(list(pushes.values()), measured_from),
    }
    if len(reads) > 1:
        found["reads_by_form"] = {name: summarise([r], measured_from) for name, r in reads.items()}
    # Every push, warm-up included, for the store check: [writer, push, status].
    found["push_statuses"] = [
        [int(name.rsplit("-", 1)[1]), first_push + k, int(status)]
        for name, r in pushes.items()
        for k, status in enumerate(r.status.tolist())
    ]
    return found


def run_client(args: argparse.Namespace) -> dict[str, Any]:
    """The client process of one phase: warm up and measure; return the phase's JSON."""
    pools = pool_names(args.dir / "pools.yaml")
    seconds = args.warmup + args.duration
    end = datetime.fromisoformat(args.end)
    streams = [
        *read_streams(args.phase, pools, args.rate, seconds, args.connections),
        *push_streams(pools, args.push_rate, seconds, args.first_push, end),
    ]
    loop = event_loop()
    try:
        cpu_before = server_cpu_seconds(args.server_pid)
        records, start, client_cpu = loop.run_until_complete(
            run_streams("127.0.0.1", args.port, streams)
        )
        server_cpu = server_cpu_seconds(args.server_pid) - cpu_before
    finally:
        loop.close()
    wall = max(float(np.nanmax(r.done)) for r in records.values()) - start
    sent = sum(s.count for s in streams)
    return {
        **phase_summary(records, start + args.warmup, args.first_push),
        "wall_s": wall,
        "server_cpu_share_of_one_core": server_cpu / wall,
        "server_cpu_ms_per_request": server_cpu / sent * 1000,
        "client_cpu_share_of_one_core": client_cpu / wall,
        "client_cpu_ms_per_request": client_cpu / sent * 1000,
    }


def add_client_arguments(parser: argparse.ArgumentParser) -> None:
    """The client role's own options (the orchestrator passes them)."""
    parser.add_argument("--phase", choices=PHASES, help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--server-pid", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--end", help=argparse.SUPPRESS)
    parser.add_argument("--first-push", type=int, default=0, help=argparse.SUPPRESS)


def main_client(args: argparse.Namespace) -> None:
    """Print the phase's JSON (the orchestrator reads it from stdout)."""
    asyncio.set_event_loop(None)
    print(json.dumps(run_client(args)))
