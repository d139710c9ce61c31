"""The production topology, for real: retrained models reach every replica (issue #17).

Started from the command line as docs/deploy.md describes: ``mlflow server`` with
proxied artifacts on PostgreSQL, ``dask scheduler`` and two ``dask worker`` processes
on pinned ports, two ``foresight serve`` replicas sharing a PostgreSQL store, each with
its own models directory. The test shows that a training on Dask puts the model on
the server and reaches both running replicas; that a promotion is served by both
within the configured poll and matches what the leader's forecast job uses; that both
keep serving through an MLflow outage, say so, and recover on their own; and that
killing the leader hands the scheduler over with no job run twice.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from distributed import Client
from mlflow import MlflowClient
from sqlalchemy import URL, create_engine, text

from forecaster.registry import register
from forecaster.tracking import TrackingConfig
from pipelines.store.store import Store, open_store

from .topology import Process, free_port, require, wait_for, write_sample

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

MODEL = "foresight-demand"
POLL_SECONDS = 2.0
LOAD_ALLOWANCE_S = 20.0
FORECAST_EVERY_S = 60.0
"""The leader's forecast job interval (``forecast_every_minutes: 1`` below)."""
"""Seconds a replica may take to download and fit a new version after it sees it."""


@dataclass
class Replica:
    name: str
    process: Process
    base: str
    models_dir: Path

    def ready(self) -> dict[str, Any]:
        body: dict[str, Any] = httpx.get(f"{self.base}/readyz", timeout=10).json()
        return body

    def model(self) -> dict[str, Any]:
        model: dict[str, Any] = self.ready()["checks"]["model"]
        return model

    def served_versions(self) -> set[str | None]:
        answer = httpx.get(f"{self.base}/recommendation", timeout=30)
        answer.raise_for_status()
        return {pool["model_version"] for pool in answer.json()["pools"]}


@dataclass
class Topology:
    root: Path
    config: Path
    env: dict[str, str]
    mlflow: Process
    mlflow_uri: str
    artifacts: Path
    replicas: list[Replica]
    store: Store
    dask_address: str


def _database(admin: URL, prefix: str) -> URL:
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    engine = create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return admin.set(database=name)


def _drop(admin: URL, url: URL) -> None:
    engine = create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{url.database}" WITH (FORCE)'))
    engine.dispose()


@pytest.fixture
def topology(pg_admin: URL, tmp_path: Path) -> Iterator[Topology]:
    mlflow_bin, dask_bin, foresight = require("mlflow"), require("dask"), require("foresight")
    store_url, mlflow_db = _database(pg_admin, "fs_topo_store"), _database(pg_admin, "fs_topo_ml")
    started: list[Process] = []
    store: Store | None = None
    try:
        sample = tmp_path / "sample"
        write_sample(sample)
        artifacts = tmp_path / "mlflow-artifacts"
        mlflow_port, dask_port = free_port(), free_port()
        mlflow_uri = f"http://127.0.0.1:{mlflow_port}"
        mlflow = Process(
            [
                str(mlflow_bin),
                *("server", "--host", "127.0.0.1", "--port", str(mlflow_port)),
                *("--workers", "1"),
                *("--backend-store-uri", mlflow_db.render_as_string(hide_password=False)),
                *("--serve-artifacts", "--artifacts-destination", str(artifacts)),
            ],
            tmp_path / "mlflow.log",
            cwd=tmp_path,
        )
        started.append(mlflow)
        dask_address = f"tcp://127.0.0.1:{dask_port}"
        started.append(
            Process(
                [
                    str(dask_bin),
                    *("scheduler", "--host", "127.0.0.1", "--port", str(dask_port)),
                    *("--dashboard-address", f"127.0.0.1:{free_port()}"),
                ],
                tmp_path / "dask-scheduler.log",
                cwd=tmp_path,
            )
        )
        for index in range(2):
            started.append(
                Process(
                    [
                        str(dask_bin),
                        *("worker", dask_address, "--nthreads", "1", "--nworkers", "1"),
                        *("--worker-port", str(free_port()), "--nanny-port", str(free_port())),
                        "--no-dashboard",
                    ],
                    tmp_path / f"dask-worker-{index}.log",
                    cwd=tmp_path,
                )
            )
        config = tmp_path / "foresight.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "root": str(tmp_path),
                    "sample_dir": str(sample),
                    "pools_file": str(sample / "pools.yaml"),
                    "store_url": store_url.render_as_string(hide_password=False),
                    "mlflow_tracking_uri": mlflow_uri,
                    "horizon": 12,
                    "backtest_windows": 2,
                    "heldout_windows": 1,
                    "horizons": ["10min", "1h"],
                    "selection_horizon": "1h",
                    "model_set": "fast",
                    "max_train_days": 3,
                    "scheduler": {
                        "ingest_every_minutes": 1,
                        "forecast_every_minutes": 1,
                        "publish_every_minutes": 1,
                        "evaluate_every_minutes": 60,
                        "train_cron": "0 3 * * *",
                        "dask_address": dask_address,
                    },
                    "service": {"model_poll_seconds": POLL_SECONDS},
                }
            )
        )
        env = {
            **os.environ,
            "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
            # A replica asks a live server; a dead one is caught by the TCP probe first.
            "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
            "MLFLOW_HTTP_REQUEST_TIMEOUT": "20",
        }
        wait_for(
            lambda: httpx.get(f"{mlflow_uri}/health", timeout=2).status_code == 200,
            180,
            f"mlflow server healthy (see {mlflow.log})",
            every=0.5,
        )
        replicas = []
        for name in ("a", "b"):
            port = free_port()
            models_dir = tmp_path / f"models-{name}"
            process = Process(
                [str(foresight), "serve", "--config", str(config), "--port", str(port)],
                tmp_path / f"serve-{name}.log",
                cwd=tmp_path,
                env={**env, "FORESIGHT_MODELS_DIR": str(models_dir)},
            )
            started.append(process)
            replica = Replica(name, process, f"http://127.0.0.1:{port}", models_dir)
            # One at a time: the first seeds the empty store from the sample.
            wait_for(
                lambda r=replica: httpx.get(f"{r.base}/healthz", timeout=2).status_code == 200,
                180,
                f"replica {name} up (see {process.log})",
                every=0.5,
            )
            replicas.append(replica)
        store = open_store(store_url)
        yield Topology(
            tmp_path, config, env, mlflow, mlflow_uri, artifacts, replicas, store, dask_address
        )
    finally:
        if store is not None:
            store.close()
        for process in reversed(started):
            process.stop()
        for url in (store_url, mlflow_db):
            _drop(pg_admin, url)


