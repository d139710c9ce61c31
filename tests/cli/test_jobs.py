"""``foresight ingest`` and ``foresight backfill`` end to end on a small sample file."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli import app
from pipelines.store.store import open_store
from tests.pipelines.jobs.job_fakes import POOLS_YAML, synthetic


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project root whose sample data is a two-day file of pool p1."""
    sample = tmp_path / "data" / "sample"
    sample.mkdir(parents=True)
    synthetic(days=2).to_csv(sample / "metrics.csv.gz", index=False)
    (sample / "pools.yaml").write_text(POOLS_YAML, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    for name in ("FORESIGHT_SAMPLE_DIR", "FORESIGHT_POOLS_FILE", "FORESIGHT_STORE_URL"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_ingest_prints_the_report_and_is_idempotent(workdir: Path) -> None:
    runner = CliRunner()
    first = runner.invoke(app, ["ingest"])
    assert first.exit_code == 0, first.output
    assert "ingest ok: stored 1,440 samples of 4 series" in first.output

    second = runner.invoke(app, ["ingest"])
    assert second.exit_code == 0, second.output
    assert "stored 0 samples" in second.output
    with open_store(f"sqlite:///{workdir / 'data' / 'foresight.db'}") as store:
        assert len(store.samples.read()) == 1_440


def test_backfill_a_window(workdir: Path) -> None:
    result = CliRunner().invoke(
        app, ["backfill", "--from", "2025-03-01T12:00", "--to", "2025-03-01T13:00"]
    )
    assert result.exit_code == 0, result.output
    assert "backfill ok: stored 35 samples of 4 series" in result.output  # 7 steps x 5


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        ("2024-01-14", "2024-01-01", "--from 2024-01-14T00:00:00+00:00 is not before --to"),
        ("2024-01-01", "2024-01-01", "is not before"),
        ("yesterday-ish", "2024-01-14", "--from 'yesterday-ish' is not a date"),
        ("2024-01-01", "2024-13-01", "--to '2024-13-01' is not a date"),
    ],
)
def test_backfill_bad_dates_are_clear_errors(
    workdir: Path, start: str, end: str, message: str
) -> None:
    result = CliRunner().invoke(app, ["backfill", "--from", start, "--to", end])
    assert result.exit_code == 2
    assert message in result.output


def test_ingest_failure_exits_1_and_hides_the_password(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORESIGHT_STORE_URL", "postgresql+psycopg://user:secret@127.0.0.1:1/x")
    result = CliRunner().invoke(app, ["ingest"])
    assert result.exit_code == 1
    assert "ingest failed" in result.output
    assert "127.0.0.1:1" in result.output
    assert "secret" not in result.output
