"""The gRPC expander's ``BestOptions`` latency over TLS, 50 options per call.

Setup: a temporary directory with ``--pools`` pools (default 50), a SQLite store of two
hours of synthetic 5-minute samples per pool ending now, no champion (decisions are
reactive, which is what a pool without a model gets), and the real
:class:`~api.service.RecommendationService` ranked by
:func:`~api.grpc_expander.wiring.service_ranking`: the path ``foresight serve`` wires.
The server (:func:`~api.grpc_expander.server.start_expander`, TLS with a throwaway CA)
and the client (the committed stub, trusting that CA, dialling ``localhost``) run in
this one process, so the client's own CPU counts against the server: a conservative
measure.

Each call offers ``--options`` node groups (default 50, every one a Foresight pool, in
a shuffled order). Phases, each after a warm-up: ``sequential`` (one caller) and
``concurrent`` (``--callers`` callers at once, as several cluster-autoscaler replicas
or retries might); plus ``no_opinion`` (50 groups Foresight does not manage). Latency
is per call, from before the stub call to the decoded answer.

Target (issue #15): p99 below 100 ms for 50 options. Run: ``python
benchmarks/grpc_expander.py`` (``--calls`` per phase, default 2000). Prints a table and
writes ``benchmarks/results/grpc_expander.json`` with the load average of the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]
import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from api.grpc_expander.protos import expander_pb2, expander_pb2_grpc  # noqa: E402
from api.grpc_expander.server import ExpanderTLS, start_expander  # noqa: E402
from api.grpc_expander.wiring import service_ranking  # noqa: E402
from api.service import RecommendationService  # noqa: E402
from api.services import Services  # noqa: E402
from api.settings import load_app_settings  # noqa: E402
from pipelines.config.pools import PoolsConfig  # noqa: E402
from pipelines.store.store import open_store  # noqa: E402
from tests.integration.tls_certs import make_tls  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "grpc_expander.json"
TARGET_P99_MS = 100.0
STEP = timedelta(minutes=5)


def node_group(index: int) -> str:
    return f"eks-gpu-pool-{index:03d}-ng-{index * 7919 % 100000:05d}"


def samples(pools: int, now: datetime, rng: np.random.Generator) -> pd.DataFrame:
    ds = pd.date_range(end=now, periods=24, freq=STEP, tz="UTC")
    frames = []
    for index in range(pools):
        demand = rng.uniform(10, 200, len(ds)).round()
        queue = (demand * rng.uniform(0, 0.4)).round()
        series = {
            "demand_gpus": demand,
            "queue_gpus": queue,
            "allocated_gpus": demand - queue,
            "nodes": np.ceil((demand - queue) / 8) + 1,
            "gpu_util": np.full(len(ds), 60.0),
        }
        frames += [
            pd.DataFrame({"unique_id": f"pool-{index:03d}/{name}", "ds": ds, "y": values})
            for name, values in series.items()
        ]
    return pd.concat(frames, ignore_index=True)


def percentiles(values: Sequence[float]) -> dict[str, float]:
    data = np.asarray(values) * 1000
    return {
        "calls": len(values),
        "p50": float(np.percentile(data, 50)),
        "p90": float(np.percentile(data, 90)),
        "p99": float(np.percentile(data, 99)),
        "max": float(data.max()),
        "mean": float(data.mean()),
    }


def timed(call: Callable[[], Any], count: int) -> list[float]:
    out = []
    for _ in range(count):
        started = time.perf_counter()
        call()
        out.append(time.perf_counter() - started)
    return out


def concurrent(call: Callable[[], Any], callers: int, count: int) -> list[float]:
    results: list[list[float]] = [[] for _ in range(callers)]
    share = count // callers

    def run(slot: int) -> None:
        results[slot] = timed(call, share)

    threads = [threading.Thread(target=run, args=(slot,)) for slot in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [value for chunk in results for value in chunk]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", type=int, default=50)
    parser.add_argument("--options", type=int, default=50)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--callers", type=int, default=4)
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(15)
    shuffle = random.Random(15)

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        now = datetime.now(UTC).replace(second=0, microsecond=0)
        pools = PoolsConfig.model_validate(
            {
                "pools": [
                    {"name": f"pool-{i:03d}", "node_group_id": node_group(i), "max_nodes": 100}
                    for i in range(args.pools)
                ]
            }
        )
        settings = load_app_settings(root=root)
        tls = make_tls(root)
        with open_store(f"sqlite:///{root / 'store.db'}") as store:
            store.samples.upsert(samples(args.pools, now, rng))
            service = RecommendationService(Services(settings, pools, store, None))
            service.start()
            running = start_expander(
                "127.0.0.1:0",
                ExpanderTLS(tls.cert_pem, tls.key_pem),
                service_ranking(service),
            )
            credentials = grpc.ssl_channel_credentials(root_certificates=tls.ca_pem)
            ids = [node_group(i) for i in range(min(args.options, args.pools))]
            shuffle.shuffle(ids)
            known = expander_pb2.BestOptionsRequest(
                options=[expander_pb2.Option(nodeGroupId=i, nodeCount=2) for i in ids]
            )
            unknown = expander_pb2.BestOptionsRequest(
                options=[
                    expander_pb2.Option(nodeGroupId=f"other-{i:03d}", nodeCount=2)
                    for i in range(args.options)
                ]
            )
            try:
                with grpc.secure_channel(f"localhost:{running.port}", credentials) as channel:
                    stub = expander_pb2_grpc.ExpanderStub(channel)
                    first = stub.BestOptions(known, timeout=5)
                    chosen = [o.nodeGroupId for o in first.options]
                    ask = lambda: stub.BestOptions(known, timeout=5)  # noqa: E731
                    ask_unknown = lambda: stub.BestOptions(unknown, timeout=5)  # noqa: E731
                    timed(ask, 200)
                    phases = {
                        "sequential": percentiles(timed(ask, args.calls)),
                        "concurrent": percentiles(concurrent(ask, args.callers, args.calls)),
                        "no_opinion": percentiles(timed(ask_unknown, args.calls)),
                    }
                    answers = len(stub.BestOptions(unknown, timeout=5).options)
            finally:
                running.stop()

    worst = max(row["p99"] for row in phases.values())
    document = {
        "generated_at": datetime.now(UTC).isoformat(),
        "config": vars(args),
        "setup": "server and client in one process, TLS over loopback, real "
        "RecommendationService (reactive, no champion) over SQLite",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "load_average": os.getloadavg(),
        "target": {"p99_ms_below": TARGET_P99_MS, "worst_p99_ms": worst, "met": worst < 100},
        "chosen": chosen,
        "no_opinion_answers": answers,
        "results": phases,
    }
    print(f"{'phase':<12} {'calls':>6} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for name, row in phases.items():
        print(
            f"{name:<12} {row['calls']:>6} {row['p50']:>8.2f} {row['p90']:>8.2f} "
            f"{row['p99']:>8.2f} {row['max']:>8.2f}"
        )
    print(f"chosen: {chosen}; no-opinion answers: {answers} of {args.options}")
    print(f"target p99 < {TARGET_P99_MS:.0f} ms: {'met' if worst < 100 else 'MISSED'}")
    print(f"load average: {os.getloadavg()}")
    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(document, indent=2) + "\n")
        print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