def _train(topology: Topology) -> str:
    log = topology.root / "train.log"
    with log.open("wb") as out:
        done = subprocess.run(
            [str(require("foresight")), "train", "--config", str(topology.config)],
            cwd=topology.root,
            env=topology.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
            timeout=600,
        )
    assert done.returncode == 0, log.read_text()[-3000:]
    client = MlflowClient(tracking_uri=topology.mlflow_uri, registry_uri=topology.mlflow_uri)
    return str(client.get_model_version_by_alias(MODEL, "champion").version)


def test_retrained_models_reach_every_replica(topology: Topology) -> None:
    replicas, store = topology.replicas, topology.store
    client = MlflowClient(tracking_uri=topology.mlflow_uri, registry_uri=topology.mlflow_uri)
    for replica in replicas:
        assert replica.model()["ok"] is False  # no champion yet: reactive, and says why

    # A first training on the Dask workers reaches both running replicas.
    first = _train(topology)
    with Client(topology.dask_address, timeout=30) as dask:
        executed = dask.run(lambda dask_worker: dask_worker.state.executed_count)
    assert len(executed) == 2, executed
    assert sum(executed.values()) > 0, f"no task ran on the Dask workers: {executed}"
    trained = (topology.root / "train.log").read_text()
    assert f"Review it at {topology.mlflow_uri}/#/experiments/" in trained
    assert "--backend-store-uri http" not in trained
    experiment = client.get_experiment_by_name("foresight")
    assert experiment is not None
    assert experiment.artifact_location.startswith("mlflow-artifacts:")
    on_server = list(topology.artifacts.rglob("MLmodel"))
    assert on_server, f"no model files under the server's {topology.artifacts}"
    assert not (topology.root / "models" / "mlartifacts").exists()
    for replica in replicas:
        wait_for(
            lambda r=replica: r.model()["served_version"] == first,
            POLL_SECONDS + LOAD_ALLOWANCE_S,
            f"replica {replica.name} serving the first champion {first}",
        )
    # Recommendations carry the version once the leader's forecast job has stored
    # forecasts made with it (the API reads them; it fits nothing).
    for replica in replicas:
        wait_for(
            lambda r=replica: r.served_versions() == {first},
            FORECAST_EVERY_S + LOAD_ALLOWANCE_S,
            f"replica {replica.name} recommending from forecasts of version {first}",
            every=0.5,
        )

    # A promotion: both replicas serve it within the poll plus the load.
    # (A new version of the same logged model: what the gate promotes is #11's concern.)
    current = client.get_model_version(MODEL, first)
    tracking = TrackingConfig(tracking_uri=topology.mlflow_uri)
    logged = re.search(r"/models/(m-[0-9a-f]+)/", current.source or "")
    assert logged is not None, current.source
    second = register(f"models:/{logged[1]}", MODEL, tracking=tracking, run_id=current.run_id)
    client.set_registered_model_alias(MODEL, "champion", second)
    promoted = time.monotonic()
    for replica in replicas:
        wait_for(
            lambda r=replica: r.model()["served_version"] == second,
            POLL_SECONDS + LOAD_ALLOWANCE_S,
            f"replica {replica.name} serving the promoted version {second}",
            every=0.1,
        )
    reached = time.monotonic() - promoted
    for replica in replicas:
        wait_for(
            lambda r=replica: r.served_versions() == {second},
            FORECAST_EVERY_S + LOAD_ALLOWANCE_S,
            f"replica {replica.name} recommending from forecasts of version {second}",
            every=0.5,
        )
    print(f"promotion to both replicas serving version {second}: {reached:.1f} s")
    for replica in replicas:
        model = replica.model()
        assert (model["source"], model["champion_version"], model["differs"]) == (
            "registry",
            second,
            False,
        )
        copy = (replica.models_dir / "last_known_good" / MODEL / "CURRENT").read_text()
        assert copy.startswith(f"v{second}-"), copy  # the local copy kept in step

    # The leader's forecast and publish jobs use what the replicas serve.
    wait_for(
        lambda: _ran_after(store, "forecast", promoted, version=second),
        150,
        "a forecast job run with the promoted version",
        every=1.0,
    )
    wait_for(lambda: _ran_after(store, "publish", promoted), 150, "a publish job run", every=1.0)
    latest = store.recommendations.latest("gpu-a")
    assert latest is not None
    assert latest.payload["model_version"] == second

    # MLflow down: both keep serving the champion and say the registry is unreachable.
    topology.mlflow.stop()
    for replica in replicas:
        wait_for(
            lambda r=replica: r.model()["registry"]["reachable"] is False,
            POLL_SECONDS * 3 + 5,
            f"replica {replica.name} telling the registry is down",
        )
        assert replica.served_versions() == {second}
        metrics = httpx.get(f"{replica.base}/metrics", timeout=10).text
        assert "foresight_model_registry_reachable 0.0" in metrics
    # ... and recover on their own when it returns.
    topology.mlflow.restart()
    for replica in replicas:
        wait_for(
            lambda r=replica: r.model()["registry"]["reachable"] is True,
            120,
            f"replica {replica.name} seeing the registry back",
            every=0.5,
        )
        assert "problem" not in replica.model()["registry"]

    # Killing the leader hands the scheduler over; no job runs twice.
    leader = store.leader.current()
    assert leader is not None
    by_pid = {str(r.process.pid): r for r in replicas}
    old = by_pid[leader.holder.rpartition(":")[2]]
    (new,) = [r for r in replicas if r is not old]
    old.process.kill()
    killed = time.monotonic()
    taken = wait_for(
        lambda: (
            (now := store.leader.current()) is not None
            and now.holder.endswith(f":{new.process.pid}")
        ),
        30,
        "the surviving replica leading",
        every=0.1,
    )
    print(f"takeover after SIGKILL of the leader: {taken:.1f} s")
    wait_for(
        lambda: _ran_after(store, "publish", killed, runner=f":{new.process.pid}"),
        150,
        "a job run by the new leader",
        every=1.0,
    )
    assert new.served_versions() == {second}
    runs = store.job_runs.history(limit=500)
    for job in {run.job for run in runs}:
        mine = sorted((r for r in runs if r.job == job), key=lambda r: r.started_at)
        for earlier, later in itertools.pairwise(mine):
            if earlier.outcome == "interrupted":
                continue
            assert earlier.finished_at is not None
            assert later.started_at >= earlier.finished_at, (job, earlier, later)


def _ran_after(
    store: Store, job: str, since: float, *, version: str | None = None, runner: str = ""
) -> bool:
    wall = time.time() - (time.monotonic() - since)
    for run in store.job_runs.history(job, limit=20):
        if run.outcome not in ("ok", "partial") or run.started_at.timestamp() < wall:
            continue
        if runner and not run.runner.endswith(runner):
            continue
        if version is None or str(run.details.get("version")) == version:
            return True
    return False
