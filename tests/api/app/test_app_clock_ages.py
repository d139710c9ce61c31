"""Every age and time a served recommendation carries comes from the decision clock (#35).

The operator's case: ``foresight serve --clock replay`` with its scheduler over the
committed sample. The forecast job stamped ``generated_at`` with the wall clock while
the service decided at the newest sample's time, so ``forecast_peak_gpus`` came out
``age_seconds: -53208417``. Here the forecast job runs through the runner ``serve``
gives the scheduler (at startup, before the app, and while it serves), and every
``at`` and ``age_seconds`` of the answer is walked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from fastapi.testclient import TestClient

from api.clock import ReplayClock
from api.publish_runner import serving_job_runner, store_clock
from api.services import Services
from api.settings import AppSettings
from cli.serve import _forecast_before_serving
from forecaster.registry import LoadedModel
from pipelines.config.pools import PoolsConfig
from pipelines.jobs.forecast import run_forecast
from pipelines.jobs.report import JobReport
from pipelines.scheduler.clocked import ClockedJob
from pipelines.store.store import Store, open_store
from tests.api.app.conftest import END, app_of, history

WALL = datetime(2026, 12, 6, 21, 0, tzinfo=UTC)
"""The wall clock of the operator's report, twenty months after the data."""


def _never(name: str, settings: AppSettings) -> JobReport:
    raise AssertionError(f"only the forecast job should run, not {name}")


def _jobs(store: Store, champion: LoadedModel) -> dict[str, ClockedJob]:
    def forecast(settings: AppSettings, now: datetime) -> JobReport:
        return run_forecast(settings, store=store, now=now, champion=champion)

    return {"forecast": forecast}


def _walk(node: Any, path: str = "") -> Iterator[tuple[str, str, Any]]:
    """Yield ``(path, key, value)`` of every key of a JSON body, depth first."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield path, key, value
            yield from _walk(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, f"{path}[{i}]")


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def assert_one_clock(body: dict[str, Any], now: datetime) -> None:
    """Every input's ``at`` is at or before ``now`` and its age is ``now - at`` (>= 0)."""
    assert _when(body["generated_at"]) == now
    assert _when(body["valid_until"]) > now
    assert body["data_freshness_seconds"] >= 0
    readings = 0
    for path, key, value in _walk(body):
        if key == "age_seconds" and value is not None:
            assert value >= 0, f"{path}: negative age {value}"
        if key == "at" and value is not None:
            parent = body
            for part in path.strip(".").split("."):
                parent = parent[part]
            assert _when(value) <= now, f"{path}: {value} is after now {now}"
            assert parent["age_seconds"] == (now - _when(value)).total_seconds(), path
            readings += 1
    assert readings >= 4  # forecast, demand, nodes, utilisation at least


@pytest.fixture
def bare_store(tmp_path: Path) -> Iterator[Store]:
    """History up to ``END`` and no forecast yet (as ``serve`` starts on a seeded store)."""
    with open_store(f"sqlite:///{tmp_path / 'bare.db'}") as opened:
        opened.samples.upsert(pd.concat([history("alpha"), history("beta", seed=1)]))
        yield opened


def test_forecasts_made_while_serving_are_dated_by_the_replay_clock(
    settings: AppSettings, pools: PoolsConfig, bare_store: Store, champion: LoadedModel
) -> None:
    services = Services(settings, pools, bare_store, champion, wall_clock=lambda: WALL)
    app = app_of(services)
    with TestClient(app) as client:
        service = app.state.service
        service.services.clock = ReplayClock(service.live.newest, fallback=lambda: WALL)
        runner = serving_job_runner(
            lambda: app.state.service, runner=_never, jobs=_jobs(bare_store, champion)
        )
        report = runner("forecast", settings)
        service.refresh()
        body = client.get("/recommendation/alpha").json()

    assert report.outcome in ("ok", "partial"), report.summary
    assert report.details["generated_at"] == END.isoformat()
    assert body["mode"] == "predictive", body["explanation"]["health_detail"]
    assert body["explanation"]["inputs"]["forecast_peak_gpus"]["at"] == "2025-03-30T23:55:00Z"
    assert_one_clock(body, END)


def test_the_startup_forecast_is_dated_by_the_clock_read_from_the_store(
    tmp_path: Path, settings: AppSettings, champion: LoadedModel
) -> None:
    # ``serve`` runs the forecast job before the app starts: no service to ask yet.
    root = Path(__file__).resolve().parents[3]
    served = settings.model_copy(
        update={
            "pools_file": root / "data" / "sample" / "pools.yaml",
            "sample_dir": root / "data" / "sample",
        }
    )
    made: list[datetime] = []

    def forecast(given: AppSettings, now: datetime) -> JobReport:
        made.append(now)
        from pipelines.jobs.runtime import finish, utc_now

        return finish("forecast", utc_now(), "ok", f"stamped {now.isoformat()}")

    runner = serving_job_runner(
        lambda: None,
        runner=_never,
        before=store_clock(served, "replay"),
        jobs={"forecast": forecast},
    )
    _forecast_before_serving(served, runner)

    with open_store(served.store_url) as store:
        newest = max(store.samples.last_timestamps().values())
    assert made == [newest.to_pydatetime()]
    assert made[0] < datetime(2025, 4, 1, tzinfo=UTC)  # the sample's time, not the wall's


