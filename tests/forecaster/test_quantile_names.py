"""Quantile column names: built by one function and parsed back by its inverse."""

from __future__ import annotations

import numpy as np
import pytest

from forecaster.types import quantile_column, quantile_level, quantile_levels


def test_level_round_trips_through_its_column_name() -> None:
    rng = np.random.default_rng(7)
    for level in [0.5, 0.9, 0.95, 0.995, 1e-5, *rng.uniform(0.001, 0.999, 50).round(6)]:
        assert quantile_level(quantile_column(float(level))) == pytest.approx(level, rel=1e-5)


@pytest.mark.parametrize("name", ["mean", "q", "q1", "q0", "q1.5", "qnan", "raw_q0.9", "qty"])
def test_a_name_that_holds_no_level_in_0_1_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="is not a quantile column"):
        quantile_level(name)


def test_levels_of_a_frame_skip_other_columns_and_are_sorted() -> None:
    columns = ["unique_id", "q0.95", "mean", "raw_q0.5", "q0.1", "quota", 3]
    assert quantile_levels(columns) == [0.1, 0.95]
