"""Event-loop stalls and garbage-collector pauses inside the benchmark's server (``--stalls``).

A read's latency tail is what held up the server's event loop when the read arrived:
its own handler, another request, a collection (which stops every thread), or a
background thread keeping the GIL. The server of ``api_load.py serve --stalls`` records

- each time a task sleeping 1 ms on the event loop woke more than ``LAG_MS`` late (the
  loop, or the GIL, was held that long);
- each collection of more than ``GC_MS``, with its generation and thread;
- each thread's CPU seconds so far, by name (Linux ``/proc``);

on the monotonic clock, which the reader shares (``started_monotonic``), so the
orchestrator can put the stalls on the reads' time axis. The watcher's 1,000 wake-ups a
second cost some CPU: compare runs with the same flag.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Final

from fastapi import APIRouter

STALLS: Final = "/bench/stalls"
LAG_MS: Final = 5.0
"""A wake-up this late counts as a stall of the event loop."""
GC_MS: Final = 2.0
"""A collection this long is recorded."""
TOP: Final = 12


class StallRecorder:
    """Records loop stalls and collection pauses of the process it runs in."""

    def __init__(self) -> None:
        self.lags: list[tuple[float, float]] = []
        self.collections: list[tuple[float, float, int, str]] = []
        self._gc_started = 0.0

    def install(self) -> APIRouter:
        """Hook the garbage collector; return the router that serves the records."""
        gc.callbacks.append(self._on_gc)
        router = APIRouter()

        @router.get(STALLS)
        async def stalls() -> dict[str, Any]:
            return {
                "loop_lags": self.lags,
                "collections": self.collections,
                "thread_cpu_seconds": thread_cpu_seconds(),
            }

        return router

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.monotonic()
            return
        took = (time.monotonic() - self._gc_started) * 1000
        if took > GC_MS:
            name = threading.current_thread().name
            self.collections.append((self._gc_started, took, info["generation"], name))

    async def watch_loop(self) -> None:
        """Sleep 1 ms at a time and record every wake-up later than ``LAG_MS``."""
        while True:
            asked = time.monotonic()
            await asyncio.sleep(0.001)
            late = (time.monotonic() - asked) * 1000 - 1
            if late > LAG_MS:
                self.lags.append((asked, late))


def thread_cpu_seconds() -> dict[str, float]:
    """CPU seconds (user + system) of each live thread of this process, by name."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    tick = os.sysconf("SC_CLK_TCK")
    found: dict[str, float] = {}
    for tid in os.listdir("/proc/self/task"):
        fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        name = names.get(int(tid), f"thread {tid}")
        found[name] = found.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return {name: round(cpu, 2) for name, cpu in sorted(found.items())}


def fetch(port: int, reads_started: float, seconds: float) -> dict[str, Any]:
    """Read the server's records; return those of the measured phase on its time axis.

    Args:
        port: the server's port.
        reads_started: the reader's measured phase start (monotonic seconds).
        seconds: the measured phase's length.
    """
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{STALLS}", timeout=30) as answer:
        return on_reads_axis(json.load(answer), reads_started, seconds)


def on_reads_axis(raw: dict[str, Any], reads_started: float, seconds: float) -> dict[str, Any]:
    """Summarise the records of the measured phase, times in seconds from its start."""

    def within(at: float) -> bool:
        return 0 <= at - reads_started <= seconds

    lags = [(at - reads_started, ms) for at, ms in raw["loop_lags"] if within(at)]
    collections = [
        (at - reads_started, ms, generation, thread)
        for at, ms, generation, thread in raw["collections"]
        if within(at)
    ]
    return {
        "loop_lags_over_ms": LAG_MS,
        "loop_lags": len(lags),
        "loop_lag_ms_total": round(sum(ms for _, ms in lags), 1),
        "worst_loop_lags": [
            {"at_s": round(at, 3), "ms": round(ms, 2)}
            for at, ms in sorted(lags, key=lambda x: -x[1])
        ][:TOP],
        "collections_over_ms": GC_MS,
        "collections": len(collections),
        "worst_collections": [
            {"at_s": round(at, 3), "ms": round(ms, 2), "generation": gen, "thread": thread}
            for at, ms, gen, thread in sorted(collections, key=lambda x: -x[1])
        ][:TOP],
        "thread_cpu_seconds_at_end": raw["thread_cpu_seconds"],
    }
