"""The traces scenario of ``benchmarks/api_load.py``: span ingest while decisions are read.

Three processes against one server (the same app and data as ``api_load.py``, with the
background call-chain analysis every 2 s and the incremental span statistics):

- a *sender* runs the real OpenTelemetry SDK: four TracerProviders (gateway ->
  preprocess -> ranker -> llm, one ``service.name`` each) with BatchSpanProcessor and the
  OTLP/HTTP protobuf exporter pointed at ``/v1/traces``, creating ``--span-rate`` spans
  per second (a quarter of that in traces) for the warm-up plus ``--duration`` seconds.
  It counts the spans each export call carried and whether the exporter reported
  success, and the spans the processor dropped;
- a *reader* (``api_load.py load``) GETs ``/recommendation`` at ``--rate`` per second,
  open loop, warm-up then measured phase;
- the orchestrator, which afterwards reads ``/signals/chain`` (once the last spans
  have settled) to check that every span sent was counted.

Run: ``python benchmarks/api_load.py --scenario traces`` (defaults: 2,000 spans/s, 200
rps, 60 s, 5 s warm-up; ``--quick`` for 10 s; ``--span-rate 0`` is the control, the
same reads without spans, written to ``api_load_traces_control.json``; ``--stalls``
adds the server's event-loop stalls and collection pauses on the reads' time axis, see
:mod:`api_load_stalls`). Prints a table
and writes ``benchmarks/results/api_load_traces.json``. Targets: 0 rejected valid spans, read p99
< 10 ms.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "api_load_traces.json"
SERVICES = ("gateway", "preprocess", "ranker", "llm")
TARGET_P99_MS = 10.0
SETTLE_WAIT_S = 12.0
"""Longer than the server's settle delay (5 s) plus an analysis period (2 s)."""
MS = 1_000_000


