"""``foresight serve`` runs the forecast job once before serving: the API only reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from api.settings import AppSettings, load_app_settings
from cli.serve import _forecast_before_serving
from pipelines.jobs.report import JobReport
from pipelines.store.store import open_store

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def settings(tmp_path: Path) -> AppSettings:
    return load_app_settings(
        root=tmp_path,
        pools_file=ROOT / "data" / "sample" / "pools.yaml",
        sample_dir=ROOT / "data" / "sample",
        scheduler={"workers": 1},
    )


def test_the_store_is_seeded_and_the_forecast_job_runs_and_is_recorded(
    settings: AppSettings, capsys: pytest.CaptureFixture[str]
) -> None:
    ran: list[str] = []

    def runner(name: str, given: AppSettings) -> JobReport:
        ran.append(name)
        with open_store(given.store_url) as store:  # the job sees the seeded samples
            assert store.samples.last_timestamps()
        from pipelines.jobs.runtime import finish, utc_now

        return finish(name, utc_now(), "ok", "saved 3 forecast rows")

    _forecast_before_serving(settings, runner)

    assert ran == ["forecast"]
    with open_store(settings.store_url) as store:
        runs = store.job_runs.history("forecast")
    assert [(run.outcome, run.summary) for run in runs] == [("ok", "saved 3 forecast rows")]
    assert "Forecast job at startup (ok): saved 3 forecast rows" in capsys.readouterr().out


def test_without_a_champion_serving_goes_on_and_says_why(
    settings: AppSettings, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipelines.jobs.registry import run_job

    def runner(name: str, given: Any) -> JobReport:
        return run_job(name, given)

    _forecast_before_serving(settings, runner)  # no training happened: no champion

    out = capsys.readouterr().out
    assert "Forecast job at startup (failed)" in out
    assert "champion" in out


def test_train_now_starts_the_scheduled_training_at_once(settings: AppSettings) -> None:
    import threading

    from cli.serve import _scheduler
    from pipelines.jobs.runtime import finish, utc_now

    ran: list[str] = []
    trained = threading.Event()

    def runner(name: str, given: AppSettings) -> JobReport:
        ran.append(name)
        if name == "train":
            trained.set()
        return finish(name, utc_now(), "ok", f"{name} ran")

    with _scheduler(settings, runner, train_now=True):
        # The training's cron is 03:00: without --train-now it would wait until then.
        assert trained.wait(30), ran
    assert ran[0] == "train"


def test_train_now_without_the_scheduler_is_refused_at_once() -> None:
    from typer.testing import CliRunner

    from cli import app

    result = CliRunner().invoke(app, ["serve", "--train-now", "--no-scheduler"])
    assert result.exit_code == 2
    assert "--train-now needs the scheduler: drop --no-scheduler" in result.output
