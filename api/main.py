"""The FastAPI application: :func:`create_app` builds it, its lifespan loads everything.

Details: docs/api.md, "Notes from the code", `api/main.py`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import NamedTuple

from fastapi import APIRouter, Depends, FastAPI
from fastapi.concurrency import run_in_threadpool

from api.auth import AUTH_RESPONSES, TokenGuard, authorize, install_auth_handlers, warn_if_open
from api.callchain.feed import SpanFeed
from api.callchain.incremental import ChainWindow
from api.champion import ChampionFollower, RegistryChampion, load_model
from api.clock import ClockMode
from api.dashboard import page_router as dashboard_page_router
from api.dashboard import router as dashboard_router
from api.deps import attach, detach
from api.docs_ui import install_docs
from api.errors import install_error_handlers
from api.grpc_expander.wiring import start_configured_expander
from api.latency import LatencyTracker
from api.limits import install_limits
from api.metrics import AppMetrics, RequestTimer
from api.polled_reads import PolledReads
from api.routers import (
    chain,
    forecast,
    health,
    integrations,
    pools,
    recommendation,
    scorecard,
    signals,
    spans,
)
from api.routers import metrics as metrics_route
from api.service import RecommendationService
from api.services import Services
from api.settings import AppSettings, load_app_settings
from api.wiring import Serving, serving
from forecaster.exceptions import ForesightError, SourceError
from pipelines.config.pools_file import load_pools
from pipelines.dataset import seed_from_sample as seed_store
from pipelines.store.store import open_store

logger = logging.getLogger(__name__)

CORE_ROUTERS: tuple[APIRouter, ...] = (
    recommendation.router,
    forecast.router,
    pools.router,
    signals.router,
    health.router,
    dashboard_router,
    dashboard_page_router,
    spans.router,
    chain.router,
    integrations.router,
    metrics_route.router,
    scorecard.router,
)
"""The routers every app has."""

OPEN_ROUTERS: tuple[APIRouter, ...] = (
    health.router,
    metrics_route.router,
    dashboard_page_router,
)
"""Routers served without a token (probes and scrapers); every other one is guarded."""


def build_services(settings: AppSettings, *, seed_from_sample: bool = True) -> Services:
    """Open the pools, the store and the champion of ``settings``.

    Args:
        seed_from_sample: fill pools without samples from the committed sample data.

    Raises:
        ConfigError: the pools file is invalid.
        StoreError: the store cannot be opened or migrated.
    """
    pools_config = load_pools(settings.pools_file)
    store = open_store(settings.store_url)
    try:
        if seed_from_sample:
            try:
                seed_store(settings, store, pools_config)
            except SourceError as exc:
                logger.warning("not seeding from the sample data: %s", exc)
        model, problem = load_model(settings)
    except BaseException:
        store.close()
        raise
    chain = settings.callchain
    window = ChainWindow(
        max_age=timedelta(seconds=chain.window_seconds),
        settle=timedelta(seconds=chain.settle_seconds),
        max_services=chain.max_services,
        reserved=[s.name for p in pools_config.pools for s in p.services]
        + [s.name for s in pools_config.services],
    )
    return Services(
        settings,
        pools_config,
        store,
        model,
        problem,
        owns_store=True,
        champion=RegistryChampion(settings),
        spans=window,
    )


async def _refresh_forever(service: RecommendationService, every: float) -> None:
    """Recompute what changed or is about to expire, every ``every`` seconds."""
    ahead = timedelta(seconds=2 * every)
    while True:
        try:
            await run_in_threadpool(service.refresh, ahead)
        except ForesightError as exc:
            logger.warning("background refresh failed, retrying in %.0f s: %s", every, exc)
        # One pool's unexpected failure must not stop every later refresh; log it whole.
        except Exception:
            logger.exception("background refresh failed unexpectedly")
        await asyncio.sleep(every)


async def _follow_champion_forever(follower: ChampionFollower, every: float) -> None:
    """Check the registry's champion every ``every`` seconds; serve a new one when promoted."""
    while True:
        try:
            await run_in_threadpool(follower.check)
        # A model that fails in a new way must not stop every later check; log it whole.
        except Exception:
            logger.exception("following the champion failed unexpectedly")
        await asyncio.sleep(every)


async def _analyse_forever(
    tracker: LatencyTracker, service: RecommendationService, every: float
) -> None:
    """Analyse the span window every ``every`` seconds; recompute pools whose latency moved."""
    while True:
        try:
            changed = await run_in_threadpool(tracker.update, service.live)
            if changed:
                service.invalidate(sorted(changed))
        except ForesightError as exc:
            logger.warning("call-chain analysis failed, retrying in %.0f s: %s", every, exc)
        # A bug in one analysis must not stop every later one; log it whole.
        except Exception:
            logger.exception("call-chain analysis failed unexpectedly")
        await asyncio.sleep(every)


