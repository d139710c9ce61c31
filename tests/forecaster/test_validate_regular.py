"""A frame that needs no cleaning is returned as cleaning series by series would."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.contract import validate_series
from forecaster.contract.validate import _already_clean, _clean_each, _parsed
from forecaster.types import DS, UID, Y


def regular(seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    parts = []
    for uid, freq, n in (("b/queue", "5min", 50), ("a/alloc", "10min", 30), ("c/x", "1h", 2)):
        ds = pd.date_range("2025-01-01 00:03", periods=n, freq=freq, tz="UTC")
        parts.append(pd.DataFrame({UID: uid, DS: ds, Y: rng.gamma(2.0, 3.0, n)}))
    return pd.concat(parts, ignore_index=True).sample(frac=1.0, random_state=1)  # shuffled ids


def slow(frame: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, pd.Timedelta]]:
    parsed, raw, _ = _parsed(frame, "drop")
    pieces, notes, steps, problems = _clean_each(
        parsed, raw, step=None, max_gap_steps=6, min_length=2, nonnegative=True
    )
    assert not problems
    assert all(not n for n in notes.values())
    return pd.concat(pieces, ignore_index=True), steps


def test_a_regular_frame_is_what_cleaning_each_series_returns() -> None:
    frame = regular().sort_values([UID, DS])  # within a series in time order
    parsed, _, _ = _parsed(frame, "drop")
    fast = _already_clean(parsed, None, 2, True)
    assert fast is not None
    expected, steps = slow(frame)
    pd.testing.assert_frame_equal(fast[0], expected)
    assert fast[1] == steps
    clean, report = validate_series(frame)
    pd.testing.assert_frame_equal(clean, expected)
    assert report.steps == steps
    assert not report.dropped


@pytest.mark.parametrize(
    "spoil",
    [
        lambda f: f.drop(index=f.index[5]),  # a gap
        lambda f: f.assign(**{Y: f[Y].where(f.index != f.index[7], np.nan)}),  # a NaN
        lambda f: f.assign(**{Y: f[Y].where(f.index != f.index[7], -1.0)}),  # negative
        lambda f: pd.concat([f, f.iloc[[3]]]),  # a repeated time
        lambda f: f.iloc[::-1],  # out of order
        lambda f: f.assign(
            **{DS: f[DS].where(f.index != f.index[9], f[DS] + pd.Timedelta("1min"))}
        ),
    ],
)
def test_anything_to_clean_takes_the_series_by_series_path(spoil) -> None:  # type: ignore[no-untyped-def]
    frame = spoil(regular().sort_values([UID, DS]).reset_index(drop=True))
    parsed, _, _ = _parsed(frame, "drop")
    assert _already_clean(parsed, None, 2, True) is None
