"""Tidy CSV / Parquet files to long series frames (``unique_id, ds, y``), unvalidated."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import pandas as pd

from forecaster.exceptions import SourceError
from forecaster.types import DS, UID, Y

logger = logging.getLogger(__name__)

Layout = Literal["auto", "long", "wide"]

SUPPORTED_SUFFIXES = {".csv": "csv", ".csv.gz": "csv", ".parquet": "parquet", ".pq": "parquet"}
TIME_COLUMN_GUESSES = (DS, "timestamp", "time", "datetime", "date")
"""Tried in order when ``time_col`` is not given."""


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a CSV or Parquet file, chosen by its extension.

    Raises:
        SourceError: the file is missing, its extension is not supported, or it
            cannot be parsed.
    """
    p = Path(path)
    kind = _kind(p)
    if not p.is_file():
        raise SourceError(f"Cannot read {str(p)!r}: no such file. Check the path.")
    try:
        if kind == "csv":
            return pd.read_csv(p)
        return pd.read_parquet(p)
    except (OSError, ValueError, ImportError, pd.errors.ParserError) as exc:
        raise SourceError(f"Cannot read {str(p)!r} as {kind}: {exc}") from exc


def load_frame(
    path: str | Path,
    *,
    layout: Layout = "auto",
    time_col: str | None = None,
    id_cols: Sequence[str] | None = None,
    value_cols: Sequence[str] | None = None,
    prefix: str | None = None,
) -> pd.DataFrame:
    """Read a tidy file into a long frame ``unique_id, ds, y`` (not yet validated).

    Pass the result through :func:`forecaster.contract.validate_series`.

    Args:
        path: a ``.csv``, ``.csv.gz``, ``.parquet`` or ``.pq`` file.
        layout: ``"long"``: one row per (series, time), one value column; the series
            is named ``[prefix/]<id values joined by "/">``. ``"wide"``: one row per
            time (and id), each value column a series named
            ``<prefix>/[<id values>/]<column>``, where ``prefix`` defaults to the file
            name without extension when there are no id columns. ``"auto"``: long
            when there are id columns and exactly one value column, else wide.
        time_col: the time column; by default the first of ``ds``, ``timestamp``,
            ``time``, ``datetime``, ``date`` that exists.
        id_cols: columns naming the entity; default ``["unique_id"]`` if present.
        value_cols: the value columns; default ``["y"]`` in the long layout, every
            numeric column other than time and ids in the wide layout.
        prefix: prepended to every ``unique_id`` with a ``/``.

    Raises:
        SourceError: the file cannot be read or lacks the named columns.
    """
    p = Path(path)
    return to_long(
        read_table(p),
        layout=layout,
        time_col=time_col,
        id_cols=id_cols,
        value_cols=value_cols,
        prefix=prefix,
        source=str(p),
        default_prefix=_stem(p),
    )


def to_long(
    table: pd.DataFrame,
    *,
    layout: Layout = "auto",
    time_col: str | None = None,
    id_cols: Sequence[str] | None = None,
    value_cols: Sequence[str] | None = None,
    prefix: str | None = None,
    source: str = "the table",
    default_prefix: str = "series",
) -> pd.DataFrame:
    """Reshape an in-memory table like :func:`load_frame` does with a file."""
    columns = [str(c) for c in table.columns]
    time = time_col or next((c for c in TIME_COLUMN_GUESSES if c in columns), None)
    if time is None:
        raise SourceError(
            f"{source} has no time column: none of {list(TIME_COLUMN_GUESSES)} in {columns}. "
            f"Name the file's time column one of {', '.join(TIME_COLUMN_GUESSES)}."
        )
    ids = list(id_cols) if id_cols is not None else ([UID] if UID in columns else [])
    if layout == "auto":
        single = len(value_cols) == 1 if value_cols is not None else Y in columns
        layout = "long" if ids and single else "wide"
    if value_cols is not None:
        values = list(value_cols)
    elif layout == "long":
        values = [Y]
    else:
        values = [
            c
            for c in columns
            if c != time and c not in ids and pd.api.types.is_numeric_dtype(table[c])
        ]
    missing = [c for c in (time, *ids, *values) if c not in columns]
    if missing:
        raise SourceError(
            f"{source} lacks the columns {missing} (it has {columns}). A long file has the "
            f"columns unique_id, a time column ({', '.join(TIME_COLUMN_GUESSES)}) and y; a "
            "wide file a time column and one numeric column per series."
        )
    if not values:
        raise SourceError(
            f"{source} has no numeric value column; a wide file has a time column and one "
            "numeric column per series."
        )
    ignored = [c for c in columns if c not in {time, *ids, *values}]
    if ignored:
        # Said, not silent: a misspelt column would otherwise just vanish.
        logger.warning(
            "%s: ignored the columns %s (read as %s: %s)",
            source,
            ignored,
            layout,
            "unique_id, time, y" if layout == "long" else "a time column and numeric series",
        )
    if layout == "long":
        return _long(table, time=time, ids=ids, values=values, prefix=prefix, source=source)
    return _wide(table, time, ids, values, prefix or (None if ids else default_prefix))


def _long(
    table: pd.DataFrame,
    *,
    time: str,
    ids: list[str],
    values: list[str],
    prefix: str | None,
    source: str,
) -> pd.DataFrame:
    if len(values) != 1:
        raise SourceError(
            f"{source}: the long layout takes one value column, got {values}; pass "
            "layout='wide' to make one series per value column."
        )
    if not ids and not prefix:
        raise SourceError(
            f"{source}: the long layout needs id_cols=[...] (or a prefix= naming its one series)."
        )
    uid = _join(table, ids, prefix)
    return pd.DataFrame({UID: uid, DS: table[time].to_numpy(), Y: table[values[0]].to_numpy()})


def _wide(
    table: pd.DataFrame, time: str, ids: list[str], values: list[str], prefix: str | None
) -> pd.DataFrame:
    # A private value name, because the table may itself have a column called "y".
    melted = table.melt(
        id_vars=[time, *ids], value_vars=values, var_name="__column", value_name="__value"
    )
    head = _join(melted, ids, prefix)
    column = melted["__column"].astype(str)
    uid = column if head is None else head + "/" + column
    return pd.DataFrame(
        {UID: uid.to_numpy(), DS: melted[time].to_numpy(), Y: melted["__value"].to_numpy()}
    )


def _join(table: pd.DataFrame, ids: list[str], prefix: str | None) -> pd.Series | None:
    """``prefix/id1/id2`` per row, or None when there is neither prefix nor id."""
    parts = [table[c].astype(str) for c in ids]
    if prefix:
        parts.insert(0, pd.Series(prefix, index=table.index))
    if not parts:
        return None
    joined = parts[0]
    for part in parts[1:]:
        joined = joined + "/" + part
    return joined


def _kind(p: Path) -> str:
    name = p.name.lower()
    for suffix, kind in SUPPORTED_SUFFIXES.items():
        if name.endswith(suffix):
            return kind
    raise SourceError(
        f"Cannot read {str(p)!r}: unsupported file type {''.join(p.suffixes) or '(none)'!r}; "
        f"supported: {', '.join(SUPPORTED_SUFFIXES)}."
    )


def _stem(p: Path) -> str:
    name = p.name
    for suffix in SUPPORTED_SUFFIXES:
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return p.stem
