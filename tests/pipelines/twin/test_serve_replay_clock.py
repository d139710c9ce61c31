"""``serve --clock replay`` runs its forecast job at the replay clock's now (the twin's need)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from pipelines.cli.serve import replay_clock_runner
from pipelines.config.settings import Settings, load_settings
from pipelines.jobs.report import JobReport
from pipelines.jobs.runtime import finish, utc_now
from pipelines.store import open_store


def _settings(tmp_path: Path) -> Settings:
    return load_settings(root=tmp_path, sample_dir=tmp_path / "none", scheduler={"workers": 1})


def test_the_forecast_job_runs_at_the_newest_stored_sample(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    newest = datetime(2020, 5, 8, 1, 50, tzinfo=UTC)
    with open_store(settings.store_url) as store:
        store.samples.upsert(
            pd.DataFrame(
                {
                    "unique_id": ["p/nodes", "p/nodes", "q/nodes"],
                    "ds": pd.to_datetime(
                        ["2020-05-08T01:40Z", "2020-05-08T01:50Z", "2020-05-08T01:00Z"]
                    ),
                    "y": [3.0, 4.0, 5.0],
                }
            )
        )
    seen: list[tuple[str, datetime | None]] = []

    def forecast(given: Settings, now: datetime | None) -> JobReport:
        seen.append(("forecast", now))
        return finish("forecast", utc_now(), "ok", "made")

    def other(name: str, given: Settings) -> JobReport:
        seen.append((name, None))
        return finish(name, utc_now(), "ok", "ran")

    run = replay_clock_runner(other, forecast)
    run("forecast", settings)
    run("publish", settings)
    assert seen == [("forecast", newest), ("publish", None)]


def test_an_empty_store_leaves_the_forecast_on_the_wall_clock(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    seen: list[datetime | None] = []

    def forecast(given: Settings, now: datetime | None) -> JobReport:
        seen.append(now)
        return finish("forecast", utc_now(), "failed", "no history")

    replay_clock_runner(lambda name, given: finish(name, utc_now(), "ok", ""), forecast)(
        "forecast", settings
    )
    assert seen == [None]
