"""What a reviewer finds in a training's MLflow run: its span, summary and window series."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import replace
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
import pytest
from mlflow import MlflowClient

from forecaster.models.naive import Persistence, SeasonalNaive
from forecaster.registry import champion_version
from forecaster.tracking import TrackingConfig
from forecaster.training import train
from tests.forecaster.test_training import DAY, PEAK_PLAN, PLAN, seasonal_frame

DEGRADED = {"clip_scaled": 0.0}


@pytest.fixture
def tracking(tmp_path: Path) -> TrackingConfig:
    return TrackingConfig(
        tracking_uri=f"sqlite:///{tmp_path}/mlflow.db",
        experiment_name="test-review",
        artifact_location=(tmp_path / "artifacts").as_uri(),
    )


def _table(tracking: TrackingConfig, run_id: str, name: str) -> pd.DataFrame:
    path = mlflow.artifacts.download_artifacts(
        run_id=run_id, artifact_path=name, tracking_uri=tracking.tracking_uri
    )
    table = json.loads(Path(path).read_text())
    return pd.DataFrame(table["data"], columns=table["columns"])


def test_the_run_spans_the_training_from_before_the_backtest_to_after_registration(
    tracking: TrackingConfig, tmp_path: Path
) -> None:
    stages: dict[str, float] = {}

    # Whole milliseconds, as MLflow stores a run's times (truncated).
    def progress(stage: str, done: int, total: int) -> None:
        stages.setdefault(stage, time.time_ns() // 1_000_000)

    before = time.time_ns() // 1_000_000
    outcome = train(
        seasonal_frame(),
        [Persistence(horizon=6), SeasonalNaive(season_length=DAY, horizon=6)],
        PLAN,
        tracking=tracking,
        model_name="demand",
        models_dir=tmp_path / "models",
        progress=progress,
    )
    client = MlflowClient(tracking_uri=tracking.tracking_uri, registry_uri=tracking.tracking_uri)
    info = client.get_run(outcome.run_id).info
    version = client.get_model_version("demand", outcome.version)
    assert info.status == "FINISHED"
    assert before <= info.start_time <= stages["backtest"]  # opened before the backtest
    assert info.end_time is not None
    assert info.end_time >= stages["register"]  # closed after registration and the gate
    assert info.end_time >= version.creation_timestamp
    assert version.run_id == outcome.run_id
    assert client.get_run(outcome.run_id).data.tags["foresight.model_version"] == outcome.version


def test_per_window_metrics_are_stepped_by_window_and_aggregates_stay_single(
    tracking: TrackingConfig, tmp_path: Path
) -> None:
    outcome = train(
        seasonal_frame(),
        [Persistence(horizon=6), SeasonalNaive(season_length=DAY, horizon=6)],
        PLAN,  # select: 4 selection windows, then 2 held out
        tracking=tracking,
        model_name="demand",
        models_dir=tmp_path / "models",
    )
    client = MlflowClient(tracking_uri=tracking.tracking_uri)
    history = client.get_metric_history(outcome.run_id, "window/champion/mase_6h")
    assert sorted(m.step for m in history) == list(range(6))
    relative = client.get_metric_history(outcome.run_id, "window/mase_vs_persistence/1h")
    assert sorted(m.step for m in relative) == list(range(6))
    assert all(m.value < 1.0 for m in relative if m.step >= 4)  # seasonal naive, held out
    persistence = client.get_metric_history(outcome.run_id, "window/persistence/mase_6h")
    assert len(persistence) == 6
    # The mean over the held-out windows is the held-out aggregate, logged once.
    heldout = [m.value for m in history if m.step >= PLAN.n_windows]
    aggregate = client.get_metric_history(outcome.run_id, "heldout/mase/champion/6h")
    assert [m.step for m in aggregate] == [0]
    assert aggregate[0].value == pytest.approx(sum(heldout) / len(heldout))
    run = client.get_run(outcome.run_id)
    assert run.data.params["heldout_first_step"] == "4"
    # Families' aggregates are a table, not a hundred one-point charts.
    assert "heldout/mase/seasonal_naive/6h" not in run.data.metrics
    assert "selection/mase/persistence/6h" in run.data.metrics
    table = _table(tracking, outcome.run_id, "scores_by_model.json").set_index(
        ["set", "model", "horizon"]
    )
    scores = outcome.scores
    family = scores[scores["model"].eq("seasonal_naive") & scores["horizon"].eq("6h")]
    assert table.loc[("heldout", "seasonal_naive", "6h"), "mase"] == pytest.approx(
        family["mase"].mean()
    )
    assert table.loc[("heldout", "champion", "6h"), "mase"] == pytest.approx(aggregate[0].value)
    sections = {key.rsplit("/", 1)[0] for key in run.data.metrics}
    # The run page's metric sections (before: one per family, metric and score set).
    assert len(sections) <= 40


def test_median_rule_windows_keep_their_place_after_the_unfitted_selection_windows(
    tracking: TrackingConfig, tmp_path: Path
) -> None:
    outcome = train(
        seasonal_frame(),
        [Persistence(horizon=6), SeasonalNaive(season_length=DAY, horizon=6)],
        replace(PLAN, champion="median"),  # only the held-out windows are backtested
        tracking=tracking,
        model_name="demand",
        models_dir=tmp_path / "models",
    )
    client = MlflowClient(tracking_uri=tracking.tracking_uri)
    history = client.get_metric_history(outcome.run_id, "window/champion/mase_1h")
    assert sorted(m.step for m in history) == [4, 5]


def test_the_summary_names_the_verdict_the_failed_checks_and_the_figures(
    tracking: TrackingConfig, tmp_path: Path
) -> None:
    df, models_dir = seasonal_frame(), tmp_path / "models"
    first = train(
        df, [Persistence(horizon=6)], PEAK_PLAN, tracking=tracking, model_name="demand",
        models_dir=models_dir,
    )  # fmt: skip
    degraded = train(
        df,
        [Persistence(horizon=6), SeasonalNaive(season_length=DAY, horizon=6)],
        replace(PEAK_PLAN, peak_params=DEGRADED),
        tracking=tracking,
        model_name="demand",
        models_dir=models_dir,
    )
    assert first.promoted
    assert not degraded.promoted
    client = MlflowClient(tracking_uri=tracking.tracking_uri)
    for outcome in (first, degraded):
        run = client.get_run(outcome.run_id)
        metrics, note = run.data.metrics, run.data.tags["mlflow.note.content"]
        summary = {k: v for k, v in metrics.items() if k.startswith("summary/")}
        assert summary["summary/promoted"] == float(outcome.promoted)
        assert summary["summary/checks_failed"] == len(outcome.decision.failed)
        relative = outcome.decision.relative
        assert relative is not None
        assert summary["summary/mase_vs_persistence"] == pytest.approx(relative.geomean)
        assert {"summary/mase_vs_persistence_1h", "summary/mase_ratio_of_means_6h"} <= set(summary)
        assert {"summary/coverage_q0.9", "summary/peak_pinball_vs_buffer"} <= set(summary)
        assert len(summary) <= 12  # a handful of columns, not hundreds
        horizons = _table(tracking, outcome.run_id, "summary.json")
        assert horizons["horizon"].tolist() == ["1h", "6h"]
        assert horizons.loc[1, "mase_vs_persistence"] == pytest.approx(
            summary["summary/mase_vs_persistence_6h"]
        )
        checks = _table(tracking, outcome.run_id, "gate.json")
        assert checks["check"].tolist() == [c.name for c in outcome.decision.checks]
        assert checks["status"].tolist() == [c.status for c in outcome.decision.checks]
        assert note.startswith("**Promoted" if outcome.promoted else "**Not promoted")
    note = client.get_run(degraded.run_id).data.tags["mlflow.note.content"]
    assert "failed: peak_vs_buffer, peak_vs_incumbent" in note
    assert "- peak_vs_buffer failed: peak pinball" in note
    peak = client.get_run(degraded.run_id).data.metrics["summary/peak_pinball_vs_buffer"]
    assert peak > 1.0  # the degraded peak model is worse than the buffer


class BrokenWorkers(Executor):
    """An executor whose workers are gone: every task fails, as a lost Dask cluster's."""

    def submit(  # type: ignore[override]
        self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> Future[Any]:
        raise RuntimeError("the workers are gone")


def test_a_training_that_fails_mid_way_ends_its_run_failed_and_registers_nothing(
    tracking: TrackingConfig, tmp_path: Path
) -> None:
    models_dir = tmp_path / "models"
    kept = train(
        seasonal_frame(), [Persistence(horizon=6)], PLAN, tracking=tracking,
        model_name="demand", models_dir=models_dir,
    )  # fmt: skip
    with pytest.raises(RuntimeError, match="workers are gone"):
        train(
            seasonal_frame(),
            [Persistence(horizon=6), SeasonalNaive(season_length=DAY, horizon=6)],
            PLAN,
            tracking=tracking,
            model_name="demand",
            models_dir=models_dir,
            run_name="broken",
            executor=BrokenWorkers(),
        )
    client = MlflowClient(tracking_uri=tracking.tracking_uri, registry_uri=tracking.tracking_uri)
    experiment = client.get_experiment_by_name("test-review")
    assert experiment is not None
    (broken,) = client.search_runs(
        [experiment.experiment_id], filter_string="attributes.run_name = 'broken'"
    )
    assert broken.info.status == "FAILED"
    assert broken.info.end_time is not None
    assert "summary/promoted" not in broken.data.metrics  # nothing half-logged as done
    assert champion_version("demand", tracking=tracking) == kept.version
    assert mlflow.active_run() is None
