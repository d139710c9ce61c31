"""A forecast run is one unit: the service never switches to half of one.

The forecast job writes a run's per-horizon rows and its peak rows; a replica's
reload can fall anywhere between the job's writes. A store whose database calls a
hook after every committed write puts reloads exactly there (no sleeps): whatever a
replica reads, each pool's forecast comes with the peak of the same run.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pandas as pd
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from api.clock import ReplayClock
from api.forecasts import ForecastCache
from api.main import create_app
from api.services import Services
from api.settings import AppSettings
from forecaster.peak.model import PeakQuantileForecaster
from forecaster.registry import LoadedModel
from pipelines.config.pools import PoolsConfig
from pipelines.jobs.forecast import run_forecast
from pipelines.store.engine import Database
from pipelines.store.store import Store, open_store

from .conftest import END, history

Hook = Callable[[str], None]


class HookedDatabase(Database):
    """The store's database, calling ``hook(action)`` after every committed write."""

    def __init__(self, engine: Engine, hook: Hook) -> None:
        super().__init__(engine)
        self.hook = hook

    @contextmanager
    def transaction(self, action: str) -> Iterator[Session]:
        with super().transaction(action) as session:
            yield session
        if action.startswith("write"):
            self.hook(action)


def hooked(store: Store, hook: Hook) -> Store:
    """A second handle on ``store``'s database whose writes call ``hook`` once committed."""
    return Store(HookedDatabase(store.engine, hook))


@pytest.fixture(scope="module")
def with_peak(champion: LoadedModel) -> LoadedModel:
    """Version 8: the champion with a small peak model, as training registers it."""
    fleet = pd.concat([history("alpha"), history("beta", seed=1)])
    peak = PeakQuantileForecaster(
        lead_steps=(2, 3), quantiles=(0.5, 0.8, 0.9), max_iter=20, min_samples_leaf=20
    ).fit(fleet)
    return replace(champion, version="8", peak=peak)


def forecast(settings: AppSettings, store: Store, model: LoadedModel, minutes: int) -> None:
    """Run the forecast job at ``minutes`` past the history's end."""
    report = run_forecast(
        settings, store=store, now=END + timedelta(minutes=minutes, seconds=1), champion=model
    )
    assert report.outcome == "ok", report.summary


def assert_whole(cache: ForecastCache, pools: PoolsConfig) -> None:
    """Every pool the replica holds a forecast for has the peak of the same run."""
    for pool in pools.pools:
        made = cache.get(pool)
        assert made.forecast is not None, made.reason
        assert made.forecast.peak is not None, made.forecast.peak_missing
        assert made.forecast.peak_missing == ""
        assert made.generated_at is not None


def test_a_reload_between_the_jobs_writes_never_serves_a_run_without_its_peaks(
    settings: AppSettings, pools: PoolsConfig, store: Store, with_peak: LoadedModel
) -> None:
    replica = ForecastCache(store, with_peak)
    reloads: list[str] = []

    def reload_after(action: str) -> None:
        reloads.append(action)
        replica.reload(pools.pools)

    forecast(settings, hooked(store, reload_after), with_peak, 0)

    assert reloads  # the replica reloaded after every write the job committed
    assert_whole(replica, pools)
    run = replica.get(pools.pools[0]).generated_at
    assert run == END + timedelta(seconds=1)
    # The next run too: the replica moves to it whole, at its first reload after it.
    forecast(settings, hooked(store, reload_after), with_peak, 5)
    assert_whole(replica, pools)
    assert replica.get(pools.pools[0]).generated_at == END + timedelta(minutes=5, seconds=1)


