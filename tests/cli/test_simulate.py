"""``foresight simulate`` on the committed sample (short spans) and on a plain file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from cli import app

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample" / "metrics.csv.gz"
FAST = ["--model", "persistence", "--warmup", "1d", "--span", "1d"]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FORESIGHT_POOLS_FILE", str(ROOT / "data" / "sample" / "pools.yaml"))
    return tmp_path


def test_simulate_the_sample_pool_with_a_sweep_and_mlflow(workdir: Path) -> None:
    out = workdir / "sim"
    result = CliRunner().invoke(
        app,
        [
            "simulate",
            "--data",
            str(SAMPLE),
            "--pool",
            "a100-train",
            *FAST,
            "--sweep",
            "--sweep-levels",
            "0.5,0.9,0.99",
            "--output-dir",
            str(out),
            "--mlflow",
        ],
    )
    assert result.exit_code == 0, result.output
    for column in ("GPU-h", "idle", "waiting", "p95 wait", "scale", "cost"):
        assert column in result.output
    assert {p.name for p in out.iterdir()} == {
        "a100-train.json",
        "a100-train.png",
        "a100-train_frontier.png",
    }
    for png in ("a100-train.png", "a100-train_frontier.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    payload = json.loads((out / "a100-train.json").read_text())
    assert list(payload["runs"]) == ["reactive", "static", "foresight", "oracle"]
    assert payload["replay_steps"] == 288
    assert payload["warmup_steps"] == 288
    assert payload["pool"]["quantile"] == 0.9
    assert payload["pool"]["gpus_per_node"] == 8
    assert [row["quantile"] for row in payload["sweep"]] == [0.5, 0.9, 0.99]
    # The sweep at the pool's own quantile is the foresight run itself.
    assert payload["sweep"][1]["gpu_hours_provisioned"] == pytest.approx(
        payload["runs"]["foresight"]["gpu_hours_provisioned"]
    )
    runs = payload["runs"]
    assert runs["oracle"]["waiting_gpu_hours"] <= runs["reactive"]["waiting_gpu_hours"]
    assert runs["oracle"]["gpu_hours_provisioned"] <= runs["foresight"]["gpu_hours_provisioned"]

    uri = f"sqlite:///{workdir / 'models' / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("foresight")
    assert experiment is not None
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.run_name == "simulate-a100-train"
    assert run.data.metrics["foresight/waiting_gpu_hours"] == pytest.approx(
        runs["foresight"]["waiting_gpu_hours"]
    )
    assert "foresight_q0.99/gpu_hours_provisioned" in run.data.metrics
    assert "reference-seasonal_k2/waiting_gpu_hours" in run.data.metrics
    # Equal cost: every policy's best gap at each budget, Foresight against each other.
    assert "Best gap closed at cost" in result.output
    assert "unmet demand carried" in result.output
    assert payload["accounting"]["unmet_demand"] == "carried"
    equal = payload["equal_cost"]
    assert set(equal["best_gap_at_cost"]) >= {"foresight", "reference", "reference-seasonal"}
    assert set(equal["best_gap_at_cost"]["foresight"]) == {"<=1.02", "<=1.05", "<=1.10"}
    assert equal["against"]["reference"]["beaten"][1] == len(
        payload["reference_sweeps"]["reference"]
    )


def test_simulate_a_plain_file_with_a_lead_and_quantile(workdir: Path) -> None:
    rng = np.random.default_rng(3)
    ds = pd.date_range("2024-01-01", periods=3 * 144, freq="10min", tz="UTC")
    pd.DataFrame(
        {
            "timestamp": ds.tz_localize(None),
            "allocated_gpus": rng.integers(40, 80, len(ds)),
            "pending_gpus": rng.integers(0, 20, len(ds)),
        }
    ).to_csv(workdir / "cluster.csv", index=False)
    result = CliRunner().invoke(
        app,
        [
            "simulate",
            "--data",
            "cluster.csv",
            "--pool",
            "cluster",
            "--lead",
            "20min",
            "--quantile",
            "0.8",
            "--policies",
            "reactive,reactive-spread,reference,foresight,oracle",
            "--model",
            "persistence",
            "--warmup",
            "1d",
            "--accounting",
            "no-carry",
            "--output-dir",
            "out",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "not in" in result.output  # default settings for an unconfigured pool
    payload = json.loads((workdir / "out" / "cluster.json").read_text())
    assert payload["pool"]["lead_time"] == "PT20M"
    assert payload["pool"]["quantile"] == 0.8
    assert payload["accounting"]["unmet_demand"] == "dropped"
    assert payload["runs"]["reactive"]["unserved_gpu_hours"] == 0.0  # nothing carried to the end
    assert list(payload["runs"]) == [
        "reactive",
        "reactive-spread",
        "foresight",
        "oracle",
        "reference",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--pool", "nope"], "no series 'nope/demand_gpus'"),
        (["--pool", "a100-train", "--policies", "reactive,magic"], "unknown policies"),
        (["--pool", "a100-train", "--lead", "soon"], "--lead"),
        (["--pool", "a100-train", "--lead", "10"], "--lead '10' needs a unit: e.g. 10min"),
        (["--pool", "a100-train", "--lead", "-5min"], "--lead must be positive"),
        (["--pool", "a100-train", "--quantile", "1"], "--quantile must be in (0, 1)"),
        (["--pool", "a100-train", "--model", "oracle"], "--model"),
        (["--pool", "a100-train", "--accounting", "sometimes"], "--accounting"),
    ],
)
def test_mistakes_get_a_clear_message(workdir: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["simulate", "--data", str(SAMPLE), *args, *FAST[2:]])
    assert result.exit_code == 2, result.output
    assert message in result.output.replace("\n", " ")


def test_simulate_with_the_peak_forecaster_sweeps_its_levels(workdir: Path) -> None:
    out = workdir / "sim"
    args = ["--data", str(SAMPLE), "--pool", "a100-train", "--model", "peak"]
    args += ["--warmup", "3d", "--span", "1d", "--sweep", "--sweep-levels", "0.5,0.95"]
    args += ["--policies", "reactive,foresight,oracle,reference", "--output-dir", str(out)]
    result = CliRunner().invoke(app, ["simulate", *args])
    assert result.exit_code == 0, result.output
    payload = json.loads((out / "a100-train.json").read_text())
    assert payload["forecaster"] == "peak"
    assert payload["fits"]  # the daily fits of the global model, before each replayed day
    sweep = sorted(payload["sweep"], key=lambda row: row["quantile"])
    assert [row["quantile"] for row in sweep] == [0.5, 0.95]
    assert sweep[0]["waiting_gpu_hours"] >= sweep[1]["waiting_gpu_hours"]
    assert sweep[0]["gpu_hours_provisioned"] < sweep[1]["gpu_hours_provisioned"]


def test_the_light_option_checks_name_what_the_replay_accepts() -> None:
    from cli import simulate as options
    from pipelines.simulate.champion import CHAMPION
    from pipelines.simulate.compare import POLICY_NAMES

    assert options.POLICY_NAMES == POLICY_NAMES
    assert options.CHAMPION == CHAMPION


def test_help_and_option_errors_load_no_replay_library() -> None:
    # --help and a bad option answer at once: nothing of the replay or the models loads.
    script = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from cli import app\n"
        "for args in (['simulate', '--help'], ['simulate', '--pool', 'a', '--lead', '10']):\n"
        "    CliRunner().invoke(app, args)\n"
        "heavy = sorted(m for m in ('sklearn', 'mlflow', 'pipelines.simulate', "
        "'cli.simulate_run') if m in sys.modules)\n"
        "print(heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
