"""``GET /recommendation`` latency under a fixed request rate, from a separate process.

Setup: a temporary directory with a generated pools file (``--pools`` pools), a SQLite
store of two days of synthetic 5-minute samples per pool ending now, and a champion
(seasonal naive per demand series). A server subprocess serves the real app
(:func:`api.main.create_app` with the background refresh on, system clock) with
uvicorn, one worker, on loopback; a load subprocess sends requests at a fixed arrival
rate over keep-alive connections and records latency from each request's *intended*
send time (open loop, so a slow answer cannot hide the requests queued behind it:
no coordinated omission).

Targets, one after another against the same server, each with a warm-up then a
measured phase at the same rate, at each rate of ``--rates``:

- ``/healthz``: the framework's floor (routing, one tiny body);
- ``/recommendation``: the subject, every pool in one body, serialised per request
  from the pools' wire models (:class:`api.schemas.RecommendationSet`);
- ``/bench/recommendation-preencoded`` (added by this benchmark only): the same body
  from each pool's JSON encoded once per decision and joined per request, i.e. the
  pre-encoding the route had before #16 (it also cached the joined array, which
  saved a further 0.05 ms per call in-process).

The default rates are a realistic polling load and a stress load for 100 pools: 20
rps is every pool's KEDA ``metrics-api`` scaler polling every 30 s (KEDA's default
``pollingInterval``; 3.3 rps) plus dashboards and the publish job, with room to
spare; 200 rps is every pool polled twice a second.

Besides latency, each target reports the server process's CPU time per request
(background work included) and the best time per call straight into the ASGI app
in-process (the app's own cost, no HTTP): contention on a shared machine stretches
both far less than latency.

``--scenario mixed`` runs :mod:`benchmarks.api_mixed` instead: per-pool reads at 1,000
rps, then the full set at 200 rps, each while 4 writers push samples (``--runs 3`` for
consecutive runs).

``--scenario traces`` runs the call-chain scenario instead (spans through the real
OpenTelemetry SDK while ``/recommendation`` is read; see :mod:`api_load_traces`).

Run: ``python benchmarks/api_load.py`` (defaults: 100 pools, 200 rps, 5 s warm-up and
30 s per target, background refresh every 5 s); ``--quick`` for a 10 s smoke run;
``--refresh 0`` without the background refresh; ``--switch-ms`` sets the server's GIL
switch interval (default: as ``foresight serve`` sets it); ``--gc-freeze`` freezes the
server's startup objects out of the garbage collector; ``--stalls`` (traces scenario)
records the server's event-loop stalls and collection pauses; ``--profile`` times and
profiles each route in-process (cProfile, calling the ASGI app directly) instead. Prints
a table and writes ``benchmarks/results/api_load.json``. The machine's load average is
recorded with the numbers: on a shared machine the tail is noise as much as code.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import importlib.util
import json
import os
import platform
import pstats
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import api_load_stalls
import api_load_traces
import numpy as np
import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fastapi import APIRouter, FastAPI, Response  # noqa: E402

from api.deps import ServiceDep  # noqa: E402
from api.main import create_app  # noqa: E402
from api.schemas import PoolRecommendation  # noqa: E402
from api.services import Services  # noqa: E402
from api.settings import load_app_settings  # noqa: E402
from forecaster.champion import ChampionForecaster  # noqa: E402
from forecaster.models.naive import Persistence, SeasonalNaive  # noqa: E402
from forecaster.registry import LoadedModel  # noqa: E402
from pipelines.config.pools_file import load_pools  # noqa: E402
from pipelines.store.store import open_store  # noqa: E402
from policy.types import iso_utc  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "api_load.json"
STEP = timedelta(minutes=5)
DAY_STEPS = 288
PREENCODED = "/bench/recommendation-preencoded"
GC_FREEZE = "/bench/gc-freeze"
TARGETS = ("/healthz", "/recommendation", PREENCODED)
RATES = (20.0, 200.0)
"""Realistic polling of 100 pools, and a stress load (see the module docstring)."""
TARGET_P99_MS = 10.0

# -- the data ------------------------------------------------------------------------


def pool_names(count: int) -> list[str]:
    """The benchmark's pool names."""
    return [f"pool-{i:03d}" for i in range(count)]


