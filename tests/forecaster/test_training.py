"""Training end to end against a temporary local MLflow store: gate, alias, last-known-good."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient

from forecaster.champion import ChampionForecaster
from forecaster.models.naive import Persistence, SeasonalNaive
from forecaster.registry import champion_version, last_known_good_dir, load_champion
from forecaster.tracking import TrackingConfig
from forecaster.training import TrainingPlan, champion_rows, train

DAY = 24  # hourly steps keep every fit instant


def seasonal_frame(days: int = 12, seed: int = 3) -> pd.DataFrame:
    """Two series with a strong daily cycle: seasonal naive beats persistence."""
    rng = np.random.default_rng(seed)
    n = days * DAY
    t = np.arange(n)
    ds = pd.date_range("2025-01-01", periods=n, freq="1h", tz="UTC")
    parts = []
    for uid, level in (("pool-a/demand_gpus", 40.0), ("pool-b/demand_gpus", 10.0)):
        y = level + 0.8 * level * np.sin(2 * np.pi * t / DAY) + rng.normal(0, 0.5, n)
        parts.append(pd.DataFrame({"unique_id": uid, "ds": ds, "y": np.clip(y, 0, None)}))
    return pd.concat(parts, ignore_index=True)


@pytest.fixture
def tracking(tmp_path: Path) -> TrackingConfig:
    return TrackingConfig(
        tracking_uri=f"sqlite:///{tmp_path}/mlflow.db",
        experiment_name="test-training",
        artifact_location=(tmp_path / "artifacts").as_uri(),
    )


PLAN = TrainingPlan(
    horizon=6,
    horizons={"1h": 1, "6h": 6},
    selection_horizon="6h",
    n_windows=4,
    levels=(0.5, 0.9),
    max_train=8 * DAY,
    champion="select",  # these tests are of selection and the gate; the median has its own
)


def run(
    df: pd.DataFrame,
    models: list[Persistence | SeasonalNaive],
    tracking: TrackingConfig,
    models_dir: Path,
):  # type: ignore[no-untyped-def]
    return train(df, models, PLAN, tracking=tracking, model_name="demand", models_dir=models_dir)


def test_first_training_becomes_champion_and_is_exported(
    tracking: TrackingConfig, tmp_path: Path
) -> None:
    outcome = run(seasonal_frame(), [Persistence(horizon=6)], tracking, tmp_path / "models")

    assert outcome.promoted
    assert outcome.version == "1"
    assert champion_version("demand", tracking=tracking) == "1"
    assert last_known_good_dir(tmp_path / "models", "demand") is not None
    assert outcome.selection == {
        "pool-a/demand_gpus": "persistence",
        "pool-b/demand_gpus": "persistence",
    }


def test_better_challenger_is_promoted_equal_one_is_not(
    tracking: TrackingConfig, tmp_path: Path
) -> None:
    df = seasonal_frame()
    models_dir = tmp_path / "models"
    run(df, [Persistence(horizon=6)], tracking, models_dir)

    better = run(
        df,
        [Persistence(horizon=6), SeasonalNaive(season_length=DAY, horizon=6)],
        tracking,
        models_dir,
    )
    assert set(better.selection.values()) == {"seasonal_naive"}
    assert better.promoted, better.decision.reason
    assert champion_version("demand", tracking=tracking) == better.version

    same = run(
        df,
        [Persistence(horizon=6), SeasonalNaive(season_length=DAY, horizon=6)],
        tracking,
        models_dir,
    )
    assert not same.promoted
    assert champion_version("demand", tracking=tracking) == better.version

    loaded = load_champion("demand", models_dir=models_dir, tracking=tracking)
    assert loaded.version == better.version
    assert isinstance(loaded.model, ChampionForecaster)
    assert loaded.model.describe() == better.selection


def test_champion_rows_pick_each_series_selected_model() -> None:
    frame = pd.DataFrame(
        {
            "unique_id": ["a", "a", "b", "b"],
            "model": ["persistence", "seasonal_naive", "persistence", "seasonal_naive"],
            "mean": [1.0, 2.0, 3.0, 4.0],
        }
    )
    rows = champion_rows(frame, {"a": "seasonal_naive", "b": "persistence"})
    assert rows["mean"].tolist() == [2.0, 3.0]
    assert set(rows["model"]) == {"champion"}


def test_by_default_every_series_gets_the_median_of_the_families(
    tracking: TrackingConfig, tmp_path: Path
) -> None:
    df = seasonal_frame()
    models = [Persistence(horizon=6), SeasonalNaive(season_length=DAY, horizon=6)]
    plan = replace(PLAN, champion="median")
    outcome = train(
        df, models, plan, tracking=tracking, model_name="demand", models_dir=tmp_path / "m"
    )
    assert outcome.selection == {
        "pool-a/demand_gpus": "median",
        "pool-b/demand_gpus": "median",
    }
    assert "median" in set(outcome.scores["model"])  # scored held out beside the families
    loaded = load_champion("demand", models_dir=tmp_path / "m", tracking=tracking)
    assert isinstance(loaded.model, ChampionForecaster)
    served = loaded.model.predict(6, (0.5, 0.9))
    recent = df.groupby("unique_id").tail(PLAN.max_train)
    alone = [m.fit(recent).predict(6, (0.5, 0.9)) for m in models]
    expected = (alone[0]["mean"].to_numpy() + alone[1]["mean"].to_numpy()) / 2
    np.testing.assert_allclose(served["mean"].to_numpy(), expected)
    assert set(served["family"]) == {"median"}
    assert outcome.selection_scores.empty  # the median selects nothing: no selection windows


def test_the_guarded_rule_serves_and_scores_the_guarded_choice_without_selection(
    tracking: TrackingConfig, tmp_path: Path
) -> None:
    df = seasonal_frame()
    # Seasonal naive beats persistence here but is no member of the guarded choice
    # (persistence, gbm, global_gbm): of these candidates it keeps persistence.
    models = [Persistence(horizon=6), SeasonalNaive(season_length=DAY, horizon=6)]
    plan = replace(PLAN, champion="guarded")
    outcome = train(
        df, models, plan, tracking=tracking, model_name="demand", models_dir=tmp_path / "m"
    )
    assert set(outcome.selection.values()) == {"guarded"}
    assert outcome.selection_scores.empty  # nothing selected: no selection windows fitted
    scores = outcome.scores.set_index(["unique_id", "model", "horizon"])["mase"]
    guarded = scores.xs("guarded", level="model")
    assert guarded.equals(scores.xs("persistence", level="model"))  # scored held out
    # Only the choice's members are backtested: the others' fits would only be scored.
    assert set(outcome.scores["model"]) == {"persistence", "guarded"}
    loaded = load_champion("demand", models_dir=tmp_path / "m", tracking=tracking)
    served = loaded.model.predict(6, (0.5, 0.9))
    recent = df.groupby("unique_id").tail(PLAN.max_train)
    alone = Persistence(horizon=6).fit(recent).predict(6, (0.5, 0.9))
    np.testing.assert_allclose(served["mean"].to_numpy(), alone["mean"].to_numpy())
    assert set(served["family"]) == {"guarded"}
    assert "calibration_mae" not in served.columns  # the members' errors are not served


def test_an_unfitted_copy_keeps_the_choices_and_serves_new_series_by_the_default() -> None:
    df = seasonal_frame()
    models = {"persistence": Persistence(horizon=6), "seasonal_naive": SeasonalNaive(DAY, 6)}
    chosen = ChampionForecaster({"pool-a/demand_gpus": "seasonal_naive"}, models, default=None)
    copy = chosen.unfitted().fit(df)
    assert copy.describe() == {
        "pool-a/demand_gpus": "seasonal_naive",
        "pool-b/demand_gpus": "persistence",  # saved without a default: persistence
    }
    by_default = ChampionForecaster({}, models, default="seasonal_naive").unfitted().fit(df)
    assert set(by_default.describe().values()) == {"seasonal_naive"}


def test_an_incumbent_of_the_same_families_is_scored_from_this_trainings_rows(
    tracking: TrackingConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import forecaster.training as training

    calls: list[list[str]] = []
    real_nested = training.nested_fleet_backtest

    def counting_nested(models, *args, **kwargs):  # type: ignore[no-untyped-def]
        # Training's own backtest and the incumbent's both go through it.
        calls.append([m.model_name for m in models])
        return real_nested(models, *args, **kwargs)

    monkeypatch.setattr(training, "nested_fleet_backtest", counting_nested)
    df, models_dir = seasonal_frame(), tmp_path / "m"
    plan = replace(PLAN, champion="median")
    models = [Persistence(horizon=6), SeasonalNaive(season_length=DAY, horizon=6)]
    train(df, models, plan, tracking=tracking, model_name="demand", models_dir=models_dir)
    same = train(df, models, plan, tracking=tracking, model_name="demand", models_dir=models_dir)
    assert calls == [["persistence", "seasonal_naive"]] * 2  # the incumbent was not refitted
    assert same.decision.point.challenger_score == same.decision.point.champion_score
    assert not same.promoted  # a tie keeps the champion
    monkeypatch.setattr(training, "same_estimator", lambda first, second: False)
    refitted = train(
        df, models, plan, tracking=tracking, model_name="demand", models_dir=models_dir
    )
    assert calls[-1] == ["champion"]
    assert refitted.decision.point.champion_score == pytest.approx(
        same.decision.point.champion_score
    )
    monkeypatch.undo()
    monkeypatch.setattr(training, "nested_fleet_backtest", counting_nested)

    other = [Persistence(horizon=6, window=48), SeasonalNaive(season_length=DAY, horizon=6)]
    train(df, other, plan, tracking=tracking, model_name="demand", models_dir=models_dir)
    assert calls[-1] == ["champion"]  # other hyperparameters: the incumbent is backtested


def test_a_guarded_training_still_compares_with_an_incumbent_of_unbacktested_families(
    tracking: TrackingConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The incumbent serves seasonal naive, which a guarded training no longer backtests
    # (no member): it must be backtested for the gate, not left out of the comparison.
    import forecaster.training as training

    calls: list[list[str]] = []
    real_nested = training.nested_fleet_backtest

    def counting_nested(models, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append([m.model_name for m in models])
        return real_nested(models, *args, **kwargs)

    monkeypatch.setattr(training, "nested_fleet_backtest", counting_nested)
    df, models_dir = seasonal_frame(), tmp_path / "m"
    models = [Persistence(horizon=6), SeasonalNaive(season_length=DAY, horizon=6)]
    first = train(df, models, PLAN, tracking=tracking, model_name="demand", models_dir=models_dir)
    assert set(first.selection.values()) == {"seasonal_naive"}
    guarded = replace(PLAN, champion="guarded")
    second = train(
        df, models, guarded, tracking=tracking, model_name="demand", models_dir=models_dir
    )
    assert calls[1] == ["persistence"]  # the guarded training's own backtest
    assert calls[2] == ["champion"]  # the incumbent, backtested on the held-out windows
    point = second.decision.point
    assert point.champion_score is not None
    assert point.challenger_score is not None
    assert point.champion_score < point.challenger_score  # seasonal naive is better here
    assert not second.promoted
    assert "point" in second.decision.failed


def test_same_estimator_compares_types_and_hyperparameters_nested() -> None:
    from forecaster.estimator import same_estimator
    from forecaster.models.combination import MedianCombination

    assert same_estimator(Persistence(horizon=6), Persistence(horizon=6))
    assert not same_estimator(Persistence(horizon=6), Persistence(horizon=12))
    assert not same_estimator(Persistence(horizon=6), SeasonalNaive(season_length=6, horizon=6))
    one = MedianCombination([Persistence(horizon=6), SeasonalNaive(DAY, 6)])
    assert same_estimator(one, MedianCombination([Persistence(horizon=6), SeasonalNaive(DAY, 6)]))
    assert not same_estimator(one, MedianCombination([Persistence(horizon=6)]))
    assert not same_estimator(one, None)


def test_a_training_with_a_joint_family_learns_its_fleet_once_and_serves_it(
    tracking: TrackingConfig, tmp_path: Path
) -> None:
    from forecaster.models.global_gbm import GlobalGradientBoosting

    df = seasonal_frame(days=16)
    joint = GlobalGradientBoosting(
        season_length=DAY, horizon=6, anchors=(1, 3, 6), max_iter=5, min_samples_leaf=10
    )
    models = [Persistence(horizon=6), SeasonalNaive(season_length=DAY, horizon=6), joint]
    plan = replace(PLAN, champion="median")
    outcome = train(
        df, models, plan, tracking=tracking, model_name="demand", models_dir=tmp_path / "m"
    )
    # Held-out windows of every family, the joint one included, were scored.
    assert "global_gbm" in set(outcome.scores["model"])
    # The deployed champion's median members share one fleet model learnt from both series.
    fleets = set()
    for fitted in outcome.champion.models_.values():
        for members in fitted.fitted_.values():  # type: ignore[attr-defined]
            fleets |= {m.fleet_ for m in members if isinstance(m, GlobalGradientBoosting)}
    assert len(fleets) == 1
    assert next(iter(fleets)).series == ("pool-a/demand_gpus", "pool-b/demand_gpus")
    served = load_champion("demand", models_dir=tmp_path / "m", tracking=tracking).model
    assert isinstance(served, ChampionForecaster)
    out = served.predict(6, levels=(0.5, 0.9))
    assert len(out) == 12
    assert (out["q0.9"] >= out["q0.5"] - 1e-9).all()


def test_the_peak_model_is_registered_with_the_champion_and_loaded_with_it(
    tracking: TrackingConfig, tmp_path: Path
) -> None:
    plan = replace(PLAN, peak_leads=(2,), peak_levels=(0.9,), max_train=None)
    models_dir = tmp_path / "models"
    outcome = train(
        seasonal_frame(),
        [Persistence(horizon=6)],
        plan,
        tracking=tracking,
        model_name="demand",
        models_dir=models_dir,
    )

    assert outcome.peak.model is not None
    for source in ("registry", "last_known_good"):
        if source == "last_known_good":
            tracking = replace(tracking, tracking_uri=f"sqlite:///{tmp_path}/elsewhere.db")
        loaded = load_champion("demand", models_dir=models_dir, tracking=tracking)
        assert loaded.source == source
        assert loaded.peak is not None
        made = loaded.peak.predict_peak(seasonal_frame())
        assert set(made["unique_id"]) == {"pool-a/demand_gpus", "pool-b/demand_gpus"}
        assert list(made["lead"].unique()) == [2]


def test_too_little_history_for_a_peak_model_still_registers_the_champion(
    tracking: TrackingConfig, tmp_path: Path
) -> None:
    plan = replace(PLAN, peak_leads=(2,), peak_levels=(0.9,))
    outcome = train(
        seasonal_frame(days=6),  # 288 rows: fewer realised peaks than two leaves need
        [Persistence(horizon=6)],
        plan,
        tracking=tracking,
        model_name="demand",
        models_dir=tmp_path / "models",
    )

    assert outcome.promoted
    assert outcome.peak.model is None
    assert "realised lead-2 peaks" in outcome.peak.reason
    loaded = load_champion("demand", models_dir=tmp_path / "models", tracking=tracking)
    assert loaded.peak is None


PEAK_PLAN = replace(
    PLAN, peak_leads=(2,), peak_levels=(0.5, 0.9), served_levels=(0.9,), max_train=None
)
DEGRADED = {"clip_scaled": 0.0}
"""Training targets clipped to no headroom at all: the bound is persistence's, at any level."""