class _Background(NamedTuple):
    """How often the app's periodic tasks run (None or False: not at all)."""

    refresh_seconds: float | None
    analysis_seconds: float | None
    follow_champion: bool

    def start(self, running: Serving) -> list[asyncio.Task[None]]:
        """Start the periodic tasks: refresh, call-chain analysis, champion follow."""
        service, built = running.service, running.services
        tasks = []
        if self.refresh_seconds:
            tasks.append(asyncio.create_task(_refresh_forever(service, self.refresh_seconds)))
        if self.analysis_seconds:
            analyse = _analyse_forever(running.latency, service, self.analysis_seconds)
            tasks.append(asyncio.create_task(analyse))
        if self.follow_champion and built.champion is not None:
            follower = ChampionFollower(service, built.champion)
            every = built.settings.service.model_poll_seconds
            tasks.append(asyncio.create_task(_follow_champion_forever(follower, every)))
        return tasks


@asynccontextmanager
async def _serve(app: FastAPI, running: Serving, background: _Background) -> AsyncIterator[None]:
    """Start serving ``running`` on ``app`` (store read, span feed, expander, tasks); stop after.

    Raises:
        StoreError: the store failed at start-up.
    """
    built, service = running.services, running.service
    feed = SpanFeed(built.spans)
    try:
        guard = TokenGuard.from_settings(built.settings.service)
        warn_if_open(guard)
        await run_in_threadpool(service.start)
        feed.start()
        expander = start_configured_expander(built.settings.publish, service)
        attach(app, running, guard=guard, span_feed=feed, expander=expander)
        tasks = background.start(running)
        try:
            yield
        finally:
            await _cancel(tasks)
            if expander is not None:
                await run_in_threadpool(expander.stop)
            detach(app)
            service.store_probe.close()
    finally:
        # Spans already queued are added before the window is left behind.
        await run_in_threadpool(feed.stop)
        if built.owns_store:
            built.store.close()


async def _cancel(tasks: Sequence[asyncio.Task[None]]) -> None:
    """Cancel the periodic tasks and wait for each to finish."""
    for task in tasks:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def create_app(
    settings: AppSettings | None = None,
    *,
    services: Services | None = None,
    seed_from_sample: bool = True,
    clock: ClockMode = "system",
    refresh_seconds: float | None = 5.0,
    extra_routers: Sequence[APIRouter] = (),
    analysis_seconds: float | None = 2.0,
    follow_champion: bool = True,
    mlflow_ui: str | None = None,
) -> FastAPI:
    """Build the Foresight API app; its lifespan loads what it serves.

    Args:
        settings: the settings; default :func:`load_app_settings` (environment and
            defaults) when the app starts. Ignored when ``services`` is given.
        services: ready-made services (tests); the lifespan then loads nothing and
            leaves the store open unless ``services.owns_store``.
        seed_from_sample: when the app builds its services, fill pools that have no
            samples from the committed sample data set (the embedded default).
        clock: ``system`` (wall time) or ``replay`` (as of the newest sample, for old
            sample data); ignored when ``services`` is given (set ``services.clock``, or
            ``app.state.services.clock`` once started: the app serves a completed copy).
        refresh_seconds: how often a background task polls the store for samples
            written by others and recomputes recommendations ahead of expiry; None
            turns it off (requests then recompute only on expiry or local pushes).
        extra_routers: more routers to include (guarded by the bearer tokens).
        analysis_seconds: how often a background task analyses the call-chain span
            window and recomputes the pools whose latency adjustment changed; None
            turns it off (then call ``app.state.latency.update``).
        follow_champion: check ``services.champion`` at start and every
            ``service.model_poll_seconds``, serving each newly promoted version (see
            :mod:`api.champion`); False leaves that to the caller.
        mlflow_ui: the MLflow UI's address (``serve --mlflow-ui-port``), for the
            dashboard's link to the served model version; None: a tracking server's
            own address when the tracking URI is one, else no link.
    """

    async def given_services() -> Services:
        if services is not None:
            return services
        chosen = settings if settings is not None else load_app_settings()
        return await run_in_threadpool(build_services, chosen, seed_from_sample=seed_from_sample)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        given = await given_services()
        # Injected services keep their own clock (set ``services.clock``).
        running = serving(given, None if services is not None else clock)
        background = _Background(refresh_seconds, analysis_seconds, follow_champion)
        async with _serve(app, running, background):
            yield

    app = FastAPI(
        title="Foresight",
        summary="Predictive autoscaling recommendations for GPU node pools.",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,  # served from packaged assets instead of a CDN: install_docs
        redoc_url=None,
    )
    app.state.mlflow_ui = mlflow_ui
    install_docs(app)
    _install(app, (*CORE_ROUTERS, *extra_routers))
    return app


def _install(app: FastAPI, routers: Sequence[APIRouter]) -> None:
    """Add the error handlers, middleware, metrics and routes (guarded unless open)."""
    install_error_handlers(app)
    install_auth_handlers(app)
    metrics = AppMetrics(
        lambda: getattr(app.state, "service", None), lambda: getattr(app.state, "latency", None)
    )
    app.state.metrics = metrics
    # Added last, so outermost: the timer also sees the 413s of the body limit.
    install_limits(app)
    app.add_middleware(PolledReads)
    app.add_middleware(RequestTimer, histogram=metrics.request_seconds)
    guarded = [Depends(authorize)]
    for router in routers:
        if any(router is open_router for open_router in OPEN_ROUTERS):
            app.include_router(router)
        else:
            app.include_router(router, dependencies=guarded, responses=AUTH_RESPONSES)
