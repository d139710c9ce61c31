"""serve tells the app where the MLflow UI it starts is, for the dashboard's model link."""

from __future__ import annotations

from pathlib import Path

from api.settings import load_app_settings
from cli.serve import local_ui_address


def test_the_local_ui_started_by_serve_is_passed_on(tmp_path: Path) -> None:
    settings = load_app_settings(root=tmp_path)
    assert local_ui_address(settings, "127.0.0.1", 5055) == "http://127.0.0.1:5055"
    assert local_ui_address(settings, "127.0.0.1", None) is None


def test_a_tracking_server_is_its_own_ui(tmp_path: Path) -> None:
    settings = load_app_settings(root=tmp_path, mlflow_tracking_uri="http://mlflow.internal:5000")
    # The app links the server's own address (api.dashboard.status.mlflow_base).
    assert local_ui_address(settings, "127.0.0.1", 5055) is None
