"""``validate_series``: the one entry point that checks and cleans a series frame."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Literal

import numpy as np
import pandas as pd

from forecaster.contract.parse import parse_timestamps, parse_values, to_step, unparsed_message
from forecaster.contract.regularise import SeriesProblem, clean_one_series
from forecaster.contract.report import CleaningReport
from forecaster.exceptions import DataValidationError, InsufficientHistoryError
from forecaster.types import DS, SERIES_COLUMNS, UID, SeriesFrame, SeriesId, Y

OnError = Literal["raise", "drop"]


def validate_series(
    df: pd.DataFrame,
    *,
    freq: pd.Timedelta | str | None = None,
    max_gap_steps: int = 6,
    min_length: int = 2,
    nonnegative: bool | Collection[str] = True,
    on_error: OnError = "raise",
) -> tuple[SeriesFrame, CleaningReport]:
    """Validate a long series frame and clean what is safe to clean.

    The caller decides how to surface the report; the usual edge code is
    ``clean, report = validate_series(df); report.warn()``.

    Args:
        df: a frame with at least ``unique_id``, ``ds`` and ``y``; other columns are
            dropped (with a note).
        freq: the step of every series (e.g. ``"10min"``); by default each series'
            most common timestamp difference, so series may have different steps.
        max_gap_steps: the longest run of missing steps filled by interpolation.
        min_length: the fewest observations a series must keep after cleaning.
        nonnegative: which series cannot be negative: True (all), False (none) or a
            collection of names, matched against the full ``unique_id`` or its signal
            (the part after the last ``/``), e.g. ``{"queue_gpus", "nodes"}``.
        on_error: ``"raise"`` to raise on any bad series; ``"drop"`` to drop bad
            series and name them in the report's ``dropped``.

    Returns:
        The clean frame (exactly ``unique_id, ds, y``, sorted, fresh index) and the
        report of what was changed.

    Raises:
        DataValidationError: a column is missing, ``ds`` is numeric, or (with
            ``on_error="raise"``) a series has unparseable timestamps or values, or
            no series is left. The message names every bad series and the fix.
        InsufficientHistoryError: every problem is a series too short after cleaning.
        ValueError: an argument is out of range.
    """
    if max_gap_steps < 0:
        raise ValueError(f"max_gap_steps must be >= 0, got {max_gap_steps}")
    if min_length < 1:
        raise ValueError(f"min_length must be >= 1, got {min_length}")
    if on_error not in ("raise", "drop"):
        raise ValueError(f"on_error must be 'raise' or 'drop', got {on_error!r}")
    step = to_step(freq) if freq is not None else None
    _check_columns(df)

    frame, raw, frame_notes = _parsed(df, on_error)
    regular = _already_clean(frame, step, min_length, nonnegative)
    if regular is not None:
        clean, steps = regular
        report = CleaningReport(
            notes=dict.fromkeys(steps, ()), frame_notes=tuple(frame_notes), dropped={}, steps=steps
        )
        return clean, report
    pieces, notes, steps, problems = _clean_each(
        frame,
        raw,
        step=step,
        max_gap_steps=max_gap_steps,
        min_length=min_length,
        nonnegative=nonnegative,
    )
    if problems and (on_error == "raise" or not pieces):
        raise _aggregate_error(problems, offer_drop=on_error == "raise")
    report = CleaningReport(
        notes=notes,
        frame_notes=tuple(frame_notes),
        dropped={uid: problem.message for uid, problem in problems.items()},
        steps=steps,
    )
    # Groups come sorted by unique_id and each piece is sorted by ds.
    out = pd.concat(pieces, ignore_index=True)
    return out, report


def _parsed(df: pd.DataFrame, on_error: OnError) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """The frame's ids, parsed timestamps and values; the raw rows; notes on the frame."""
    frame_notes: list[str] = []
    extra = [str(c) for c in df.columns if c not in SERIES_COLUMNS]
    if extra:
        frame_notes.append(f"ignored extra columns {sorted(extra)}")
    # A fresh index so that raw and parsed values line up whatever df's index was.
    raw = _drop_missing_ids(df.loc[:, list(SERIES_COLUMNS)].reset_index(drop=True), on_error)
    if len(raw) < len(df):
        frame_notes.append(f"dropped {len(df) - len(raw)} rows without a unique_id")
    frame = pd.DataFrame({UID: raw[UID].astype(str)})
    frame[DS], ds_notes = parse_timestamps(raw[DS])
    frame[Y] = parse_values(raw[Y])
    return frame, raw, frame_notes + ds_notes