def test_a_clocked_runner_leaves_the_other_jobs_to_their_runner(settings: AppSettings) -> None:
    from pipelines.jobs.runtime import finish, utc_now
    from pipelines.scheduler.clocked import clocked_runner

    ran: list[str] = []

    def other(name: str, given: AppSettings) -> JobReport:
        ran.append(name)
        return finish(name, utc_now(), "ok", "ran")

    at = END - timedelta(days=1)
    dated: list[datetime] = []

    def evaluate(given: AppSettings, now: datetime) -> JobReport:
        dated.append(now)
        return finish("evaluate", utc_now(), "ok", "scored")

    runner = clocked_runner(lambda: at, other, jobs={"evaluate": evaluate})
    runner("train", settings)
    runner("evaluate", settings)

    assert ran == ["train"]
    assert dated == [at]


def _replay_answer(
    services: Services, pool: str = "alpha", route: str = "recommendation"
) -> dict[str, Any]:
    """Serve ``services`` on the replay clock (wall clock ``WALL``) and return one answer."""
    app = app_of(services)
    with TestClient(app) as client:
        app.state.services.clock = ReplayClock(app.state.service.live.newest, fallback=lambda: WALL)
        app.state.service.invalidate()
        response = client.get(f"/{route}/{pool}")
    body: dict[str, Any] = response.json()
    body.setdefault("status", response.status_code)
    return body


def test_a_forecast_stamped_by_the_wall_clock_is_not_used_while_replaying(
    settings: AppSettings, pools: PoolsConfig, bare_store: Store, champion: LoadedModel
) -> None:
    # As the old scheduler (or `foresight forecast` on the wall clock) left the store.
    report = run_forecast(settings, store=bare_store, now=WALL, champion=champion)
    assert report.outcome in ("ok", "partial"), report.summary

    body = _replay_answer(Services(settings, pools, bare_store, champion))

    assert_one_clock(body, END)
    assert body["mode"] == "reactive"
    assert body["explanation"]["health_reasons"] == ["no_forecast"]
    assert body["explanation"]["inputs"]["forecast_peak_gpus"]["at"] is None
    shown = _replay_answer(Services(settings, pools, bare_store, champion), route="forecast")
    assert shown["status"] == 503
    assert "2026-12-06T21:00:00+00:00, after now (2025-03-30T23:55:00+00:00)" in shown["message"]


def test_a_live_error_measured_on_another_clock_is_not_this_decisions(
    settings: AppSettings, pools: PoolsConfig, bare_store: Store, champion: LoadedModel
) -> None:
    def measured_on_the_wall(pool: Any, now: datetime) -> tuple[float | None, datetime | None]:
        return 0.5, WALL

    services = Services(settings, pools, bare_store, champion, live_error=measured_on_the_wall)
    body = _replay_answer(services)

    assert_one_clock(body, END)
    assert body["explanation"]["inputs"]["forecast_error"]["at"] is None


def test_a_stabilisation_state_written_on_another_clock_starts_afresh(
    settings: AppSettings, pools: PoolsConfig, bare_store: Store, champion: LoadedModel
) -> None:
    # A replay that a wall-clock sample once dragged ahead left its state dated 2026.
    ahead = "2026-12-06T20:55:00Z"
    state = {
        "spans": [{"nodes": 40, "start": ahead, "end": ahead, "latency": None}],
        "tracked_since": ahead,
        "last_decision_at": ahead,
        "last_scale_up_at": ahead,
    }
    bare_store.state.put("alpha", state, updated_at=WALL)

    body = _replay_answer(Services(settings, pools, bare_store, champion))

    assert_one_clock(body, END)
    assert body["explanation"]["stages"]["window_max"] < 40
    assert body["explanation"]["inputs"]["last_scale_up"]["at"] in (None, "2025-03-30T23:55:00Z")


def test_the_live_error_is_dated_by_the_evaluation_s_own_clock() -> None:
    from api.live_error import measured_at
    from pipelines.jobs.evaluate import EVALUATED_AT

    finished = WALL
    assert measured_at({EVALUATED_AT: END.isoformat()}, finished) == END
    assert measured_at({}, finished) == finished  # runs recorded before the stamp
    assert measured_at({EVALUATED_AT: "not a time"}, finished) == finished


def test_the_set_is_as_of_a_time_at_or_after_each_pools_decision(
    make_services: Callable[..., Services],
) -> None:
    # A clock that moves on every reading, as the wall clock does between the set's
    # reading and the pools' decisions on a busy replica.
    ticks = iter(END + timedelta(seconds=i) for i in range(1_000_000))
    services = make_services(clock=lambda: next(ticks))
    with TestClient(app_of(services)) as client:
        client.app.state.service.invalidate()  # type: ignore[attr-defined]
        body = client.get("/recommendation").json()

    assert body["pools"]
    for pool in body["pools"]:
        assert _when(pool["generated_at"]) <= _when(body["generated_at"]), pool["pool"]