def test_a_degraded_peak_model_is_refused_and_the_run_names_the_failed_checks(
    tracking: TrackingConfig, tmp_path: Path
) -> None:
    df, models_dir = seasonal_frame(), tmp_path / "models"
    first = train(
        df,
        [Persistence(horizon=6)],
        PEAK_PLAN,
        tracking=tracking,
        model_name="demand",
        models_dir=models_dir,
    )
    assert first.promoted, first.decision.reason
    assert first.decision.check("peak_vs_buffer").status == "passed"
    assert first.decision.check("peak_vs_incumbent").status == "skipped"  # no champion yet
    better_point = [Persistence(horizon=6), SeasonalNaive(season_length=DAY, horizon=6)]

    degraded = train(
        df,
        better_point,
        replace(PEAK_PLAN, peak_params=DEGRADED),
        tracking=tracking,
        model_name="demand",
        models_dir=models_dir,
    )

    decision = degraded.decision
    assert decision.check("point").status == "passed"  # only the peak model holds it back
    assert decision.failed == ("peak_vs_buffer", "peak_vs_incumbent")
    assert not degraded.promoted
    assert champion_version("demand", tracking=tracking) == first.version
    buffer = decision.check("peak_vs_buffer")
    assert buffer.challenger is not None
    assert buffer.reference is not None
    assert buffer.challenger > buffer.reference
    assert "peak_vs_buffer" in decision.reason
    assert "peak_vs_incumbent" in decision.reason
    logged = MlflowClient(tracking_uri=tracking.tracking_uri).get_run(degraded.run_id).data
    assert logged.tags["foresight.gate.failed"] == "peak_vs_buffer,peak_vs_incumbent"
    assert logged.tags["foresight.gate.peak_vs_incumbent"].startswith("failed: ")
    assert logged.metrics["gate/promote"] == 0.0
    assert logged.metrics["gate/point"] == 1.0
    assert logged.metrics["gate/peak_vs_buffer"] == 0.0
    assert (
        logged.metrics["heldout/peak_pinball/challenger/lead2/q0.9"]
        > logged.metrics["heldout/peak_pinball/buffer/lead2/q0.9"]
    )
    assert "heldout/peak_pinball/incumbent/served" in logged.metrics

    # The same training with the peak model as it was: promoted, so the peak checks
    # (not the point forecasts) refused the degraded one.
    kept = train(
        df,
        better_point,
        PEAK_PLAN,
        tracking=tracking,
        model_name="demand",
        models_dir=models_dir,
    )
    assert kept.promoted, kept.decision.reason
    assert kept.decision.check("peak_vs_incumbent").status == "passed"  # the same model: a tie


def test_the_champions_mase_relative_to_persistence_is_logged_beside_the_ratio_of_means(
    tracking: TrackingConfig, tmp_path: Path
) -> None:
    outcome = train(
        seasonal_frame(),
        [Persistence(horizon=6), SeasonalNaive(season_length=DAY, horizon=6)],
        PLAN,
        tracking=tracking,
        model_name="demand",
        models_dir=tmp_path / "models",
    )

    relative = outcome.decision.relative
    assert relative is not None
    assert relative.cells == 4  # 2 series x 2 horizons
    assert 0.0 < relative.geomean < 1.0  # seasonal naive beats persistence on a daily cycle
    logged = MlflowClient(tracking_uri=tracking.tracking_uri).get_run(outcome.run_id).data
    assert logged.metrics["heldout/mase_vs_persistence/geomean"] == pytest.approx(relative.geomean)
    assert logged.metrics["heldout/mase_vs_persistence/ratio_of_means"] == pytest.approx(
        relative.ratio_of_means
    )
    assert outcome.decision.check("point_guard").status == "passed"
    assert outcome.decision.check("peak_vs_buffer").status == "skipped"  # no pool lead time
