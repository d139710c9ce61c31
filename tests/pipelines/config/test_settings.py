"""Settings: defaults, source priority (overrides > env > YAML), path resolution, errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from forecaster.exceptions import ConfigError
from pipelines.config.settings import Settings, load_settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep a developer's own FORESIGHT_* variables out of the tests."""
    for name in list(os.environ):
        if name.upper().startswith("FORESIGHT_"):
            monkeypatch.delenv(name)


def write_yaml(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_are_the_embedded_local_setup(tmp_path: Path) -> None:
    settings = load_settings(root=tmp_path)

    assert settings.root == tmp_path.resolve()
    root = settings.root
    assert settings.data_dir == root / "data"
    assert settings.sample_dir == root / "data" / "sample"
    assert settings.models_dir == root / "models"
    assert settings.pools_file == root / "data" / "sample" / "pools.yaml"
    assert settings.mlflow_tracking_uri == f"sqlite:///{root}/models/mlflow.db"
    assert settings.mlflow_artifacts_dir == root / "models" / "mlartifacts"
    assert settings.store_url == f"sqlite:///{root}/data/foresight.db"
    assert settings.experiment_name == "foresight"
    assert settings.registered_model_name == "foresight-demand"
    assert settings.levels == (0.5, 0.9, 0.95)
    assert settings.horizon == 36
    assert settings.backtest_windows == 8
    assert settings.max_train_days == 28
    assert settings.log_level == "INFO"
    assert settings.webhook_secret is None


def test_root_defaults_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert load_settings().data_dir == tmp_path.resolve() / "data"


def test_mlflow_and_store_locations_follow_the_directories(tmp_path: Path) -> None:
    settings = load_settings(root=tmp_path, models_dir="m", data_dir="/srv/foresight")

    assert settings.mlflow_tracking_uri == f"sqlite:///{tmp_path.resolve()}/m/mlflow.db"
    assert settings.mlflow_artifacts_dir == tmp_path.resolve() / "m" / "mlartifacts"
    assert settings.store_url == "sqlite:////srv/foresight/foresight.db"


def test_explicit_urls_are_kept_and_relative_sqlite_is_pinned_to_root(tmp_path: Path) -> None:
    settings = load_settings(
        root=tmp_path,
        mlflow_tracking_uri="http://mlflow:5000",
        store_url="sqlite:///state/x.db",
    )

    assert settings.mlflow_tracking_uri == "http://mlflow:5000"
    assert settings.store_url == f"sqlite:///{tmp_path.resolve()}/state/x.db"
    pg = "postgresql+psycopg://u@db/foresight"
    assert load_settings(root=tmp_path, store_url=pg).store_url == pg


def test_env_overrides_yaml_and_overrides_beat_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_yaml(
        tmp_path / "foresight.yaml",
        "horizon: 48\nexperiment_name: from-yaml\nbacktest_windows: 3\n",
    )
    monkeypatch.setenv("FORESIGHT_HORIZON", "12")
    monkeypatch.setenv("FORESIGHT_BACKTEST_WINDOWS", "5")

    settings = load_settings(config, root=tmp_path, backtest_windows=7)

    assert settings.horizon == 12  # env beats YAML
    assert settings.experiment_name == "from-yaml"  # YAML beats the default
    assert settings.backtest_windows == 7  # an override beats env


def test_config_file_applies_only_to_its_own_call(tmp_path: Path) -> None:
    config = write_yaml(tmp_path / "foresight.yaml", "horizon: 48\n")

    assert load_settings(config, root=tmp_path).horizon == 48
    assert load_settings(root=tmp_path).horizon == 36


def test_env_parses_lists_levels_and_log_level(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORESIGHT_LEVELS", "[0.9, 0.5, 0.9]")
    monkeypatch.setenv("FORESIGHT_LOG_LEVEL", "debug")
    monkeypatch.setenv("FORESIGHT_MODELS_DIR", "elsewhere")

    settings = load_settings(root=tmp_path)

    assert settings.levels == (0.5, 0.9)
    assert settings.log_level == "DEBUG"
    assert settings.models_dir == tmp_path.resolve() / "elsewhere"


def test_secrets_are_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORESIGHT_WEBHOOK_SECRET", "s3cret-value")

    settings = load_settings(root=tmp_path)

    assert isinstance(settings.webhook_secret, SecretStr)
    assert settings.webhook_secret.get_secret_value() == "s3cret-value"
    assert "s3cret-value" not in repr(settings)


def test_settings_are_immutable(tmp_path: Path) -> None:
    settings = load_settings(root=tmp_path)
    with pytest.raises(ValidationError):
        settings.horizon = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"horizon": 0}, "horizon"),
        ({"backtest_windows": -1}, "backtest_windows"),
        ({"max_train_days": "many"}, "max_train_days"),
        ({"levels": (0.5, 1.5)}, "levels"),
        ({"log_level": "LOUD"}, "log_level"),
        ({"experiment_name": ""}, "experiment_name"),
    ],
)
def test_bad_values_raise_config_error_naming_field_and_fix(
    tmp_path: Path, overrides: dict[str, object], field: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(root=tmp_path, **overrides)

    message = str(caught.value)
    assert f"setting {field}:" in message
    assert f"FORESIGHT_{field.upper()}" in message  # the fix: where to set it
    description = Settings.model_fields[field].description
    assert description is not None
    assert description.split("(")[0].strip() in message  # and what to set it to


def test_bad_env_value_names_the_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORESIGHT_HORIZON", "soon")
    with pytest.raises(ConfigError, match=r"setting horizon:.*'soon'"):
        load_settings(root=tmp_path)


def test_bad_env_json_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORESIGHT_LEVELS", "0.5,0.9")
    with pytest.raises(ConfigError, match=r"levels.*must be JSON"):
        load_settings(root=tmp_path)


def test_secret_values_are_not_echoed_in_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(root=tmp_path, webhook_secret=12345)
    assert "12345" not in str(caught.value)
    assert "setting webhook_secret" in str(caught.value)


def test_unknown_yaml_key_lists_the_known_ones(tmp_path: Path) -> None:
    config = write_yaml(tmp_path / "foresight.yaml", "horizn: 12\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(config, root=tmp_path)
    message = str(caught.value)
    assert "unknown setting 'horizn'" in message
    assert "horizon" in message
    assert str(config) in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, "does not exist"),
        ("horizon: [1\n", "not valid YAML"),
        ("- horizon\n", "must hold a mapping"),
    ],
)
def test_unusable_config_file_is_a_config_error(
    tmp_path: Path, text: str | None, expected: str
) -> None:
    path = tmp_path / "foresight.yaml"
    if text is not None:
        write_yaml(path, text)
    with pytest.raises(ConfigError, match=expected):
        load_settings(path, root=tmp_path)


def test_empty_config_file_means_defaults(tmp_path: Path) -> None:
    config = write_yaml(tmp_path / "foresight.yaml", "# nothing set yet\n")
    assert load_settings(config, root=tmp_path) == load_settings(root=tmp_path)


def test_a_rule_across_settings_is_reported_without_a_made_up_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FORESIGHT_BACKTEST_WINDOWS", "3")
    monkeypatch.setenv("FORESIGHT_HELDOUT_WINDOWS", "3")
    with pytest.raises(ConfigError) as raised:
        load_settings()
    message = str(raised.value)
    assert "heldout_windows (3) must be fewer than backtest_windows (3)" in message
    assert "set FORESIGHT_ or" not in message
