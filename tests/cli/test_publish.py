"""``foresight publish``: --apply is refused in forecast-only mode, naming the setting."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli import app


def test_apply_is_refused_while_forecast_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FORESIGHT_SERVICE__FORECAST_ONLY", raising=False)
    config = tmp_path / "settings.yaml"
    config.write_text(f"root: {tmp_path}\n")

    result = CliRunner().invoke(app, ["publish", "--apply", "--config", str(config)])

    assert result.exit_code == 2
    assert "--apply refused" in result.output
    assert "FORESIGHT_SERVICE__FORECAST_ONLY=false" in result.output
    assert not (tmp_path / "data").exists()


def test_an_unknown_clock_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["publish", "--clock", "tomorrow"])

    assert result.exit_code == 2
    assert "--clock must be 'system' or 'replay'" in result.output