def send_spans(port: int, span_rate: float, seconds: float) -> dict[str, Any]:
    """The sender process: export ``span_rate`` spans/s for ``seconds`` with the real SDK."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )
    from opentelemetry.trace import SpanKind

    counts = {"exported_ok": 0, "export_failed": 0, "export_calls": 0}

    class Counting(SpanExporter):
        """Delegates to the OTLP exporter and counts what each call carried."""

        def __init__(self, inner: SpanExporter) -> None:
            self.inner = inner

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            result = self.inner.export(spans)
            counts["export_calls"] += 1
            key = "exported_ok" if result is SpanExportResult.SUCCESS else "export_failed"
            counts[key] += len(spans)
            return result

        def shutdown(self) -> None:
            self.inner.shutdown()

        def force_flush(self, timeout_millis: int = 30_000) -> bool:
            return True

    endpoint = f"http://127.0.0.1:{port}/v1/traces"
    providers = []
    processors = []
    for name in SERVICES:
        provider = TracerProvider(resource=Resource.create({"service.name": name}))
        processor = BatchSpanProcessor(
            Counting(OTLPSpanExporter(endpoint=endpoint, timeout=10)),
            max_queue_size=200_000,
            max_export_batch_size=512,
            schedule_delay_millis=1000,
        )
        provider.add_span_processor(processor)
        providers.append(provider)
        processors.append(processor)
    tracers = [p.get_tracer("foresight-bench") for p in providers]
    traces_per_s = span_rate / len(SERVICES)
    started = time.monotonic()
    made = 0
    while (elapsed := time.monotonic() - started) < seconds:
        due = int(elapsed * traces_per_s) - made
        for _ in range(due):
            t0 = time.time_ns()
            gw = tracers[0].start_span("GET /answer", kind=SpanKind.SERVER, start_time=t0)
            ctx = trace.set_span_in_context(gw)
            pre = tracers[1].start_span("prep", context=ctx, start_time=t0 + 1 * MS)
            ctx = trace.set_span_in_context(pre)
            rank = tracers[2].start_span("rank", context=ctx, start_time=t0 + 20 * MS)
            ctx = trace.set_span_in_context(rank)
            llm = tracers[3].start_span("gen", context=ctx, start_time=t0 + 25 * MS)
            llm.end(end_time=t0 + 225 * MS)
            rank.end(end_time=t0 + 230 * MS)
            pre.end(end_time=t0 + 235 * MS)
            gw.end(end_time=t0 + 240 * MS)
        made += due
        time.sleep(0.005)
    generated_seconds = time.monotonic() - started
    for provider in providers:
        provider.force_flush(60_000)
    for provider in providers:
        provider.shutdown()
    return {
        "spans_created": made * len(SERVICES),
        "seconds": generated_seconds,
        "achieved_spans_per_s": made * len(SERVICES) / max(generated_seconds, 1e-9),
        **counts,
        "dropped_by_processor": made * len(SERVICES)
        - counts["exported_ok"]
        - counts["export_failed"],
    }


def _get_json(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as response:
        return json.load(response)


def measure_traces(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """Start the server, run sender and reader together, then check what was counted."""
    # Imported here: api_load imports this module (it dispatches the scenario to it).
    import api_load_stalls
    from api_load import (
        GC_FREEZE,
        cpu_seconds,
        free_port,
        load_average,
        server_description,
        wait_ready,
    )

    port = free_port()
    me = [sys.executable, str((ROOT / "benchmarks" / "api_load.py").resolve())]
    server = subprocess.Popen(
        [
            *me,
            "serve",
            f"--dir={workdir}",
            f"--port={port}",
            f"--refresh={args.refresh}",
            f"--switch-ms={args.switch_ms or 0}",
            f"--parser={args.parser}",
            *(["--stalls"] if args.stalls else []),
        ]
    )
    try:
        wait_ready(port, timeout=120)
        if args.gc_freeze:  # as `foresight serve` does once it is ready
            wait_ready(port, timeout=30, path=GC_FREEZE)
        before = load_average()
        cpu_before = cpu_seconds(server.pid)
        sender = subprocess.Popen(
            [
                *me,
                "--scenario=traces",
                "send",
                f"--port={port}",
                f"--span-rate={args.span_rate}",
                f"--duration={args.warmup + args.duration}",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        reader = subprocess.run(
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
            check=True,
            capture_output=True,
            text=True,
        )
        during = load_average()
        reads = json.loads(reader.stdout)
        stalls = (
            api_load_stalls.fetch(port, reads["started_monotonic"], args.duration)
            if args.stalls
            else None
        )
        out, _ = sender.communicate(timeout=600)
        sent = json.loads(out.strip().splitlines()[-1])
        cpu_used = cpu_seconds(server.pid) - cpu_before
        time.sleep(SETTLE_WAIT_S)
        chain = _get_json(port, "/signals/chain")
        counted = sum(int(s.get("span_count") or 0) for s in chain["services"])
    finally:
        server.terminate()
        server.wait(timeout=30)
    return {
        "reads": reads,
        "spans": {**sent, "counted_by_server": counted},
        "chain": {
            s["service"]: {
                "calls": s.get("call_count"),
                "p95_ms": s.get("p95_ms"),
                "own_p95_ms": s.get("own_p95_ms"),
            }
            for s in chain["services"]
        },
        "server_cpu_seconds": cpu_used,
        "gc_freeze": bool(args.gc_freeze),
        "switch_ms": args.switch_ms,
        "server": server_description(args.parser),
        "load_average_before": before,
        "load_average_during": during,
        "load_average_after": load_average(),
        **({"stalls": stalls} if stalls is not None else {}),
    }


def report_traces(args: argparse.Namespace, result: dict[str, Any]) -> dict[str, Any]:
    """Print the table and return the JSON document."""
    reads, spans = result["reads"], result["spans"]
    rejected = spans["export_failed"] + spans["dropped_by_processor"]
    lost = spans["spans_created"] - spans["counted_by_server"]
    rows = [
        ("spans created (SDK)", f"{spans['spans_created']:,}"),
        ("span rate achieved", f"{spans['achieved_spans_per_s']:,.0f} /s"),
        ("spans exported OK", f"{spans['exported_ok']:,} in {spans['export_calls']} calls"),
        ("spans rejected/failed/dropped", f"{rejected:,}"),
        ("spans counted by the server", f"{spans['counted_by_server']:,} (missing {lost:,})"),
        ("/recommendation requests", f"{reads['requests']:,} ({reads['errors']} errors)"),
        ("read rate achieved", f"{reads['achieved_rps']:.1f} rps"),
        ("read p50 / p90 / p99", "{p50:.2f} / {p90:.2f} / {p99:.2f} ms".format(**reads)),
        ("read max", f"{reads['max']:.1f} ms"),
        ("server CPU", f"{result['server_cpu_seconds']:.1f} s"),
        ("load average before", str(result["load_average_before"])),
        ("load average during", str(result["load_average_during"])),
        ("load average after", str(result["load_average_after"])),
    ]  # fmt: skip
    width = max(len(k) for k, _ in rows)
    print(
        f"traces scenario: {args.span_rate:.0f} spans/s, {args.rate:.0f} rps, {args.duration:.0f} s"
    )
    for key, value in rows:
        print(f"  {key:<{width}}  {value}")
    verdict = {
        "zero_rejected_valid_spans": rejected == 0 and lost == 0,
        "read_p99_below_10ms": reads["p99"] < TARGET_P99_MS,
    }
    stalls = result.get("stalls")
    if stalls is not None:
        for key, unit in (("worst_loop_lags", "loop stalls"), ("worst_collections", "collections")):
            worst = ", ".join(f"{w['ms']:.0f} ms at {w['at_s']:.2f} s" for w in stalls[key][:4])
            print(f"  {unit + ' (worst)':<{width}}  {worst or 'none'}")
        print(f"  {'thread CPU at the end':<{width}}  {stalls['thread_cpu_seconds_at_end']}")
        for lag in stalls["worst_loop_lags_overlapping"][:8]:
            print(f"    stall {lag['ms']:.0f} ms at {lag['at_s']:.2f} s: {lag['calls']}")
        for label, figures in stalls["timed_calls"].items():
            print(f"    {label:<34} {figures}")
        census = stalls["gc_census_at_end"]
        print(f"  {'tracked objects by gen':<{width}}  {census['tracked_by_generation']}")
        print(f"  {'oldest generation holds':<{width}}  {census['oldest_top_types']}")
    print(f"  targets: {verdict}")
    return {
        "scenario": "traces",
        "span_rate": args.span_rate,
        "read_rate": args.rate,
        "duration_s": args.duration,
        "warmup_s": args.warmup,
        "targets": {"rejected_valid_spans": 0, "read_p99_ms_below": TARGET_P99_MS},
        "met": verdict,
        **result,
    }


def run_traces(args: argparse.Namespace, workdir: Path) -> None:
    """Measure, report and write the JSON (unless ``--no-write``)."""
    document = report_traces(args, measure_traces(args, workdir))
    # --span-rate 0 is the control: the same reads on the same (shared) machine, no spans.
    path = RESULTS if args.span_rate else RESULTS.with_name("api_load_traces_control.json")
    if not args.no_write:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document, indent=2) + "\n")
        print(f"wrote {path.relative_to(ROOT)}")
