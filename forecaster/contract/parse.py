"""Parsing of the raw columns: timestamps to UTC, values to float, steps from strings."""

from __future__ import annotations

import warnings

import numpy as np
import numpy.typing as npt
import pandas as pd
from pandas.tseries.frequencies import to_offset

from forecaster.exceptions import DataValidationError

NAIVE_NOTE = "ds had no time zone; read it as UTC"
MIXED_NOTE = "parsed ds element by element (mixed formats or UTC offsets); naive ones read as UTC"
_NAN_SPELLINGS = frozenset({"", "nan", "na", "n/a", "null", "none"})


def to_step(freq: pd.Timedelta | str) -> pd.Timedelta:
    """Return ``freq`` (``"10min"``, ``"h"``, a Timedelta) as a positive Timedelta.

    Raises:
        ValueError: ``freq`` is not a fixed positive duration (months are not).
    """
    try:
        step = (
            pd.Timedelta(to_offset(freq).nanos, unit="ns")
            if isinstance(freq, str)
            else pd.Timedelta(freq)
        )
    except (ValueError, TypeError) as exc:
        raise ValueError(
            f"freq must be a fixed duration such as '10min' or '1h', got {freq!r}"
        ) from exc
    if step <= pd.Timedelta(0):
        raise ValueError(f"freq must be a positive duration, got {freq!r}")
    return step


def format_step(step: pd.Timedelta) -> str:
    """Return a compact spelling of a step, e.g. ``10min``, ``1h30min``, ``1d``."""
    c = step.components
    parts = [
        f"{value}{unit}"
        for value, unit in (
            (c.days, "d"),
            (c.hours, "h"),
            (c.minutes, "min"),
            (c.seconds, "s"),
            (c.milliseconds, "ms"),
        )
        if value
    ]
    return "".join(parts) or f"{step.value}ns"


def format_ns(ns: int) -> str:
    """Return an ISO 8601 UTC spelling of nanoseconds since the epoch."""
    return pd.Timestamp(ns, unit="ns", tz="UTC").isoformat()


def as_ns(ds: pd.Series | pd.DatetimeIndex) -> npt.NDArray[np.int64]:
    """Return UTC timestamps as int64 nanoseconds since the epoch."""
    index = pd.DatetimeIndex(ds).as_unit("ns")
    if index.tz is not None:
        index = index.tz_convert("UTC").tz_localize(None)
    return index.to_numpy().view(np.int64)


def parse_timestamps(raw: pd.Series) -> tuple[pd.Series, list[str]]:
    """Parse ``ds`` to ``datetime64[ns, UTC]``; unparseable values become NaT.

    Returns:
        The parsed column and the notes of what was done to the whole column.

    Raises:
        DataValidationError: ``ds`` is numeric (epoch values of an unknown unit).
    """
    dtype = raw.dtype
    if isinstance(dtype, pd.DatetimeTZDtype):
        notes = [] if str(dtype.tz) == "UTC" else [f"converted ds from {dtype.tz} to UTC"]
        return raw.dt.tz_convert("UTC").dt.as_unit("ns"), notes
    if pd.api.types.is_datetime64_dtype(dtype):
        return raw.dt.tz_localize("UTC").dt.as_unit("ns"), [NAIVE_NOTE]
    if pd.api.types.is_numeric_dtype(dtype):
        raise DataValidationError(
            f"ds holds numbers ({dtype}), not timestamps, and their unit is ambiguous. Convert "
            "them first, e.g. df['ds'] = pd.to_datetime(df['ds'], unit='s', utc=True)."
        )
    with warnings.catch_warnings():
        # Mixed UTC offsets warn in pandas 2 and raise in 3; both mean "parse per element".
        warnings.simplefilter("ignore")
        try:
            parsed = pd.to_datetime(raw)
        except (ValueError, TypeError, OverflowError):
            parsed = None
        if parsed is not None and pd.api.types.is_datetime64_any_dtype(parsed.dtype):
            return parse_timestamps(parsed)
        parsed = pd.to_datetime(raw, format="mixed", errors="coerce", utc=True)
    return parsed.dt.as_unit("ns"), [MIXED_NOTE]


def parse_values(raw: pd.Series) -> pd.Series:
    """Return ``y`` as float64; values that are not numbers become NaN."""
    if not (pd.api.types.is_numeric_dtype(raw.dtype) or pd.api.types.is_bool_dtype(raw.dtype)):
        raw = pd.to_numeric(raw, errors="coerce")
    values = raw.to_numpy(dtype=np.float64, na_value=np.nan)
    return pd.Series(values, index=raw.index, dtype=np.float64)


def unparsed_message(
    parsed_ds: pd.Series, raw_ds: pd.Series, parsed_y: pd.Series, raw_y: pd.Series
) -> str | None:
    """Describe present-but-unparseable timestamps or values of one series, with the fix."""
    bad_ds = parsed_ds.isna() & raw_ds.notna()
    bad_y = parsed_y.isna() & raw_y.notna() & ~_spells_nan(raw_y)
    messages: list[str] = []
    if bad_ds.any():
        examples = [str(v) for v in raw_ds[bad_ds].unique()[:3]]
        messages.append(
            f"{int(bad_ds.sum())} ds values are not timestamps (e.g. {examples}); write ds "
            "as ISO 8601, e.g. '2024-05-01T10:00:00Z'"
        )
    if bad_y.any():
        examples = [str(v) for v in raw_y[bad_y].unique()[:3]]
        messages.append(
            f"{int(bad_y.sum())} y values are not numbers (e.g. {examples}); convert y to "
            "numbers (pd.to_numeric) or drop those rows"
        )
    return "; ".join(messages) or None


def _spells_nan(raw: pd.Series) -> pd.Series:
    """True where a raw value is a textual spelling of a missing number ('nan', '')."""
    if pd.api.types.is_numeric_dtype(raw.dtype):
        return pd.Series(False, index=raw.index)
    return raw.astype(str).str.strip().str.lower().isin(_NAN_SPELLINGS)