def write_pools(path: Path, count: int) -> None:
    """Write a pools file of ``count`` pools with varied sizes and lead times."""
    pools = [
        {
            "name": name,
            "node_group_id": f"ng-{name}",
            "gpus_per_node": (4, 8)[i % 2],
            "min_nodes": 0,
            "max_nodes": 64,
            "lead_time": f"{(10, 15)[i % 2]}m",
            "quantile": 0.9,
        }
        for i, name in enumerate(pool_names(count))
    ]
    path.write_text(yaml.safe_dump({"pools": pools}, sort_keys=False))


def history(pool: str, end: datetime, seed: int) -> pd.DataFrame:
    """Two days of daily-seasonal demand with allocated, queue, nodes and util."""
    rng = np.random.default_rng(seed)
    n = 2 * DAY_STEPS
    ds = pd.date_range(end=end, periods=n, freq=STEP, tz="UTC")
    phase = np.arange(n) % DAY_STEPS / DAY_STEPS
    demand = np.round(40 + 30 * np.sin(2 * np.pi * phase) + rng.normal(0, 2, n)).clip(0)
    queue = np.round(demand * 0.25)
    allocated = demand - queue
    signals = {
        "demand_gpus": demand,
        "queue_gpus": queue,
        "allocated_gpus": allocated,
        "nodes": np.ceil(allocated / 8) + 1,
        "gpu_util": np.full(n, 60.0),
    }
    return pd.concat(
        [
            pd.DataFrame({"unique_id": f"{pool}/{signal}", "ds": ds, "y": values})
            for signal, values in signals.items()
        ],
        ignore_index=True,
    )


def prepare(workdir: Path, count: int) -> None:
    """Write the pools file and fill the store with history ending at the last step."""
    write_pools(workdir / "pools.yaml", count)
    now = datetime.now(UTC)
    end = now - timedelta(seconds=now.timestamp() % STEP.total_seconds())
    frames = [history(name, end, seed) for seed, name in enumerate(pool_names(count))]
    with open_store(f"sqlite:///{workdir / 'store.db'}") as store:
        store.samples.upsert(pd.concat(frames, ignore_index=True))


def champion() -> LoadedModel:
    """A champion as training would register it: seasonal naive for every series."""
    candidates = {
        "persistence": Persistence(horizon=12, window=DAY_STEPS),
        "seasonal_naive": SeasonalNaive(season_length=DAY_STEPS, horizon=12, window=DAY_STEPS),
    }
    model = ChampionForecaster({}, candidates, default="seasonal_naive")
    model.fit(history("fit", datetime(2025, 1, 1, tzinfo=UTC), seed=99))
    return LoadedModel(model=model, version="1", source="registry")


def build_app(workdir: Path, refresh_seconds: float | None = 5.0) -> FastAPI:
    """The real app over the prepared directory, plus the comparison routes."""
    settings = load_app_settings(
        root=workdir,
        pools_file=workdir / "pools.yaml",
        store_url=f"sqlite:///{workdir / 'store.db'}",
        levels=[0.5, 0.9],
        horizon=12,
        max_train_days=2,
    )
    store = open_store(settings.store_url)
    services = Services(
        settings, load_pools(settings.pools_file), store, champion(), owns_store=True
    )
    return create_app(
        services=services, refresh_seconds=refresh_seconds, extra_routers=[comparison_router()]
    )


def comparison_router() -> APIRouter:
    """The "before" route (pre-encoded pools joined per request) and a switch."""
    router = APIRouter()
    # Each decided pool's JSON, encoded once: keyed by the identity of its wire model
    # (an entry is replaced whole when the pool is decided again), which is kept so
    # the identity cannot be reused.
    encoded: dict[int, tuple[PoolRecommendation, bytes]] = {}

    def encode(body: PoolRecommendation) -> bytes:
        found = encoded.get(id(body))
        if found is None:
            if len(encoded) > 10_000:
                encoded.clear()
            found = encoded[id(body)] = (body, body.model_dump_json().encode())
        return found[1]

    @router.get(GC_FREEZE)
    async def freeze() -> Response:
        # What the server would do once started: move everything loaded so far out of
        # the collector's sight, so a full collection no longer walks it (~250 ms).
        gc.collect()
        gc.freeze()
        return Response(str(gc.get_freeze_count()), media_type="text/plain")

    @router.get(PREENCODED)
    async def preencoded(service: ServiceDep) -> Response:
        now = service.now()
        fresh = service.peek(service.select(None))
        if fresh is None:
            raise RuntimeError("benchmark: a pool's recommendation is not fresh")
        body = b"".join(
            (
                b'{"generated_at":',
                json.dumps(iso_utc(now)).encode(),
                b',"pools":[',
                b",".join(encode(entry.body) for entry in fresh),
                b'],"unavailable":[]}',
            )
        )
        return Response(body, media_type="application/json")

    return router


