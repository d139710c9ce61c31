"""The benchmark's stall records: on the reads' time axis, worst first, the phase only."""

from __future__ import annotations

import asyncio
import time

from benchmarks.api_load_stalls import StallRecorder, on_reads_axis


def test_records_outside_the_measured_phase_are_left_out_and_the_worst_come_first() -> None:
    raw = {
        "loop_lags": [[99.0, 50.0], [100.5, 7.0], [130.2, 41.0], [161.0, 80.0]],
        "collections": [[100.1, 3.5, 0, "MainThread"], [120.0, 12.0, 2, "span-feed"]],
        "thread_cpu_seconds": {"MainThread": 9.5},
        "calls": [
            [130.19, 30.0, "ChainWindow.stats", "AnyIO worker thread"],
            [140.0, 12.0, "LiveIndex.poll", "AnyIO worker thread"],
            [170.0, 9.0, "LiveIndex.poll", "AnyIO worker thread"],
        ],
        "gc_census": {"tracked_by_generation": [1, 2, 3]},
    }

    found = on_reads_axis(raw, reads_started=100.0, seconds=60.0)

    assert found["loop_lags"] == 2
    assert [w["at_s"] for w in found["worst_loop_lags"]] == [30.2, 0.5]
    assert found["loop_lag_ms_total"] == 48.0
    assert found["worst_collections"][0] == {
        "at_s": 20.0,
        "ms": 12.0,
        "generation": 2,
        "thread": "span-feed",
    }
    assert found["thread_cpu_seconds_at_end"] == {"MainThread": 9.5}
    assert found["gc_census_at_end"] == {"tracked_by_generation": [1, 2, 3]}
    overlapping = {w["at_s"]: w["calls"] for w in found["worst_loop_lags_overlapping"]}
    assert overlapping[30.2] == ["ChainWindow.stats (AnyIO worker thread, 30 ms)"]
    assert overlapping[0.5] == []
    assert found["timed_calls"] == {
        "ChainWindow.stats": {"calls": 1, "ms_total": 30.0, "ms_max": 30.0},
        "LiveIndex.poll": {"calls": 1, "ms_total": 12.0, "ms_max": 12.0},
    }


def test_timed_calls_longer_than_the_threshold_are_recorded() -> None:
    class Work:
        def slow(self) -> int:
            time.sleep(0.01)
            return 1

        def quick(self) -> int:
            return 2

    recorder = StallRecorder()
    recorder.time_calls(Work, ("slow", "quick"))

    assert Work().slow() == 1
    assert Work().quick() == 2
    assert [label for _, _, label, _ in recorder.calls] == ["Work.slow"]


def test_a_blocked_event_loop_is_recorded_as_a_stall() -> None:
    recorder = StallRecorder()

    async def block_then_stop() -> None:
        watcher = asyncio.create_task(recorder.watch_loop())
        await asyncio.sleep(0.01)
        time.sleep(0.03)  # holds the loop, as a long handler or a collection would
        await asyncio.sleep(0.01)
        watcher.cancel()

    asyncio.run(block_then_stop())

    assert any(late >= 20 for _, late in recorder.lags)
