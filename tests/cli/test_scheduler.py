"""``foresight jobs`` and ``foresight scheduler`` on a SQLite store in tmp_path."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli import app
from cli.support import console
from pipelines.store.store import open_store


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """Print the table on one line per job, so cells can be matched whole."""
    monkeypatch.setattr(console, "width", 200)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "foresight.yaml"
    path.write_text(
        f"root: {tmp_path}\nscheduler:\n  ingest_every_minutes: 7\n  train_cron: '15 4 * * *'\n"
    )
    return path


def test_jobs_lists_every_job_before_any_scheduler_ran(config: Path) -> None:
    result = CliRunner().invoke(app, ["jobs", "--config", str(config)])
    assert result.exit_code == 0, result.output
    rows = result.output.splitlines()
    for name in ("ingest", "train", "forecast", "evaluate", "publish"):
        assert any(line.startswith(f"│ {name} ") for line in rows), name
    assert "every 0:07:00" in result.output
    assert "cron 15 4 * * * UTC" in result.output
    assert "never ran" in result.output
    assert "No scheduler has stored these jobs yet" in result.output


def test_jobs_shows_the_last_run_and_its_outcome(config: Path, tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 'data' / 'foresight.db'}") as store:
        run = store.job_runs.start(
            "ingest", runner="host:1", started_at=datetime(2025, 3, 1, 12, tzinfo=UTC)
        )
        store.job_runs.finish(run, "partial", "ingested 12 samples, 1 series failed")
    result = CliRunner().invoke(app, ["jobs", "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert "2025-03-01 12:00" in result.output
    assert "partial" in result.output
    assert "ingested 12 samples, 1 series failed" in result.output
    assert "host:1" in result.output  # which process ran it
    assert "Leader: none recorded" in result.output


def test_jobs_shows_which_process_leads_and_since_when(config: Path, tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 'data' / 'foresight.db'}") as store:
        store.leader.claim("pod-a:41", since=datetime(2025, 3, 1, 12, 30, tzinfo=UTC))
        store.leader.claim("pod-b:7", since=datetime(2025, 3, 1, 12, 45, tzinfo=UTC))
        store.leader.release("pod-a:41")  # a stale leader's late release changes nothing
    result = CliRunner().invoke(app, ["jobs", "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert "Leader: pod-b:7 since 2025-03-01 12:45:00 UTC" in result.output


def test_a_bad_cron_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(f"root: {tmp_path}\nscheduler:\n  train_cron: 'every day'\n")
    result = CliRunner().invoke(app, ["jobs", "--config", str(path)])
    assert result.exit_code == 2
    assert "scheduler.train_cron" in result.output


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_scheduler_runs_in_the_foreground_and_stops_on_sigterm(
    config: Path, tmp_path: Path
) -> None:
    log = tmp_path / "scheduler.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [str(Path(sys.executable).parent / "foresight"), "scheduler", "--config", str(config)],
            stdout=output,
            stderr=subprocess.STDOUT,
            cwd=Path(__file__).resolve().parents[2],
        )
        try:
            deadline = time.monotonic() + 90
            while "leading the scheduler" not in log.read_text() and time.monotonic() < deadline:
                assert process.poll() is None, log.read_text()
                time.sleep(0.1)
            assert "leading the scheduler" in log.read_text()
            process.send_signal(signal.SIGTERM)
            assert process.wait(30) == 0, log.read_text()
        finally:
            if process.poll() is None:
                process.kill()
    text = log.read_text()
    assert "Scheduler stopped." in text
    assert "stepping down" in text
    result = CliRunner().invoke(app, ["jobs", "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert "not scheduled" not in result.output  # all five stored, with next runs


def test_scheduler_takes_the_clock_the_api_serves_with(config: Path) -> None:
    # Forecasts must be stamped on the API's clock (#35): the option exists, and says so.
    result = CliRunner().invoke(app, ["scheduler", "--config", str(config), "--clock", "wall"])

    assert result.exit_code != 0
    assert "--clock must be 'system' or 'replay', not 'wall'" in result.output