# -- the server process ----------------------------------------------------------------


def serve(
    workdir: Path,
    port: int,
    refresh_seconds: float,
    switch_ms: float | None,
    stalls: bool,
    parser: str = "auto",
) -> None:
    """Serve the app on 127.0.0.1:``port`` until killed (the server subprocess).

    Served as ``foresight serve`` serves (:func:`api.server.server_config`: its HTTP
    parser, event loop and limits; ``parser`` picks httptools or h11 to compare; its GIL
    switch interval unless ``switch_ms`` says another). With
    ``stalls``, also record event-loop stalls and collection pauses
    (:mod:`api_load_stalls`).
    """
    import uvicorn

    from api.server import server_config, use_switch_interval
    from api.settings import ServiceSettings

    service = ServiceSettings()
    if switch_ms:
        # How long a busy background thread (a push, the refresh) may keep the GIL from
        # the event loop, to compare with what serve sets (service.gil_switch_ms).
        service = service.model_copy(update={"gil_switch_ms": switch_ms})
    use_switch_interval(service)

    app = build_app(workdir, refresh_seconds or None)
    recorder = api_load_stalls.StallRecorder()
    if stalls:
        app.include_router(recorder.install())
        api_load_stalls.time_background(recorder)
    config = server_config(
        app, service, host="127.0.0.1", port=port, log_level="warning", parser=parser
    )
    server = uvicorn.Server(config)
    if not stalls:
        server.run()
        return

    async def run() -> None:
        watcher = asyncio.create_task(recorder.watch_loop())
        try:
            await server.serve()
        finally:
            watcher.cancel()

    asyncio.run(run())


def server_description(parser: str) -> str:
    """What served the benchmark: uvicorn as ``foresight serve`` configures it."""
    import uvicorn

    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    fast = parser != "h11" and importlib.util.find_spec("httptools") is not None
    return f"uvicorn {uvicorn.__version__}, 1 worker, {loop} loop, {'httptools' if fast else 'h11'}"


def free_port() -> int:
    """An unused loopback port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_ready(port: int, timeout: float, path: str = "/recommendation") -> None:
    """Wait until the server answers GET ``path`` with 200 (all pools decided)."""
    deadline = time.monotonic() + timeout
    request = f"GET {path} HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n".encode()
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
                sock.sendall(request)
                if sock.recv(64).startswith(b"HTTP/1.1 200"):
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"the server on port {port} did not answer within {timeout:.0f} s")


# -- the load process --------------------------------------------------------------------


class Connection:
    """One keep-alive HTTP/1.1 connection that reads Content-Length bodies."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Connection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def get(self, request: bytes) -> tuple[int, int]:
        """Send one request; return the status and the body size."""
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        await self.reader.readexactly(length)
        return status, length

    def close(self) -> None:
        self.writer.close()


async def load(port: int, path: str, rate: float, seconds: float, connections: int) -> list[Any]:
    """Send GET ``path`` at ``rate`` per second for ``seconds``; return per-request records.

    Each record is ``[intended_offset_s, latency_s, status, bytes]``; status 0 is a
    transport error. Latency runs from the intended send time.
    """
    request = f"GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n".encode()
    idle: asyncio.Queue[Connection] = asyncio.Queue()
    for _ in range(connections):
        idle.put_nowait(await Connection.open(port))
    records: list[Any] = []
    loop = asyncio.get_running_loop()

    async def one(intended: float) -> None:
        conn = await idle.get()
        try:
            status, size = await conn.get(request)
        except (OSError, asyncio.IncompleteReadError, ValueError):
            conn.close()
            status, size = 0, 0
            conn = await Connection.open(port)
        records.append([intended - start, loop.time() - intended, status, size])
        idle.put_nowait(conn)

    tasks: list[asyncio.Task[None]] = []
    start = loop.time() + 0.05
    total = int(rate * seconds)
    for i in range(total):
        intended = start + i / rate
        delay = intended - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(intended)))
    await asyncio.gather(*tasks)
    while not idle.empty():
        idle.get_nowait().close()
    return records


