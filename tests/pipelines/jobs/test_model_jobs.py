"""train -> forecast -> evaluate on a SQLite store and a local MLflow, with fast models."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecaster.metrics import naive_scale
from forecaster.registry import load_champion
from forecaster.tracking import TrackingConfig
from forecaster.training import recent_history
from forecaster.types import DS, MEAN, STEP, UID, Y
from pipelines.config.settings import Settings
from pipelines.config.tracking import tracking_config
from pipelines.jobs.evaluate import RETRAIN, run_evaluate
from pipelines.jobs.forecast import SAMPLE_AT_NOW, run_forecast
from pipelines.jobs.history import read_history, training_plan
from pipelines.jobs.ingest import run_ingest
from pipelines.jobs.train import run_train
from pipelines.store.store import Store
from tests.forecaster.peak.serving import serve_frame
from tests.pipelines.jobs.job_fakes import POOL, START, FakeSource, make_settings, synthetic

pytestmark = pytest.mark.slow

SERIES = f"{POOL}/allocated_gpus"


def _evaluation_runs(tracking: TrackingConfig) -> list[object]:
    client = tracking.client()
    experiment = client.get_experiment_by_name(tracking.experiment_name)
    assert experiment is not None
    return list(
        client.search_runs([experiment.experiment_id], filter_string="tags.job = 'evaluate'")
    )


def test_train_forecast_evaluate_then_degradation_triggers_retraining(
    settings: Settings, store: Store
) -> None:
    data = synthetic()
    source = FakeSource(data)
    cut = START + pd.Timedelta(days=3)
    assert run_ingest(settings, store=store, source=source, now=cut.to_pydatetime()).outcome == "ok"

    trained = run_train(settings, store=store, fast=True)
    assert trained.outcome == "ok", (trained.summary, trained.problems)
    assert trained.details["promoted"] is True
    version = trained.details["version"]

    made = run_forecast(settings, store=store, now=cut.to_pydatetime())
    assert made.outcome == "ok", (made.summary, made.problems)
    assert made.details["version"] == version
    phases = made.details["phase_seconds"]
    assert list(phases) == ["load", "read", "refit_predict", "peak", "store"]  # no peak model
    assert all(seconds >= 0 for seconds in phases.values())
    forecasts = store.forecasts.read()
    assert forecasts[UID].nunique() == 5  # four signals and the derived demand
    assert set(forecasts["model_version"]) == {version}
    assert (forecasts["generated_at"] == cut).all()
    assert len(forecasts) == 5 * 6
    # Two days of history are too few realised peaks for the peak model: none stored.
    assert "no peak model" in trained.details["peak"]
    assert made.details["peak_rows"] == 0
    assert "no peak model in this version" in made.summary
    assert store.peak_forecasts.read().empty

    later = cut + pd.Timedelta(hours=2)
    run_ingest(settings, store=store, source=source, now=later.to_pydatetime())
    healthy = run_evaluate(settings, store=store, now=later.to_pydatetime())
    assert healthy.outcome == "ok", healthy.summary

    # Live MASE of one series at 1 h, computed here from first principles.
    mine = forecasts[forecasts[UID] == SERIES].sort_values(STEP)
    actual = data[(data[UID] == SERIES) & data[DS].isin(mine[DS])].set_index(DS)[Y]
    history = data[(data[UID] == SERIES) & (data[DS] <= cut)][Y].to_numpy()[-2 * 144 :]
    expected = np.mean(np.abs(actual.to_numpy() - mine[MEAN].to_numpy())) / naive_scale(history)
    assert healthy.details["live_mase"][SERIES] == pytest.approx(expected)
    assert "coverage_q0.9" in healthy.details["coverage"]
    # Live calibration: the raw coverage of the q0.9 bounds, from first principles.
    calibrated = healthy.details["calibration"][SERIES]["q0.9"]
    covered = actual.to_numpy() <= mine["q0.9"].to_numpy()
    assert calibrated["live_coverage"] == pytest.approx(covered.mean())
    assert calibrated["forecasts"] == len(mine)
    assert calibrated["calibrated_coverage"] == calibrated["live_coverage"]  # one generation
    [run] = _evaluation_runs(tracking_config(settings))
    assert "calibration/live_coverage/q0.9" in run.data.metrics  # type: ignore[attr-defined]

    # The world changes: demand ten times higher than anything the champion saw.
    degraded_data = data.assign(**{Y: np.where(data[DS] > later, data[Y] * 10, data[Y])})
    source.frame = degraded_data
    again = run_forecast(settings, store=store, now=later.to_pydatetime())
    assert again.outcome == "ok"
    final = later + pd.Timedelta(hours=2)
    run_ingest(settings, store=store, source=source, now=final.to_pydatetime())
    alarm = run_evaluate(
        settings, store=store, now=final.to_pydatetime(), lookback=timedelta(hours=3)
    )
    assert alarm.outcome == "ok", alarm.summary
    assert alarm.details["degraded"] is True, alarm.summary
    assert alarm.details[RETRAIN] is True
    assert SERIES in alarm.details["degraded_series"]
    assert "DEGRADED" in alarm.summary
    # The bounds missed the jump; the offset for forecasts made now grew to cover it.
    jumped = alarm.details["calibration"][SERIES]["q0.9"]
    assert jumped["live_coverage"] < 0.6
    assert jumped["offset"] > 0.0
    assert len(_evaluation_runs(tracking_config(settings))) == 2


def test_forecast_without_a_champion_fails_clearly(settings: Settings, store: Store) -> None:
    data = synthetic(days=1)
    run_ingest(settings, store=store, source=FakeSource(data), now=data[DS].max().to_pydatetime())
    report = run_forecast(settings, store=store)
    assert report.outcome == "failed"
    assert "no champion" in report.summary
    assert store.forecasts.read().empty


def test_train_on_an_empty_store_says_to_ingest_first(settings: Settings, store: Store) -> None:
    report = run_train(settings, store=store, fast=True)
    assert report.outcome == "failed"
    assert "foresight ingest" in report.summary


def test_the_train_jobs_summary_names_the_gate_checks_that_failed(
    settings: Settings, store: Store
) -> None:
    data = synthetic()
    cut = START + pd.Timedelta(days=3)
    run_ingest(settings, store=store, source=FakeSource(data), now=cut.to_pydatetime())
    first = run_train(settings, store=store, fast=True)
    assert first.details["promoted"] is True, first.summary

    again = run_train(settings, store=store, fast=True)  # the same data and models: a tie

    assert again.outcome == "ok"
    # The summary is the line `foresight jobs` shows for the run.
    assert again.summary.endswith("not promoted (failed: point)")
    assert again.details["failed_checks"] == ["point"]
    assert again.details["gate"]["point"] == "failed"
    assert any(line.startswith("point failed: ") for line in again.details["gate_checks"])


def test_evaluate_without_forecasts_is_skipped(settings: Settings, store: Store) -> None:
    report = run_evaluate(settings, store=store)
    assert report.outcome == "skipped"


def test_jobs_open_the_settings_store_when_none_is_given(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    report = run_evaluate(settings)
    assert report.outcome == "skipped"
    assert (tmp_path / "data" / "foresight.db").is_file()


def test_forecasts_through_a_process_pool_are_those_made_in_process(
    settings: Settings, store: Store
) -> None:
    data = synthetic()
    cut = START + pd.Timedelta(days=3)
    run_ingest(settings, store=store, source=FakeSource(data), now=cut.to_pydatetime())
    assert run_train(settings, store=store, fast=True).outcome == "ok"
    pooled = settings.model_copy(
        update={"scheduler": settings.scheduler.model_copy(update={"workers": 2})}
    )

    fanned = run_forecast(pooled, store=store, now=cut.to_pydatetime())
    first = store.forecasts.read().sort_values([UID, STEP]).reset_index(drop=True)
    alone = run_forecast(settings, store=store, now=cut.to_pydatetime())  # overwrites
    second = store.forecasts.read().sort_values([UID, STEP]).reset_index(drop=True)

    assert fanned.outcome == alone.outcome == "ok", (fanned.summary, alone.summary)
    assert fanned.details["series"] == 5
    pd.testing.assert_frame_equal(first, second)


def test_the_forecast_job_stores_the_peak_quantiles_of_the_trained_peak_model(
    tmp_path: Path,
) -> None:
    settings = make_settings(tmp_path, max_train_days=4)
    data = synthetic(days=6)
    cut = START + pd.Timedelta(days=5)
    with _store(settings) as store:
        run_ingest(settings, store=store, source=FakeSource(data), now=cut.to_pydatetime())
        trained = run_train(settings, store=store, fast=True)
        assert trained.outcome == "ok", trained.summary
        assert "peak model at leads [1]" in trained.details["peak"]  # 10 min lead, 10 min step
        version = trained.details["version"]

        made = run_forecast(settings, store=store, now=cut.to_pydatetime())
        assert made.outcome == "ok", (made.summary, made.problems)
        assert made.details["peak_rows"] == 1  # one demand series, one lead

        peak = store.peak_forecasts.latest(f"{POOL}/demand_gpus", version)
        origin = cut  # the sample stamped at the job's now is known at now
        assert list(peak["origin"]) == [origin]
        assert list(peak["ds"]) == [origin + pd.Timedelta(minutes=10)]
        assert set(peak["generated_at"]) == {cut}
        at_origin = data[data[DS] == origin].set_index(UID)[Y]
        demand = at_origin[f"{POOL}/allocated_gpus"] + at_origin[f"{POOL}/queue_gpus"]
        assert peak["last"].iloc[0] == pytest.approx(demand)
        levels = sorted({*settings.levels, 0.9})
        assert [c for c in peak.columns if c.startswith("q")] == [f"q{q:g}" for q in levels]
        values = peak[[f"q{q:g}" for q in levels]].to_numpy()[0]
        assert (np.diff(values) >= 0).all()  # quantiles never cross
        # Exactly what the registered peak model predicts from the stored history.
        loaded = load_champion(
            settings.registered_model_name,
            models_dir=settings.models_dir,
            tracking=tracking_config(settings),
        )
        assert loaded.peak is not None
        history = read_history(store, settings, end=cut + SAMPLE_AT_NOW, days=4).frame
        direct = loaded.peak.predict_peak(history)
        direct = direct[direct[UID] == f"{POOL}/demand_gpus"]
        columns = [f"q{q:g}" for q in levels]
        raw = peak[[f"raw_{c}" for c in columns]].to_numpy()[0]
        np.testing.assert_allclose(raw, direct[columns].to_numpy()[0])
        assert peak["scale"].iloc[0] == pytest.approx(direct["scale"].iloc[0])
        # Served: the raw quantiles calibrated and combined online, from the actuals (no
        # earlier raw forecast is stored: the calibration has learnt nothing yet).
        step = pd.Timedelta(minutes=10)
        # As the job does: the recent history its plan trains on (max_train steps).
        history = recent_history(history, training_plan(settings, step).max_train)
        served = serve_frame(direct, history, direct.iloc[:0], step)
        np.testing.assert_allclose(values, served[columns].to_numpy()[0])
        assert not np.allclose(values, raw)  # the reference's weight moved them

        # The next run learns from this run's stored raw forecast, realised since.
        later = cut + step
        run_ingest(settings, store=store, source=FakeSource(data), now=later.to_pydatetime())
        assert run_forecast(settings, store=store, now=later.to_pydatetime()).outcome == "ok"
        newer = store.peak_forecasts.latest(f"{POOL}/demand_gpus", version)
        history2 = read_history(store, settings, end=later + SAMPLE_AT_NOW, days=4).frame
        history2 = recent_history(history2, training_plan(settings, step).max_train)
        fresh = loaded.peak.predict_peak(history2)
        fresh = fresh[fresh[UID] == f"{POOL}/demand_gpus"]
        expected = serve_frame(fresh, history2, direct, step)[columns].to_numpy()[0]
        np.testing.assert_allclose(newer[columns].to_numpy()[0], expected)
        alone = serve_frame(fresh, history2, direct.iloc[:0], step)[columns].to_numpy()[0]
        assert not np.allclose(expected, alone)  # the stored raw forecast was learnt from

        # Through a process pool (the training's executor): the same rows.
        pooled = settings.model_copy(
            update={"scheduler": settings.scheduler.model_copy(update={"workers": 2})}
        )
        assert run_forecast(pooled, store=store, now=later.to_pydatetime()).outcome == "ok"
        pd.testing.assert_frame_equal(store.peak_forecasts.latest(f"{POOL}/demand_gpus"), newer)


def _store(settings: Settings) -> Store:
    from pipelines.store.store import open_store

    return open_store(settings.store_url)


def test_the_forecast_job_learns_a_joint_familys_fleet_from_every_series(
    settings: Settings, store: Store
) -> None:
    from forecaster.champion import ChampionForecaster
    from forecaster.models.global_gbm import GlobalGradientBoosting
    from forecaster.registry import LoadedModel
    from forecaster.training import recent_history
    from pipelines.jobs.history import training_plan

    data = synthetic()
    cut = START + pd.Timedelta(days=3)
    run_ingest(settings, store=store, source=FakeSource(data), now=cut.to_pydatetime())
    joint = GlobalGradientBoosting(
        season_length=144, horizon=6, anchors=(1, 3, 6), max_iter=5, min_samples_leaf=10
    )
    read = read_history(store, settings, end=cut + SAMPLE_AT_NOW, days=settings.max_train_days)
    history = recent_history(read.frame, training_plan(settings, read.step).max_train)
    uids = sorted(str(u) for u in history[UID].unique())
    champion = ChampionForecaster(dict.fromkeys(uids, "global_gbm"), {"global_gbm": joint})
    fitted = champion.unfitted().fit(history)  # one fit of every series: one fleet
    loaded = LoadedModel(model=fitted, version="1", source="registry")

    made = run_forecast(settings, store=store, now=cut.to_pydatetime(), champion=loaded)
    assert made.outcome == "ok", (made.summary, made.problems)

    stored = store.forecasts.read().sort_values([UID, STEP]).reset_index(drop=True)
    expected = fitted.predict(len(stored[STEP].unique()), settings.levels)
    expected = expected.sort_values([UID, STEP]).reset_index(drop=True)
    # Refitted series by series, each would be a fleet of one and forecast otherwise.
    np.testing.assert_allclose(stored[MEAN].to_numpy(), expected[MEAN].to_numpy())
