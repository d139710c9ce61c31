"""A running app follows ``@champion``: promotion served without restart, outages told.

The registry is a small fake behind :class:`~api.champion.ChampionSource`; the app,
its store, its forecasts and its routes are real.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.champion import ChampionFollower
from api.main import create_app
from api.service import RecommendationService
from api.settings import AppSettings
from forecaster.exceptions import TrackingError
from forecaster.registry import LoadedModel
from pipelines.store.store import Store

from .conftest import END, MakeServices, make_champion, run_forecast_job

LATER = END + timedelta(seconds=10)
"""When version 8's forecast job runs (stored forecasts are keyed by generation time)."""


@dataclass
class FakeRegistry:
    """The registry's champion, settable; ``down`` makes every call fail."""

    models: dict[str, LoadedModel]
    champion: str | None
    down: bool = False
    loads: list[str] = field(default_factory=list)
    load_started: threading.Event = field(default_factory=threading.Event)
    release_load: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.release_load.set()

    def champion_version(self) -> str | None:
        if self.down:
            raise TrackingError("the MLflow tracking server at http://mlflow:5000 is unreachable")
        return self.champion

    def load(self) -> LoadedModel:
        if self.down or self.champion is None:
            raise TrackingError("the registry is down")
        self.loads.append(self.champion)
        self.load_started.set()
        assert self.release_load.wait(10)
        return self.models[self.champion]


def version(number: str) -> LoadedModel:
    return replace(make_champion(), version=number)


@pytest.fixture
def registry() -> FakeRegistry:
    return FakeRegistry({"7": version("7"), "8": version("8")}, champion="7")


def _served(client: TestClient) -> set[str]:
    pools = client.get("/recommendation").json()["pools"]
    return {entry["model_version"] for entry in pools}


def test_a_promotion_is_served_without_restart_and_readyz_says_so(
    make_services: MakeServices, registry: FakeRegistry, settings: AppSettings, store: Store
) -> None:
    services = make_services(model=version("7"), champion=registry)
    with TestClient(
        create_app(services=services, refresh_seconds=None, follow_champion=False)
    ) as client:
        follower = ChampionFollower(client.app.state.service, registry)  # type: ignore[attr-defined]
        assert follower.check() is False
        assert _served(client) == {"7"}
        ready = client.get("/readyz").json()["checks"]["model"]
        assert (ready["served_version"], ready["champion_version"], ready["differs"]) == (
            "7",
            "7",
            False,
        )

        registry.champion = "8"
        run_forecast_job(settings, store, registry.models["8"], LATER)  # the job follows a training
        assert follower.check() is True

        assert _served(client) == {"8"}
        ready = client.get("/readyz").json()["checks"]["model"]
        assert (ready["version"], ready["source"], ready["differs"]) == ("8", "registry", False)
        assert registry.loads == ["8"]
        assert follower.check() is False
        assert registry.loads == ["8"]


def test_requests_are_answered_by_the_old_model_while_the_new_one_loads(
    make_services: MakeServices, registry: FakeRegistry, settings: AppSettings, store: Store
) -> None:
    run_forecast_job(settings, store, registry.models["8"], LATER)
    services = make_services(model=version("7"), champion=registry)
    with TestClient(
        create_app(services=services, refresh_seconds=None, follow_champion=False)
    ) as client:
        service: RecommendationService = client.app.state.service  # type: ignore[attr-defined]
        follower = ChampionFollower(service, registry)
        assert _served(client) == {"7"}
        registry.champion = "8"
        registry.release_load.clear()
        loading = threading.Thread(target=follower.check)
        loading.start()
        try:
            assert registry.load_started.wait(10)
            started = time.monotonic()
            assert _served(client) == {"7"}
            assert time.monotonic() - started < 5
            ready = client.get("/readyz").json()["checks"]["model"]
            assert (ready["served_version"], ready["champion_version"], ready["differs"]) == (
                "7",
                "8",
                True,
            )
        finally:
            registry.release_load.set()
            loading.join(30)
        assert _served(client) == {"8"}