def summarise(records: Sequence[Sequence[float]], seconds: float) -> dict[str, Any]:
    """Latency percentiles (ms), achieved rate and errors of one measured phase."""
    ok = np.array([r[1] for r in records if r[2] == 200]) * 1000
    errors = sum(1 for r in records if r[2] != 200)
    pct = (
        {f"p{q}": float(np.percentile(ok, q)) for q in (50, 90, 99)}
        if ok.size
        else {f"p{q}": float("nan") for q in (50, 90, 99)}
    )
    span = max((r[0] + r[1] for r in records), default=seconds)
    return {
        "requests": len(records),
        "errors": errors,
        "achieved_rps": len(records) / span if span > 0 else 0.0,
        **pct,
        "max": float(ok.max()) if ok.size else float("nan"),
        "mean": float(ok.mean()) if ok.size else float("nan"),
        "body_bytes": int(records[0][3]) if records else 0,
        "worst": [
            {"at_s": round(r[0], 3), "ms": round(r[1] * 1000, 2)}
            for r in sorted(records, key=lambda r: -r[1])[:8]
        ],
    }


def run_load(args: argparse.Namespace) -> None:
    """The load subprocess: warm up, measure, print the summary as JSON."""

    async def both() -> dict[str, Any]:
        await load(args.port, args.path, args.rate, args.warmup, args.connections)
        # A full collection over the growing records pauses the sender for 100s of ms,
        # which open-loop timing would charge to the server: no collection while measuring.
        gc.collect()
        gc.disable()
        try:
            # The intended time of the first request (load() starts 50 ms from now).
            started = time.monotonic() + 0.05
            records = await load(args.port, args.path, args.rate, args.duration, args.connections)
        finally:
            gc.enable()
        return {**summarise(records, args.duration), "started_monotonic": started}

    print(json.dumps(asyncio.run(both())))


