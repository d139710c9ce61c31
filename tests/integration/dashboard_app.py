"""The API over the committed sample data, served by uvicorn in a thread for browser tests.

The sample ends in the past, so the clock is the newest sample (as ``foresight serve
--clock replay`` does). A naive champion (seasonal naive, a day's season) stands in
for a trained one: the forecast job fits it in milliseconds and stores every pool a
forecast interval to draw.
"""

from __future__ import annotations

import math
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import uvicorn

from api.main import create_app
from api.services import Services
from api.settings import AppSettings, load_app_settings
from forecaster.champion import ChampionForecaster
from forecaster.loaders import DEMAND
from forecaster.models.naive import Persistence, SeasonalNaive
from forecaster.registry import LoadedModel
from pipelines.config.pools_file import load_pools
from pipelines.dataset import seed_from_sample
from pipelines.jobs.evaluate import EVALUATED_AT, LIVE_MASE, MODEL_VERSION_KEY
from pipelines.jobs.forecast import run_forecast
from pipelines.store.store import open_store

REPO = Path(__file__).resolve().parents[2]
SAMPLE_POOLS = REPO / "data" / "sample" / "pools.yaml"
_START_TIMEOUT_S = 30.0


def sample_settings(workdir: Path) -> AppSettings:
    """AppSettings reading the committed sample, writing only under ``workdir``."""
    return load_app_settings(
        root=REPO,
        data_dir=workdir,
        models_dir=workdir / "models",
        store_url=f"sqlite:///{workdir / 'store.db'}",
        max_train_days=7,
        scheduler={"workers": 1},
    )


def naive_champion(pools: Sequence[str]) -> LoadedModel:
    """A champion choosing seasonal naive for each pool's demand (serving refits it)."""
    candidates = {
        "seasonal_naive": SeasonalNaive(season_length=288, horizon=36, window=2016),
        "persistence": Persistence(horizon=36),
    }
    selection = {f"{pool}/{DEMAND}": "seasonal_naive" for pool in pools}
    model = ChampionForecaster(selection, candidates, default="persistence")
    return LoadedModel(model=model, version="1", source="registry")


def sample_services(workdir: Path) -> Services:
    """Open a store under ``workdir`` seeded from the sample; the clock is its newest sample."""
    settings = sample_settings(workdir)
    pools = load_pools(settings.pools_file)
    store = open_store(settings.store_url)
    seed_from_sample(settings, store, pools)
    stamps = store.samples.last_timestamps()
    newest = max(stamps.values()).to_pydatetime()
    champion = naive_champion(pools.names)
    # The API serves what the forecast job stored (as `foresight serve` runs it first,
    # at the decision clock's time: the newest sample, so no age is negative).
    made = run_forecast(settings, store=store, now=newest, champion=champion)
    if made.outcome not in ("ok", "partial"):
        raise RuntimeError(f"the forecast job failed: {made.summary}")
    return Services(settings, pools, store, champion, clock=lambda: newest, owns_store=True)


def record_plan(workdir: Path) -> None:
    """Record a day of recommendations in the store of :func:`serve_sample` (``workdir``).

    The plan asks, one lead time ahead, for the nodes each sample's demand needed plus
    one: what a deployment's audit trail might hold (the sample app's own trail starts
    at its first decision, so its charts would have one recommendation to draw).
    """
    with open_store(f"sqlite:///{workdir / 'store.db'}") as store:
        newest = max(store.samples.last_timestamps().values())
        for pool in load_pools(SAMPLE_POOLS).pools:
            demand = store.samples.read([pool.series_id(DEMAND)], start=newest - timedelta(days=1))
            for ds, gpus in zip(demand["ds"], demand["y"], strict=True):
                nodes = math.ceil(gpus / pool.gpus_per_node) + 1
                made = ds.to_pydatetime() - pool.lead_time
                store.recommendations.append(pool.name, made, nodes, "hold", {})


def record_jobs(workdir: Path) -> None:
    """Record what a scheduler leaves in the store: its leader, a promotion, an evaluation.

    The evaluation measured a live MASE of 0.74 for every pool's demand, on the clock
    of the sample (its newest sample), as ``serve --clock replay`` runs it.
    """
    with open_store(f"sqlite:///{workdir / 'store.db'}") as store:
        newest = max(store.samples.last_timestamps().values()).to_pydatetime()
        store.leader.claim("sample-host:4242")
        run = store.job_runs.start("train", runner="sample-host:4242")
        promoted = {"version": "1", "promoted": True}
        store.job_runs.finish(run, "ok", "trained: version 1 promoted", details=promoted)
        run = store.job_runs.start("evaluate", runner="sample-host:4242")
        errors = {f"{name}/{DEMAND}": 0.74 for name in load_pools(SAMPLE_POOLS).names}
        details = {LIVE_MASE: errors, MODEL_VERSION_KEY: "1", EVALUATED_AT: newest.isoformat()}
        store.job_runs.finish(run, "ok", "scored 3 series", details=details)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve_sample(
    workdir: Path,
    *,
    prepare: Sequence[Callable[[Path], None]] = (),
    mlflow_ui: str | None = None,
) -> Iterator[str]:
    """Serve the app over the sample data on a free port; yield its base URL.

    Args:
        workdir: where the store and models go.
        prepare: called with ``workdir`` once the store is seeded and the forecast job
            ran, before the app starts (e.g. :func:`record_plan`, :func:`record_jobs`).
        mlflow_ui: the MLflow UI address the app links to (as ``serve --mlflow-ui-port``).
    """
    services = sample_services(workdir)
    for step in prepare:
        step(workdir)
    app = create_app(services=services, refresh_seconds=None, mlflow_ui=mlflow_ui)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="dashboard-uvicorn", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("uvicorn exited before it started; see the log above")
            if time.monotonic() > deadline:
                raise TimeoutError(f"uvicorn did not start within {_START_TIMEOUT_S:.0f} s")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
