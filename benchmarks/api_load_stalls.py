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
import functools
import gc
import json
import os
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from fastapi import APIRouter

STALLS: Final = "/bench/stalls"
LAG_MS: Final = 5.0
"""A wake-up this late counts as a stall of the event loop."""
GC_MS: Final = 2.0
"""A collection this long is recorded."""
TOP: Final = 12
CALL_MS: Final = 3.0
"""A timed background call this long is recorded."""


class StallRecorder:
    """Records loop stalls and collection pauses of the process it runs in."""

    def __init__(self) -> None:
        self.lags: list[tuple[float, float]] = []
        self.collections: list[tuple[float, float, int, str]] = []
        self.calls: list[tuple[float, float, str, str]] = []
        self._gc_started = 0.0

    def time_calls(self, owner: Any, names: Sequence[str]) -> None:
        """Record each call of ``owner``'s ``names`` longer than ``CALL_MS`` (start, ms).

        The server's background work (refresh, analysis, decoding, settling) runs in
        threads; a stall of the event loop that overlaps one of these calls points at it.
        """
        for name in names:
            original = getattr(owner, name)
            label = f"{getattr(owner, '__name__', type(owner).__name__)}.{name}"
            setattr(owner, name, self._timed(original, label))

    def _timed(self, original: Callable[..., Any], label: str) -> Callable[..., Any]:
        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.monotonic()
            try:
                return original(*args, **kwargs)
            finally:
                took = (time.monotonic() - started) * 1000
                if took > CALL_MS:
                    name = threading.current_thread().name
                    self.calls.append((started, took, label, name))

        return timed

    def install(self) -> APIRouter:
        """Hook the garbage collector; return the router that serves the records."""
        gc.callbacks.append(self._on_gc)
        router = APIRouter()

        @router.get(STALLS)
        async def stalls() -> dict[str, Any]:
            return {
                "loop_lags": self.lags,
                "collections": self.collections,
                "calls": self.calls,
                "thread_cpu_seconds": thread_cpu_seconds(),
                "gc_census": gc_census(),
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


def time_background(recorder: StallRecorder) -> None:
    """Time the server's background work: refresh, decisions, analysis, span intake."""
    from api.callchain.incremental import ChainWindow
    from api.forecasts import ForecastCache
    from api.latency import LatencyTracker
    from api.live import LiveIndex
    from api.routers import spans
    from api.service import RecommendationService

    recorder.time_calls(RecommendationService, ("refresh", "_decide"))
    recorder.time_calls(LiveIndex, ("poll",))
    recorder.time_calls(ForecastCache, ("reload",))
    recorder.time_calls(LatencyTracker, ("update",))
    recorder.time_calls(ChainWindow, ("add", "stats", "recent_stats"))
    recorder.time_calls(spans, ("decode_export",))


def summarise_calls(calls: Sequence[tuple[float, float, str]]) -> dict[str, Any]:
    """Per label: how many recorded calls, their total and longest milliseconds."""
    by_label: dict[str, list[float]] = {}
    for _, took, label in calls:
        by_label.setdefault(label, []).append(took)
    return {
        label: {"calls": len(t), "ms_total": round(sum(t), 1), "ms_max": round(max(t), 1)}
        for label, t in sorted(by_label.items(), key=lambda x: -sum(x[1]))
    }


def gc_census() -> dict[str, Any]:
    """Objects the collector tracks, by generation, and the commonest types of the oldest.

    A full collection walks every tracked object outside the frozen generation, so its
    pause grows with what the oldest generation holds: this says what that is.
    """
    oldest = Counter(type(o).__qualname__ for o in gc.get_objects(2))
    return {
        "tracked_by_generation": [len(gc.get_objects(g)) for g in range(3)],
        "frozen": gc.get_freeze_count(),
        "collections_by_generation": [s["collections"] for s in gc.get_stats()],
        "oldest_top_types": dict(oldest.most_common(TOP)),
    }


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
        "worst_loop_lags_overlapping": [
            {
                "at_s": round(at, 3),
                "ms": round(ms, 2),
                "calls": sorted(
                    {
                        f"{label} ({thread}, {took:.0f} ms)"
                        for start, took, label, thread in raw["calls"]
                        if start - reads_started <= at + ms / 1000
                        and at <= start - reads_started + took / 1000
                    }
                ),
            }
            for at, ms in sorted(lags, key=lambda x: -x[1])[:TOP]
        ],
        "timed_calls": summarise_calls(
            [(at, took, label) for at, took, label, _ in raw["calls"] if within(at)]
        ),
        "thread_cpu_seconds_at_end": raw["thread_cpu_seconds"],
        "gc_census_at_end": raw["gc_census"],
    }