# -- the orchestrator ---------------------------------------------------------------------


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages."""
    return [round(x, 2) for x in os.getloadavg()]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """Start the server, run the load against each target, stop the server."""
    port = free_port()
    me = [sys.executable, str(Path(__file__).resolve())]
    server = subprocess.Popen(
        [
            *me,
            "serve",
            f"--dir={workdir}",
            f"--port={port}",
            f"--refresh={args.refresh}",
            f"--switch-ms={args.switch_ms or 0}",
            f"--parser={args.parser}",
        ]
    )
    results: dict[str, Any] = {}
    try:
        wait_ready(port, timeout=120)
        if args.gc_freeze:
            wait_ready(port, timeout=30, path=GC_FREEZE)
        for path in args.targets:
            before = load_average()
            cpu_before = cpu_seconds(server.pid)
            done = subprocess.run(
                [
                    *me,
                    "load",
                    f"--port={port}",
                    f"--path={path}",
                    f"--rate={args.rate}",
                    f"--duration={args.duration}",
                    f"--warmup={args.warmup}",
                    f"--connections={args.connections}",
                ],
                check=True,
                capture_output=True,
                text=True,
            )
            sent = args.rate * (args.warmup + args.duration)
            results[path] = {
                **json.loads(done.stdout),
                # Contention stretches wall time, not the server's CPU time per request.
                "server_cpu_ms_per_request": (cpu_seconds(server.pid) - cpu_before) / sent * 1000,
                "load_average_before": before,
                "load_average_after": load_average(),
            }
    finally:
        server.terminate()
        server.wait(timeout=30)
    return results


def report(
    args: argparse.Namespace, results: dict[str, Any], calls: dict[str, float]
) -> dict[str, Any]:
    """Print the table of one rate and return its part of the JSON document."""
    from rich.console import Console
    from rich.table import Table

    for path, ms in calls.items():
        results[path]["in_process_ms_per_call"] = ms
    subject = results["/recommendation"]
    table = Table(
        title=f"GET latency at {args.rate:g} rps, {args.pools} pools, {args.duration:g} s "
        f"(open loop: ms from intended send; cpu/req: server CPU ms per request; "
        "in-proc: ms per call straight into the app)"
    )
    columns = (
        "target",
        "rps",
        "p50",
        "p90",
        "p99",
        "max",
        "errors",
        "body",
        "cpu/req",
        "in-proc",
        "load avg",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "target" else "right")
    for path, row in results.items():
        table.add_row(
            path,
            f"{row['achieved_rps']:.0f}",
            *(f"{row[k]:.2f}" for k in ("p50", "p90", "p99", "max")),
            str(row["errors"]),
            f"{row['body_bytes'] / 1024:.0f} KiB",
            f"{row['server_cpu_ms_per_request']:.2f}",
            f"{row['in_process_ms_per_call']:.3f}",
            " ".join(f"{x:.2f}" for x in row["load_average_after"]),
        )
    Console(width=140).print(table)
    for path, row in results.items():
        worst = ", ".join(f"{w['ms']:.0f} ms at {w['at_s']:.1f} s" for w in row["worst"][:5])
        print(f"slowest {path}: {worst}")
    ratios = {
        f"{name}_{p}": results[top][p] / results[bottom][p]
        for name, top, bottom in (
            ("recommendation_over_healthz", "/recommendation", "/healthz"),
            ("recommendation_over_preencoded", "/recommendation", PREENCODED),
        )
        if top in results and bottom in results
        for p in ("p50", "p99", "server_cpu_ms_per_request", "in_process_ms_per_call")
    }
    met = subject["p99"] < TARGET_P99_MS and subject["errors"] == 0
    print(
        f"/recommendation p99 {subject['p99']:.2f} ms, {subject['errors']} errors: target "
        f"(p99 < {TARGET_P99_MS:g} ms, 0 errors) {'met' if met else 'NOT met'}; "
        + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items())
    )
    return {"met": met, "results": results, "ratios": ratios}


def document(args: argparse.Namespace, by_rate: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The JSON document of every rate's results."""
    met = all(part["met"] for part in by_rate.values())
    print("shared, noisy machine: compare ratios within a run, not absolute numbers across runs")
    return {
        "generated_at": datetime.now(UTC).isoformat(),
        "config": {
            key: getattr(args, key)
            for key in (
                "pools",
                "rates",
                "duration",
                "warmup",
                "connections",
                "refresh",
                "switch_ms",
                "gc_freeze",
                "parser",
            )
        },
        "server": server_description(args.parser),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "target": {"p99_ms_below": TARGET_P99_MS, "errors": 0, "at_every_rate": met},
        "rates": by_rate,
    }


def asgi_caller(app: FastAPI) -> Callable[[str], Awaitable[int]]:
    """Return ``call(target)``: one GET (path and query) straight into the app; the body size.

    No HTTP server and no test client: their threads would hide the app from cProfile
    (which sees only the calling thread) and add their own cost to the timing.
    """

    async def call(target: str) -> int:
        path, _, query = target.partition("?")
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query.encode(),
            "root_path": "",
            "headers": [(b"host", b"bench")],
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 80),
            "state": {},
        }
        size = 0

        async def receive() -> MutableMapping[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: MutableMapping[str, Any]) -> None:
            nonlocal size
            size += len(message.get("body", b""))

        await app(scope, receive, send)
        return size

    return call


async def time_calls(call: Callable[[str], Awaitable[int]], path: str, calls: int) -> float:
    """The best of three runs of ``calls`` calls, in ms per call (the least disturbed)."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(calls):
            await call(path)
        best = min(best, (time.perf_counter() - started) / calls * 1000)
    return best


def in_process(workdir: Path, targets: Sequence[str], calls: int) -> dict[str, float]:
    """Milliseconds per call of each target in-process: the app's own cost, no transport."""
    app = build_app(workdir, refresh_seconds=None)
    call = asgi_caller(app)

    async def run() -> dict[str, float]:
        async with app.router.lifespan_context(app):
            for path in targets:
                await call(path)
            return {path: await time_calls(call, path, calls) for path in targets}

    return asyncio.run(run())