def _clean_each(
    frame: pd.DataFrame,
    raw: pd.DataFrame,
    *,
    step: pd.Timedelta | None,
    max_gap_steps: int,
    min_length: int,
    nonnegative: bool | Collection[str],
) -> tuple[
    list[pd.DataFrame],
    dict[str, tuple[str, ...]],
    dict[str, pd.Timedelta],
    dict[str, SeriesProblem],
]:
    """Clean every series: the clean pieces, notes and steps, and each bad series' problem."""
    problems: dict[str, SeriesProblem] = {}
    notes: dict[str, tuple[str, ...]] = {}
    steps: dict[str, pd.Timedelta] = {}
    pieces: list[pd.DataFrame] = []
    for key, group in frame.groupby(UID, sort=True):
        uid = str(key)
        rows = group.index
        try:
            message = unparsed_message(group[DS], raw.loc[rows, DS], group[Y], raw.loc[rows, Y])
            if message:
                raise SeriesProblem(message)
            clean, series_notes, series_step_ = clean_one_series(
                uid,
                group,
                step=step,
                max_gap_steps=max_gap_steps,
                min_length=min_length,
                nonnegative=_is_nonnegative(uid, nonnegative),
            )
        except SeriesProblem as problem:
            problems[uid] = problem
            continue
        pieces.append(clean)
        notes[uid] = tuple(series_notes)
        steps[uid] = series_step_
    return pieces, notes, steps, problems


def _already_clean(
    frame: pd.DataFrame,
    step: pd.Timedelta | None,
    min_length: int,
    nonnegative: bool | Collection[str],
) -> tuple[SeriesFrame, dict[str, pd.Timedelta]] | None:
    """The frame as cleaning would return it, and each series' step, when nothing needs
    cleaning; None otherwise (then every series is cleaned on its own).
    """
    if frame.empty or frame[DS].isna().any():
        return None
    y = frame[Y].to_numpy(dtype=np.float64)
    if not np.isfinite(y).all():
        return None
    ordered = (
        frame.reset_index(drop=True)
        if frame[UID].is_monotonic_increasing  # a store read comes ordered
        else frame.sort_values(UID, kind="stable", ignore_index=True)
    )
    ids = ordered[UID].to_numpy()
    first = np.r_[True, ids[1:] != ids[:-1]]
    starts = np.flatnonzero(first)
    lengths = np.diff(np.r_[starts, len(ids)])
    if lengths.min() < max(2, min_length):
        return None
    names = [str(ids[i]) for i in starts]
    ns = ordered[DS].to_numpy(dtype="datetime64[ns]").astype(np.int64)
    gaps = np.diff(ns)
    within = ~first[1:]
    own = gaps[starts]  # each series' first difference (every series has two or more rows)
    expected = np.repeat(own if step is None else np.full(len(starts), step.value), lengths)
    if np.any(gaps[within] != expected[1:][within]) or np.any(expected <= 0):
        return None
    if step is not None and np.any(own != step.value):
        return None
    values = ordered[Y].to_numpy(dtype=np.float64)
    must = np.repeat([_is_nonnegative(uid, nonnegative) for uid in names], lengths)
    if np.any(must & (values < 0.0)):
        return None
    clean = pd.DataFrame(
        {
            UID: ordered[UID].astype(str).to_numpy(dtype=object),
            DS: pd.to_datetime(ns, unit="ns", utc=True),
            Y: values,
        }
    )
    return clean, {uid: pd.Timedelta(int(g), unit="ns") for uid, g in zip(names, own, strict=True)}


def _check_columns(df: pd.DataFrame) -> None:
    missing = [c for c in SERIES_COLUMNS if c not in df.columns]
    if missing:
        raise DataValidationError(
            f"The following columns are missing: {missing}. A series frame needs the columns "
            f"{list(SERIES_COLUMNS)} (found {[str(c) for c in df.columns]}). Rename yours, "
            "e.g. df.rename(columns={'timestamp': 'ds', 'value': 'y'}), or read the file with "
            "forecaster.loaders.load_frame(path, time_col=..., id_cols=..., value_cols=...)."
        )
    if df.empty:
        raise DataValidationError("The series frame has no rows, so there is nothing to forecast.")


def _drop_missing_ids(frame: pd.DataFrame, on_error: OnError) -> pd.DataFrame:
    missing = frame[UID].isna()
    if not missing.any():
        return frame
    if on_error == "raise":
        raise DataValidationError(
            f"{int(missing.sum())} rows have no unique_id, so they belong to no series. Fill "
            "unique_id or drop those rows, or pass on_error='drop'."
        )
    return frame.loc[~missing]


def _is_nonnegative(uid: str, nonnegative: bool | Collection[str]) -> bool:
    if isinstance(nonnegative, bool):
        return nonnegative
    names = {nonnegative} if isinstance(nonnegative, str) else set(nonnegative)
    return uid in names or SeriesId.of(uid).signal in names


def _aggregate_error(problems: Mapping[str, SeriesProblem], *, offer_drop: bool) -> Exception:
    lines = [f"{len(problems)} series break the data contract:"]
    lines += [f"  - {uid!r}: {problem.message}" for uid, problem in sorted(problems.items())]
    if offer_drop:
        lines.append("Fix them, or pass on_error='drop' to drop these series and keep the others.")
    else:
        lines.append("No series is left after dropping them.")
    message = "\n".join(lines)
    if all(problem.insufficient for problem in problems.values()):
        return InsufficientHistoryError(message)
    return DataValidationError(message)
