"""Fixtures of the peak forecaster tests."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.forecaster.peak.fleet import make_fleet


@pytest.fixture(scope="module")
def fleet() -> pd.DataFrame:
    return make_fleet({"big": 400.0, "mid": 60.0, "small": 8.0})