REPLICAS = st.sampled_from([(), (0,), (1,), (0, 1), (1, 0)])
"""Which replicas reload (in that order) after a committed write."""


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data(), runs=st.integers(min_value=1, max_value=3))
def test_two_replicas_reloading_at_random_points_never_serve_a_partial_run(
    data: st.DataObject,
    runs: int,
    settings: AppSettings,
    pools: PoolsConfig,
    with_peak: LoadedModel,
) -> None:
    with (
        tempfile.TemporaryDirectory() as folder,
        open_store(f"sqlite:///{Path(folder) / 'store.db'}") as store,
    ):
        store.samples.upsert(pd.concat([history("alpha"), history("beta", seed=1)]))
        replicas = [ForecastCache(store, with_peak), ForecastCache(store, with_peak)]
        seen: list[list[pd.Timestamp]] = [[], []]

        def reload(which: tuple[int, ...]) -> None:
            for index in which:
                replicas[index].reload(pools.pools)
                held = [replicas[index].get(pool) for pool in pools.pools]
                if all(made.forecast is not None for made in held):
                    assert_whole(replicas[index], pools)
                    seen[index].append(pd.Timestamp(held[0].generated_at))

        writer = hooked(store, lambda action: reload(data.draw(REPLICAS, label=action)))
        for run in range(runs):
            reload(data.draw(REPLICAS, label="before the run"))
            forecast(settings, writer, with_peak, 5 * run)
        reload((0, 1))

        newest = END + timedelta(minutes=5 * (runs - 1), seconds=1)
        for index, replica in enumerate(replicas):
            assert_whole(replica, pools)
            assert replica.get(pools.pools[0]).generated_at == newest
            assert seen[index] == sorted(seen[index])  # a replica never goes back a run


def test_with_no_new_data_the_job_skips_and_says_so_until_a_sample_arrives(
    settings: AppSettings, store: Store, champion: LoadedModel
) -> None:
    first = store.forecast_runs.latest(champion.version)
    assert first is not None
    assert first.observed_until == END

    later = END + timedelta(minutes=5, seconds=1)
    skipped = run_forecast(settings, store=store, now=later, champion=champion, skip_unchanged=True)
    assert skipped.outcome == "skipped"
    assert "no new data" in skipped.summary
    assert END.isoformat() in skipped.summary
    assert store.forecast_runs.latest(champion.version) == first

    store.samples.upsert(history("alpha", end=END + timedelta(minutes=5)).tail(1))
    ran = run_forecast(settings, store=store, now=later, champion=champion, skip_unchanged=True)
    assert ran.outcome == "ok", ran.summary
    newest = store.forecast_runs.latest(champion.version)
    assert newest is not None
    assert newest.generated_at == later
    assert newest.observed_until == END + timedelta(minutes=5)


def test_without_the_flag_the_job_runs_on_unchanged_data(
    settings: AppSettings, store: Store, champion: LoadedModel
) -> None:
    later = END + timedelta(minutes=5, seconds=1)
    again = run_forecast(settings, store=store, now=later, champion=champion)
    assert again.outcome == "ok"
    newest = store.forecast_runs.latest(champion.version)
    assert newest is not None
    assert newest.generated_at == later


def test_a_run_at_the_newest_samples_time_is_made_from_that_sample(
    settings: AppSettings, store: Store, champion: LoadedModel
) -> None:
    # Under the replay clock "now" is the newest sample: the run must see it.
    other = replace(champion, version="9")
    made = run_forecast(settings, store=store, now=END, champion=other)
    assert made.outcome == "ok", made.summary
    run = store.forecast_runs.latest(other.version)
    assert run is not None
    assert run.generated_at == END
    assert run.observed_until == END


def test_a_run_another_clock_dated_in_the_future_is_passed_over_for_the_one_before(
    settings: AppSettings, pools: PoolsConfig, store: Store, champion: LoadedModel
) -> None:
    # The store holds the replay-dated run (END + 1 s) and, as a wall-clock forecast
    # job left it, a newer run twenty months later: replaying, the first is served.
    wall = END + timedelta(days=600)
    report = run_forecast(settings, store=store, now=wall, champion=champion)
    assert report.outcome == "ok", report.summary
    replay = ReplayClock(lambda: END, fallback=lambda: wall)
    services = Services(settings, pools, store, champion, clock=replay)

    with TestClient(create_app(services=services, refresh_seconds=None)) as client:
        alpha = client.get("/recommendation/alpha").json()

    assert alpha["mode"] == "predictive", alpha["explanation"]["summary"]
    assert alpha["model_version"] == champion.version
    cache = ForecastCache(store, champion, until=lambda: END + timedelta(minutes=5))
    assert cache.get(pools.pools[0]).generated_at == END + timedelta(seconds=1)
