"""The foresight CLI on a small hourly file: train, forecast, backtest, clear errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pydantic import SecretStr
from typer.testing import CliRunner

from cli import app

DAY = 24


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project root with a small hourly data file and quick settings."""
    rng = np.random.default_rng(11)
    n = 12 * DAY
    t = np.arange(n)
    ds = pd.date_range("2025-02-01", periods=n, freq="1h", tz="UTC")
    frames = [
        pd.DataFrame(
            {
                "unique_id": f"pool-{name}/allocated_gpus",
                "ds": ds,
                "y": np.clip(
                    level + level * 0.5 * np.sin(2 * np.pi * t / DAY) + rng.normal(0, 1, n), 0, None
                ),
            }
        )
        for name, level in (("a", 30.0), ("b", 12.0))
    ]
    pd.concat(frames).to_csv(tmp_path / "metrics.csv", index=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FORESIGHT_HORIZONS", '["1h", "6h"]')
    monkeypatch.setenv("FORESIGHT_SELECTION_HORIZON", "6h")
    monkeypatch.setenv("FORESIGHT_HORIZON", "6")
    monkeypatch.setenv("FORESIGHT_BACKTEST_WINDOWS", "3")
    monkeypatch.setenv("FORESIGHT_HELDOUT_WINDOWS", "1")
    return tmp_path


def test_train_then_forecast(workdir: Path) -> None:
    runner = CliRunner()
    trained = runner.invoke(
        app,
        ["train", "--data", "metrics.csv", "--fast", "--workers", "1", "--mlflow-ui-port", "5200"],
    )
    assert trained.exit_code == 0, trained.output
    assert "promoted to @champion" in trained.output
    hint = " ".join(trained.output.split())
    assert "mlflow ui --backend-store-uri sqlite:///" in hint
    assert "--port 5200" in hint
    assert "http://127.0.0.1:5200/#/experiments/" in hint
    assert "5000" not in hint

    # make run's quick first training does nothing once a version serves.
    again = runner.invoke(app, ["train", "--data", "metrics.csv", "--fast", "--unless-champion"])
    assert again.exit_code == 0, again.output
    assert "holds @champion: nothing to train (--unless-champion)" in " ".join(again.output.split())
    assert "Backtesting" not in again.output

    out = workdir / "forecast.csv"
    forecast = runner.invoke(
        app, ["forecast", "--data", "metrics.csv", "--steps", "4", "--output", str(out)]
    )
    assert forecast.exit_code == 0, forecast.output
    frame = pd.read_csv(out)
    assert len(frame) == 2 * 4
    assert {"unique_id", "ds", "step", "mean", "q0.5", "q0.9", "q0.95"} <= set(frame.columns)
    assert (frame["q0.95"] >= frame["q0.5"]).all()
    first = pd.to_datetime(frame["ds"]).min()
    assert first == pd.Timestamp("2025-02-13 00:00", tz="UTC")
    # The forecast job's code: refitted series by series, in worker processes or here.
    here = workdir / "here.csv"
    args = ["forecast", "--data", "metrics.csv", "--steps", "4", "--workers", "1"]
    alone = runner.invoke(app, [*args, "--output", str(here)])
    assert alone.exit_code == 0, alone.output
    pd.testing.assert_frame_equal(pd.read_csv(here), frame)


def test_backtest_writes_scores(workdir: Path) -> None:
    out = workdir / "scores.json"
    result = CliRunner().invoke(
        app,
        [
            "backtest",
            "--data",
            "metrics.csv",
            "--model",
            "persistence",
            "--workers",
            "1",
            "--output",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    scores = pd.read_json(out)
    assert set(scores["model"]) == {"persistence"}
    assert set(scores["horizon"]) == {"1h", "6h"}
    assert scores["mase"].notna().all()


def test_forecast_without_a_champion_says_to_train(workdir: Path) -> None:
    result = CliRunner().invoke(app, ["forecast", "--data", "metrics.csv"])
    assert result.exit_code == 2
    assert "error:" in result.output
    assert "champion" in result.output


def test_missing_data_file_is_a_clear_error(workdir: Path) -> None:
    result = CliRunner().invoke(app, ["train", "--data", "nope.csv"])
    assert result.exit_code == 2
    assert "nope.csv does not exist" in result.output


def test_horizon_that_is_not_a_multiple_of_the_step(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORESIGHT_HORIZONS", '["10min", "1h"]')
    monkeypatch.setenv("FORESIGHT_SELECTION_HORIZON", "1h")
    result = CliRunner().invoke(app, ["train", "--data", "metrics.csv"])
    assert result.exit_code == 2
    assert "FORESIGHT_HORIZONS" in result.output


def test_serve_rejects_an_unknown_clock(workdir: Path) -> None:
    result = CliRunner().invoke(app, ["serve", "--clock", "yesterday"])
    assert result.exit_code == 2
    assert "--clock must be 'system' or 'replay'" in result.output


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "::"])
def test_serve_refuses_a_non_loopback_host_without_tokens(workdir: Path, host: str) -> None:
    result = CliRunner().invoke(app, ["serve", "--host", host, "--no-scheduler"])

    assert result.exit_code == 2
    assert f"refusing to serve on {host} without API tokens" in " ".join(result.output.split())
    assert "--allow-unauthenticated" in result.output


@pytest.mark.parametrize(
    ("tokens", "reason"),
    [
        ('["CHANGE-ME-write-token"]', "service.write_tokens[0] is a well-known placeholder"),
        ('["short-token"]', "service.write_tokens[0] has 11 characters"),
        ('[""]', "service.write_tokens[0] is empty"),
    ],
)
def test_serve_refuses_weak_tokens_beyond_loopback_before_any_banner(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, tokens: str, reason: str
) -> None:
    monkeypatch.setenv("FORESIGHT_SERVICE__WRITE_TOKENS", tokens)
    result = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0", "--no-scheduler"])

    assert result.exit_code == 2
    assert reason in " ".join(result.output.split())
    assert "serving on" not in result.output


def test_loopback_and_explicit_consent_are_not_refused() -> None:
    from api.settings import load_app_settings
    from cli.serve import check_exposure

    settings = load_app_settings()
    for host in ("127.0.0.1", "localhost", "::1"):
        check_exposure(settings, host, allow_unauthenticated=False)
    check_exposure(settings, "0.0.0.0", allow_unauthenticated=True)
    strong = SecretStr("a-random-token-of-32-characters!")
    tokens = settings.service.model_copy(update={"write_tokens": (strong,)})
    check_exposure(
        settings.model_copy(update={"service": tokens}), "0.0.0.0", allow_unauthenticated=False
    )
