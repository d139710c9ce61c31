"""The API's settings groups: same YAML keys and FORESIGHT_* variables, on top of the base."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from api.settings import AppSettings, load_app_settings
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


DEPLOYMENT = """\
horizon: 12
scheduler:
  workers: 3
service:
  forecast_only: false
  max_live_mase: 1.5
publish:
  namespace: autoscaling
  webhook_urls: ["https://hooks.example/a"]
callchain:
  window_seconds: 120
  gpu_idle_below: 25
"""


def test_a_deployment_file_loads_every_group_as_app_settings(tmp_path: Path) -> None:
    config = write_yaml(tmp_path / "foresight.yaml", DEPLOYMENT)

    settings = load_app_settings(config, root=tmp_path)

    assert isinstance(settings, AppSettings)
    assert (settings.horizon, settings.scheduler.workers) == (12, 3)
    assert settings.service.forecast_only is False
    assert settings.service.max_live_mase == 1.5
    assert settings.publish.namespace == "autoscaling"
    assert settings.publish.webhook_urls == ("https://hooks.example/a",)
    assert (settings.callchain.window_seconds, settings.callchain.gpu_idle_below) == (120, 25)
    assert settings.root == tmp_path.resolve()


def test_the_api_groups_read_their_foresight_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORESIGHT_SERVICE__FORECAST_ONLY", "false")
    monkeypatch.setenv("FORESIGHT_PUBLISH__WEBHOOK_URLS", '["https://hooks.example/b"]')
    monkeypatch.setenv("FORESIGHT_CALLCHAIN__MAX_SERVICES", "7")

    settings = load_app_settings(root=tmp_path)

    assert settings.service.forecast_only is False
    assert settings.publish.webhook_urls == ("https://hooks.example/b",)
    assert settings.callchain.max_services == 7
    # The pipelines' own settings leave the API's variables to the API.
    assert isinstance(load_settings(root=tmp_path), Settings)


def test_the_pipelines_settings_alone_refuse_the_api_groups(tmp_path: Path) -> None:
    config = write_yaml(tmp_path / "foresight.yaml", DEPLOYMENT)

    with pytest.raises(ConfigError, match="unknown setting 'service'"):
        load_settings(config, root=tmp_path)


def test_an_unknown_group_is_refused_naming_the_api_groups_too(tmp_path: Path) -> None:
    config = write_yaml(tmp_path / "foresight.yaml", "servce:\n  forecast_only: false\n")

    with pytest.raises(ConfigError) as caught:
        load_app_settings(config, root=tmp_path)

    message = str(caught.value)
    assert "unknown setting 'servce'" in message
    for known in ("service", "publish", "callchain", "horizon"):
        assert known in message


def test_a_bad_api_value_names_its_variable_and_what_to_set(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_app_settings(root=tmp_path, publish={"grpc_expander_budget_s": 9})

    message = str(caught.value)
    assert "setting publish.grpc_expander_budget_s" in message
    assert "FORESIGHT_PUBLISH__GRPC_EXPANDER_BUDGET_S" in message
    assert "cluster-autoscaler's deadline" in message


def test_the_service_refresh_interval_is_positive(tmp_path: Path) -> None:
    assert load_app_settings(root=tmp_path).service.refresh_seconds == 5.0
    with pytest.raises(ConfigError, match=r"service\.refresh_seconds"):
        load_app_settings(root=tmp_path, service={"refresh_seconds": 0})