def profile(args: argparse.Namespace, workdir: Path) -> None:
    """Time and profile every route in-process with cProfile."""
    app = build_app(workdir, refresh_seconds=None)
    call = asgi_caller(app)

    async def run() -> None:
        async with app.router.lifespan_context(app):
            for path in TARGETS:
                size = await call(path)
                plain = await time_calls(call, path, args.profile_requests)
                profiler = cProfile.Profile()
                with profiler:
                    for _ in range(args.profile_requests):
                        await call(path)
                print(f"\n== {path}: {plain:.3f} ms per call unprofiled, body {size} bytes")
                pstats.Stats(profiler).sort_stats("tottime").print_stats(15)

    asyncio.run(run())


def main(argv: Sequence[str] | None = None) -> None:
    scenario = argparse.ArgumentParser(add_help=False)
    scenario.add_argument("--scenario", choices=("reads", "mixed", "traces"), default="reads")
    chosen, argv = scenario.parse_known_args(argv)
    if chosen.scenario == "mixed":
        # Per-pool and full-set reads while writers push: benchmarks/api_mixed.py.
        from benchmarks.api_mixed import run as run_mixed

        run_mixed(argv)
        return
    argv = [*argv, f"--scenario={chosen.scenario}"]  # the parser below lists it in --help
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "role", nargs="?", default="bench", choices=("bench", "serve", "load", "send")
    )
    parser.add_argument(
        "--scenario",
        default="reads",
        choices=("reads", "mixed", "traces"),
        help="'mixed': reads while writers push (see benchmarks/api_mixed.py --help); "
        "'traces': reads while the OpenTelemetry SDK exports spans",
    )
    parser.add_argument("--span-rate", type=float, default=2000.0, help="traces scenario")
    parser.add_argument("--pools", type=int, default=100)
    parser.add_argument(
        "--rates",
        type=float,
        nargs="+",
        default=list(RATES),
        help="request rates to measure, one after another (default: realistic polling of "
        "100 pools, then a stress load)",
    )
    parser.add_argument("--rate", type=float, default=RATES[-1], help=argparse.SUPPRESS)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument(
        "--parser",
        choices=("auto", "httptools", "h11"),
        default="auto",
        help="the server's HTTP parser (auto: httptools when installed, as foresight serve)",
    )
    parser.add_argument(
        "--refresh", type=float, default=5.0, help="background refresh period, s; 0 = off"
    )
    parser.add_argument(
        "--switch-ms",
        type=float,
        default=None,
        help="the server's GIL switch interval in ms (default: service.gil_switch_ms, as "
        "foresight serve sets it)",
    )
    parser.add_argument(
        "--gc-freeze",
        action="store_true",
        help="gc.freeze() in the server once it is ready (as a serving process could)",
    )
    parser.add_argument(
        "--stalls",
        action="store_true",
        help="traces scenario: record the server's event-loop stalls and collection "
        "pauses during the reads (see benchmarks/api_load_stalls.py)",
    )
    parser.add_argument("--targets", nargs="+", default=list(TARGETS), choices=TARGETS)
    parser.add_argument("--quick", action="store_true", help="10 s per target, 2 s warm-up")
    parser.add_argument("--profile", action="store_true", help="cProfile the routes instead")
    parser.add_argument(
        "--profile-requests", type=int, default=300, help="in-process calls per timing"
    )
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON")
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role == "serve":
        serve(args.dir, args.port, args.refresh, args.switch_ms, args.stalls, args.parser)
        return
    if args.role == "load":
        run_load(args)
        return
    if args.role == "send":
        print(json.dumps(api_load_traces.send_spans(args.port, args.span_rate, args.duration)))
        return
    if args.quick:
        args.duration, args.warmup = 10.0, 2.0
    if args.scenario == "traces":
        if "--duration" not in " ".join(sys.argv) and not args.quick:
            args.duration = 60.0
        with tempfile.TemporaryDirectory(prefix="foresight-api-traces-") as tmp:
            prepare(Path(tmp), args.pools)
            api_load_traces.run_traces(args, Path(tmp))
        return
    with tempfile.TemporaryDirectory(prefix="foresight-api-load-") as tmp:
        workdir = Path(tmp)
        prepare(workdir, args.pools)
        if args.profile:
            profile(args, workdir)
            return
        calls = in_process(workdir, args.targets, args.profile_requests)
        by_rate = {}
        for rate in args.rates:
            args.rate = rate
            by_rate[f"{rate:g}"] = report(args, measure(args, workdir), dict(calls))
        found = document(args, by_rate)
    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(found, indent=2) + "\n")
        print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
