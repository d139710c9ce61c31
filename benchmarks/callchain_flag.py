"""Time-to-flag: how long after a service slows in its own work the analysis says so.

Issue #37's scenarios on the deployment's default call-chain settings (a 5-minute
window with own work also judged over its last 30 s, spans folded 5 s after arrival,
10 s buckets, an analysis every 2 s, k = 2, baselines ready after 5 analyses), on a
simulated clock so the figures do not depend on the machine: gateway -> tokenizer
(CPU, on no GPU pool, no SLO) -> llm (pool ``l4-infer``) at 20 traces/s, each service
exporting its spans every 5 s (the OpenTelemetry SDK's BatchSpanProcessor default).
After 10 minutes of healthy traffic one service's own work slows 5x; the clock then
runs until the verdict flips, or 5 minutes (one window) pass.

Scenarios: the CPU tokenizer 20 -> 100 ms and 60 -> 300 ms (verdict
``outside_gpu_pools``), and llm 100 -> 500 ms within its 800 ms SLO with busy GPUs
(``bottleneck``) and with idle GPUs (``not_gpu_bound``). The time is from the first
slow trace to the first analysis with the verdict; "others blamed" lists any other
service blamed on the way (there should be none).

Run: ``python benchmarks/callchain_flag.py`` (a few seconds; ``--recent-seconds 0``
judges own work over the whole window only). Prints a table and writes
``benchmarks/results/callchain_flag.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from api.callchain.baseline import BaselineState
from api.callchain.bottleneck import analyse
from api.callchain.incremental import ChainWindow
from api.callchain.types import Span
from pipelines.config.pools import PoolConfig, ServiceConfig

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "callchain_flag.json"
CHAIN = ("gateway", "tokenizer", "llm")
RATE = 20
"""Traces per second."""
EXPORT_EVERY_S = 5
ANALYSE_EVERY_S = 2
WARM_UP_S = 600
GIVE_UP_S = 300
RECENT = timedelta(seconds=30)
"""The analysis's recent window (``BottleneckSettings.recent_window``); 0 judges own
work over the whole window only."""
START = datetime(2026, 12, 1, tzinfo=UTC)
MS = 1_000_000
POOLS = [
    PoolConfig(
        name="l4-infer",
        node_group_id="ng-l4",
        services=[ServiceConfig(name="llm", slo_p95_ms=800)],
    )
]


@dataclass(frozen=True)
class Scenario:
    name: str
    service: str
    usual: dict[str, int]
    slow_ms: int
    gpu_util: float
    verdict: str


SCENARIOS = (
    Scenario(
        "cpu tokenizer 20->100 ms", "tokenizer", {"gateway": 5, "tokenizer": 20, "llm": 350},
        100, 90.0, "outside_gpu_pools",
    ),
    Scenario(
        "cpu tokenizer 60->300 ms", "tokenizer", {"gateway": 5, "tokenizer": 60, "llm": 350},
        300, 90.0, "outside_gpu_pools",
    ),
    Scenario(
        "gpu llm 100->500 ms, busy", "llm", {"gateway": 5, "tokenizer": 20, "llm": 100},
        500, 90.0, "bottleneck",
    ),
    Scenario(
        "gpu llm 100->500 ms, idle", "llm", {"gateway": 5, "tokenizer": 20, "llm": 100},
        500, 10.0, "not_gpu_bound",
    ),
)  # fmt: skip


def trace_spans(index: int, at_ns: int, own: dict[str, int]) -> list[Span]:
    """One trace of the chain starting at ``at_ns``: own work, the call, 1 ms after."""
    spans = []
    start = at_ns
    ends: list[int] = []
    for name in CHAIN:
        ends.append(start)
        start += own[name] * MS
    end = start
    for depth in range(len(CHAIN) - 1, -1, -1):
        end += MS
        parent = f"{depth - 1:016x}" if depth else None
        spans.append(
            Span(f"{index:032x}", f"{depth:016x}", parent, CHAIN[depth], "op", ends[depth], end)
        )
    return spans


def run(scenario: Scenario, recent: timedelta) -> dict[str, Any]:
    """Simulate one scenario; return when (and whether) the verdict flipped."""
    window = ChainWindow()
    baselines = BaselineState()
    own = dict(scenario.usual)
    outbox: list[Span] = []
    index = 0
    switch_s: float | None = None
    others: set[str] = set()
    for tick in range(int((WARM_UP_S + GIVE_UP_S) * RATE)):
        second = tick / RATE
        now = START + timedelta(seconds=second)
        if switch_s is None and second >= WARM_UP_S:
            own[scenario.service] = scenario.slow_ms
            switch_s = second
        outbox += trace_spans(index, int(now.timestamp() * 1e9), own)
        index += 1
        if tick % (EXPORT_EVERY_S * RATE) == EXPORT_EVERY_S * RATE - 1:
            window.add(outbox, now)
            outbox = []
        if tick % (ANALYSE_EVERY_S * RATE) != ANALYSE_EVERY_S * RATE - 1:
            continue
        result = analyse(
            window.stats(now),
            POOLS,
            recent=window.recent_stats(now, recent) if recent else None,
            current_nodes={"l4-infer": 6},
            gpu_util={"l4-infer": scenario.gpu_util},
            baselines=baselines,
            now=now,
        )
        baselines = result.baselines
        blamed = {n for n, r in result.services.items() if r.culprit}
        if switch_s is None:
            others |= blamed
            continue
        others |= blamed - {scenario.service}
        if result.services[scenario.service].verdict == scenario.verdict:
            return {"seconds": second - switch_s, "flagged": True, "others_blamed": sorted(others)}
    return {"seconds": None, "flagged": False, "others_blamed": sorted(others)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--recent-seconds",
        type=float,
        default=RECENT.total_seconds(),
        help="the analysis's recent window; 0 judges own work over the whole window "
        "(written to callchain_flag_window_only.json)",
    )
    recent = timedelta(seconds=parser.parse_args().recent_seconds)
    results = RESULTS if recent else RESULTS.with_name("callchain_flag_window_only.json")
    started = time.perf_counter()
    rows = []
    for scenario in SCENARIOS:
        outcome = run(scenario, recent)
        rows.append({"scenario": scenario.name, "verdict": scenario.verdict, **outcome})
    took = time.perf_counter() - started
    print(f"{'scenario':<28} {'verdict':<18} {'time-to-flag':>13}  others blamed")
    for row in rows:
        flag = f"{row['seconds']:.0f} s" if row["flagged"] else "never"
        print(
            f"{row['scenario']:<28} {row['verdict']:<18} {flag:>13}  {row['others_blamed'] or '-'}"
        )
    settings = {
        "window_s": 300,
        "settle_s": 5,
        "bucket_s": 10,
        "analysis_every_s": ANALYSE_EVERY_S,
        "export_every_s": EXPORT_EVERY_S,
        "traces_per_s": RATE,
        "warm_up_s": WARM_UP_S,
        "recent_window_s": recent.total_seconds(),
    }
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps({"settings": settings, "rows": rows}, indent=2) + "\n")
    print(f"({took:.1f} s; written to {results.relative_to(results.parents[2])})")


if __name__ == "__main__":
    main()
