"""Which candidate families a training backtests: the model_set setting and --fast."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from pipelines.config.settings import Settings
from pipelines.jobs.history import candidate_models

STEP = pd.Timedelta(minutes=5)
FULL = ["persistence", "seasonal_naive", "ets", "mstl", "gbm", "global_gbm"]
FAST = ["persistence", "seasonal_naive", "ets"]


def _names(settings: Settings, fast: bool = False) -> list[str]:
    return [m.model_name for m in candidate_models(settings, STEP, 36, fast=fast)]


def test_the_full_set_by_default_and_fast_on_request(tmp_path: Path) -> None:
    settings = Settings(root=tmp_path)
    assert _names(settings) == FULL
    assert _names(settings, fast=True) == FAST


def test_the_fast_model_set_setting_drops_mstl_and_boosting(tmp_path: Path) -> None:
    assert _names(Settings(root=tmp_path, model_set="fast")) == FAST


def test_an_unknown_model_set_is_refused_naming_the_choices(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="full"):
        Settings(root=tmp_path, model_set="tiny")
