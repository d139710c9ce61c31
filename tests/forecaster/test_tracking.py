"""Tests of MLflow run tracking and the pyfunc wrapper, against a local sqlite store."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient

from forecaster.champion import ChampionForecaster
from forecaster.exceptions import DataValidationError, TrackingError
from forecaster.models.naive import Persistence
from forecaster.pyfunc import (
    ForecastPyfunc,
    default_input_example,
    forecast_requests,
    load_bundle,
)
from forecaster.registry import download_model
from forecaster.tracking import (
    TrackingConfig,
    describe_pools,
    ensure_experiment,
    metric_key,
    redact_uri,
    start_training_run,
    summary_metrics,
)

LEVELS = (0.5, 0.9)


@pytest.fixture(scope="module")
def fitted() -> Persistence:
    ds = pd.date_range("2024-01-01", periods=48, freq="10min", tz="UTC")
    rng = np.random.default_rng(7)
    frame = pd.concat(
        pd.DataFrame({"unique_id": uid, "ds": ds, "y": rng.gamma(2.0, 3.0, len(ds))})
        for uid in ("a100/queue_gpus", "a100/allocated_gpus", "h100/queue_gpus")
    )
    return Persistence(horizon=6, window=24).fit(frame)


def _scores() -> pd.DataFrame:
    rows = []
    for uid in ("a100/queue_gpus", "h100/queue_gpus"):
        for model, base in (("persistence", 1.0), ("gbm", 0.5)):
            for horizon, scale in (("10min", 1.0), ("1h", 2.0)):
                rows.append(
                    {
                        "unique_id": uid,
                        "model": model,
                        "horizon": horizon,
                        "mase": base * scale + (0.2 if uid.startswith("h100") else 0.0),
                        "smape": 10.0 * base,
                        "pinball_q0.9": 0.3 * base,
                        "coverage_q0.9": 0.9,
                        "n_windows": 4,
                    }
                )
    return pd.DataFrame(rows)


def test_metric_key_follows_mlflow_key_rules() -> None:
    assert metric_key("coverage_q0.9", "gbm", "10min") == "coverage_q0.9/gbm/10min"
    assert metric_key("mase", "ets(add)", "1h") == "mase/ets_add_/1h"
    assert metric_key("mase", "..", "") == "mase/_/_"


def test_summary_metrics_average_over_series_and_champion_rows() -> None:
    champions = {"a100/queue_gpus": "gbm", "h100/queue_gpus": "persistence"}
    metrics = summary_metrics(_scores(), champions)
    assert metrics["mase/persistence/10min"] == pytest.approx(1.1)
    assert metrics["mase/gbm/1h"] == pytest.approx(1.1)
    # champion: a100 via gbm (0.5), h100 via persistence (1.2)
    assert metrics["mase/champion/10min"] == pytest.approx(0.85)
    assert "n_windows/gbm/1h" not in metrics
    assert len(metrics) == 4 * 3 * 2  # metric columns x (2 models + champion) x horizons


def test_summary_metrics_skip_non_finite_values() -> None:
    scores = _scores()
    scores.loc[scores["unique_id"] == "a100/queue_gpus", "mase"] = np.inf
    metrics = summary_metrics(scores)
    assert metrics["mase/persistence/10min"] == pytest.approx(1.2)


def test_training_run_logs_params_metrics_artifacts_and_tags(store: TrackingConfig) -> None:
    champions = {"a100/queue_gpus": "gbm", "h100/queue_gpus": "persistence"}
    backtest = pd.DataFrame({"unique_id": ["a100/queue_gpus"], "ds": ["2024"], "mean": [1.0]})
    with start_training_run(store, run_name="train-1", tags={"foresight.trigger": "test"}) as run:
        run.log_params({"horizon": 36, "levels": LEVELS})
        run.log_metrics(summary_metrics(_scores(), champions))
        run.log_frame("scores.csv", _scores())
        run.log_frame("backtest.parquet", backtest)
        run.log_champions(champions)
        run_id = run.run_id

    client = MlflowClient(tracking_uri=store.tracking_uri)
    logged = client.get_run(run_id)
    assert logged.info.status == "FINISHED"
    assert logged.info.run_name == "train-1"
    assert logged.data.params == {"horizon": "36", "levels": "(0.5, 0.9)"}
    assert logged.data.metrics["mase/champion/1h"] == pytest.approx(1.6)
    tags = logged.data.tags
    assert tags["foresight.kind"] == "train"
    assert tags["foresight.trigger"] == "test"
    assert tags["foresight.series_count"] == "2"
    assert tags["foresight.pools"] == "a100,h100"
    assert json.loads(tags["foresight.champion_wins"]) == {"gbm": 1, "persistence": 1}
    names = {a.path for a in client.list_artifacts(run_id)}
    assert {"scores.csv", "backtest.parquet", "champions.json"} <= names
    # Artifacts live under the experiment's configured location, next to the db.
    assert logged.info.artifact_uri.startswith(
        Path(store.artifact_location or "").resolve().as_uri()
    ) or logged.info.artifact_uri.startswith(str(store.artifact_location))
    scores_path = mlflow.artifacts.download_artifacts(
        run_id=run_id, artifact_path="scores.csv", tracking_uri=store.tracking_uri
    )
    assert len(pd.read_csv(scores_path)) == len(_scores())


def test_failed_block_marks_run_failed_and_restores_tracking_uri(store: TrackingConfig) -> None:
    before = mlflow.get_tracking_uri()
    run_ids: list[str] = []

    def train() -> None:
        with start_training_run(store, run_name="doomed") as run:
            run_ids.append(run.run_id)
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        train()
    (run_id,) = run_ids
    client = MlflowClient(tracking_uri=store.tracking_uri)
    assert client.get_run(run_id).info.status == "FAILED"
    assert mlflow.get_tracking_uri() == before
    assert mlflow.active_run() is None


def test_log_frame_rejects_unknown_format(store: TrackingConfig) -> None:
    with (
        start_training_run(store, run_name="formats") as run,
        pytest.raises(ValueError, match="xlsx"),
    ):
        run.log_frame("backtest.xlsx", pd.DataFrame({"a": [1]}))


def test_unreachable_server_raises_tracking_error_without_credentials(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    config = TrackingConfig(tracking_uri="http://bob:s3cret@127.0.0.1:9", experiment_name="x")
    with pytest.raises(TrackingError) as caught:
        ensure_experiment(config)
    message = str(caught.value)
    assert "http://127.0.0.1:9" in message
    assert "s3cret" not in message
    assert "bob" not in message


def test_redact_uri_strips_userinfo_and_query() -> None:
    assert redact_uri("postgresql://u:p@db:5432/mlflow?sslmode=x") == "postgresql://db:5432/mlflow"
    assert redact_uri("sqlite:///models/mlflow.db") == "sqlite:///models/mlflow.db"


def test_pyfunc_round_trip_equals_model_predict(
    store: TrackingConfig, fitted: Persistence, tmp_path: Path
) -> None:
    with start_training_run(store, run_name="pyfunc") as run:
        info = run.log_forecaster(fitted, levels=LEVELS)
    inputs = info.signature.inputs.input_names()
    outputs = info.signature.outputs.input_names()
    assert inputs == ["unique_id", "h"]
    assert outputs == ["unique_id", "ds", "step", "model", "mean", "q0.5", "q0.9"]
    local = download_model(info.model_uri, tmp_path, tracking=store)
    pyfunc = mlflow.pyfunc.load_model(local)
    ids = sorted(fitted.fits_)
    got = pyfunc.predict(pd.DataFrame({"unique_id": ids, "h": [6] * len(ids)}))
    pd.testing.assert_frame_equal(got, fitted.predict(6, LEVELS))
    assert isinstance(pyfunc.unwrap_python_model(), ForecastPyfunc)
    assert isinstance(load_bundle(local)[0], Persistence)
    with pytest.raises(DataValidationError, match="no series"):
        pyfunc.predict(pd.DataFrame({"unique_id": ["nope/queue_gpus"], "h": [1]}))


def test_forecast_requests_mixes_horizons_and_validates(fitted: Persistence) -> None:
    requests = pd.DataFrame({"unique_id": ["h100/queue_gpus", "a100/queue_gpus"], "h": [2, 4]})
    out = forecast_requests(fitted, requests, LEVELS)
    assert out.groupby("unique_id")["step"].max().to_dict() == {
        "a100/queue_gpus": 4,
        "h100/queue_gpus": 2,
    }
    expected = fitted.predict(4, LEVELS)
    pd.testing.assert_frame_equal(
        out[out["unique_id"] == "a100/queue_gpus"].reset_index(drop=True),
        expected[expected["unique_id"] == "a100/queue_gpus"].reset_index(drop=True),
    )
    bad = [
        pd.DataFrame({"unique_id": ["a100/queue_gpus"]}),
        pd.DataFrame({"unique_id": ["a100/queue_gpus"], "h": [0]}),
        pd.DataFrame({"unique_id": ["a100/queue_gpus"] * 2, "h": [1, 1]}),
        pd.DataFrame({"unique_id": [], "h": []}),
    ]
    for frame in bad:
        with pytest.raises(DataValidationError):
            forecast_requests(fitted, frame, LEVELS)


def test_describe_pools_lists_them_all_or_says_how_many_more() -> None:
    ids = [f"pool-{i:04d}/queue_gpus" for i in range(1000)] + ["pool-0001/gpu_util"]
    assert describe_pools(ids[:3]) == "pool-0000,pool-0001,pool-0002"
    short = describe_pools(ids, max_chars=60)
    assert len(short) <= 60
    assert short.startswith("pool-0000,pool-0001,")
    shown = short.count("pool-")
    assert short.endswith(f",... (+{1000 - shown} of 1000)")
    assert describe_pools(ids[:3], max_chars=60) == "pool-0000,pool-0001,pool-0002"


def test_forecast_requests_of_a_champion_forecast_only_the_requested_series() -> None:
    ds = pd.date_range("2024-03-01", periods=40, freq="10min", tz="UTC")
    df = pd.concat(
        [pd.DataFrame({"unique_id": f"p{i}/y", "ds": ds, "y": float(i)}) for i in range(3)],
        ignore_index=True,
    )
    champion = ChampionForecaster({}, {"persistence": Persistence(horizon=4)}, "persistence")
    champion.fit(df)

    def refuse(h: int, levels: object = ()) -> pd.DataFrame:
        raise AssertionError("an unrequested series was forecast")

    expected = champion.predict(2, LEVELS)
    champion.models_["p0/y"].predict = refuse  # type: ignore[method-assign]
    requests = pd.DataFrame({"unique_id": ["p2/y", "p1/y"], "h": [2, 2]})
    out = forecast_requests(champion, requests, LEVELS)
    want = expected[expected["unique_id"].isin(["p1/y", "p2/y"])].reset_index(drop=True)
    pd.testing.assert_frame_equal(out, want)
    assert default_input_example(champion, LEVELS, n=2)["unique_id"].tolist() == ["p0/y", "p1/y"]
    with pytest.raises(DataValidationError, match=r"no series \['zz/y'\]; it knows 3 series"):
        forecast_requests(champion, pd.DataFrame({"unique_id": ["zz/y"], "h": [1]}), LEVELS)