def test_an_outage_is_told_and_recovery_needs_no_restart(
    make_services: MakeServices, registry: FakeRegistry, settings: AppSettings, store: Store
) -> None:
    run_forecast_job(settings, store, registry.models["8"], LATER)
    # Started during an outage from a stale local copy (version 7; the champion is 8).
    stale = replace(version("7"), source="last_known_good", reason="registry unreachable")
    registry.champion, registry.down = "8", True
    services = make_services(model=stale, champion=registry)
    with TestClient(
        create_app(services=services, refresh_seconds=None, follow_champion=False)
    ) as client:
        follower = ChampionFollower(client.app.state.service, registry)  # type: ignore[attr-defined]
        follower.check()
        assert _served(client) == {"7"}
        answer = client.get("/readyz")
        model = answer.json()["checks"]["model"]
        assert model["source"] == "last_known_good"
        assert model["registry"]["reachable"] is False
        assert "unreachable" in model["registry"]["problem"]
        metrics = client.get("/metrics").text
        assert "foresight_model_registry_reachable 0.0" in metrics
        assert "foresight_model_served_version 7.0" in metrics

        registry.down = False
        assert follower.check() is True

        model = client.get("/readyz").json()["checks"]["model"]
        assert (model["version"], model["source"], model["differs"]) == ("8", "registry", False)
        assert model["registry"]["reachable"] is True
        assert "note" not in model
        assert _served(client) == {"8"}
        metrics = client.get("/metrics").text
        for line in (
            "foresight_model_registry_reachable 1.0",
            "foresight_model_served_version 8.0",
            "foresight_model_champion_version 8.0",
            "foresight_model_version_differs 0.0",
        ):
            assert line in metrics


def test_the_same_version_back_from_the_registry_only_changes_the_source(
    make_services: MakeServices, registry: FakeRegistry
) -> None:
    local = replace(version("7"), source="last_known_good", reason="registry unreachable")
    services = make_services(model=local, champion=registry)
    with TestClient(
        create_app(services=services, refresh_seconds=None, follow_champion=False)
    ) as client:
        service: RecommendationService = client.app.state.service  # type: ignore[attr-defined]
        before = _served(client)
        forecasts = service.forecasts
        assert ChampionFollower(service, registry).check() is True
        assert service.forecasts is forecasts  # no refit: the same files
        served = service.services.model
        assert served is not None
        assert (served.source, served.reason) == ("registry", "")
        assert _served(client) == before


def test_a_first_champion_reaches_a_replica_that_started_without_one(
    make_services: MakeServices, registry: FakeRegistry
) -> None:
    registry.champion = None
    services = make_services(model=None, model_problem="no champion yet", champion=registry)
    with TestClient(
        create_app(services=services, refresh_seconds=None, follow_champion=False)
    ) as client:
        follower = ChampionFollower(client.app.state.service, registry)  # type: ignore[attr-defined]
        follower.check()
        assert client.get("/recommendation").json()["pools"][0]["mode"] == "reactive"
        registry.champion = "7"
        assert follower.check() is True
        assert _served(client) == {"7"}
        assert client.get("/readyz").json()["checks"]["model"]["ok"] is True


def test_the_app_polls_at_the_configured_interval(
    make_services: MakeServices, registry: FakeRegistry, settings: AppSettings, store: Store
) -> None:
    run_forecast_job(settings, store, registry.models["8"], LATER)
    fast = settings.model_copy(
        update={"service": settings.service.model_copy(update={"model_poll_seconds": 0.1})}
    )
    services = make_services(settings=fast, model=version("7"), champion=registry)
    app: FastAPI = create_app(services=services, refresh_seconds=None)
    with TestClient(app) as client:
        registry.champion = "8"
        assert _wait(lambda: _served(client) == {"8"}, 10)


def _wait(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_a_new_version_without_stored_forecasts_decides_reactively_and_says_why(
    make_services: MakeServices, registry: FakeRegistry, settings: AppSettings, store: Store
) -> None:
    services = make_services(model=version("7"), champion=registry)
    with TestClient(
        create_app(services=services, refresh_seconds=None, follow_champion=False)
    ) as client:
        follower = ChampionFollower(client.app.state.service, registry)  # type: ignore[attr-defined]
        registry.champion = "8"
        assert follower.check() is True  # promoted before its forecast job ran

        pool = client.get("/recommendation/alpha").json()
        assert pool["mode"] == "reactive"
        assert "no_forecast" in pool["explanation"]["health_reasons"]
        answer = client.get("/forecast/alpha")
        assert answer.status_code == 503
        assert "no forecast of alpha/demand_gpus by model version 8" in answer.text

        run_forecast_job(settings, store, registry.models["8"], LATER)
        client.app.state.service.refresh()  # type: ignore[attr-defined]

        pool = client.get("/recommendation/alpha").json()
        assert (pool["mode"], pool["model_version"]) == ("predictive", "8")
