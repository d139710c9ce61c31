"""Samples from a CSV or Parquet file (long or wide), such as the committed sample.

Details: docs/jobs.md, "Notes from the code", `pipelines/sources/files.py`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Final

import pandas as pd

from forecaster.contract.parse import parse_timestamps, parse_values
from forecaster.exceptions import SourceError
from forecaster.loaders import Layout, load_frame
from forecaster.types import DS, UID, Y
from pipelines.sources.protocol import TimeLike, check_window, empty_frame, tidy

_SHOWN_IDS: Final = 10


@dataclass(frozen=True)
class FileSource:
    """A :class:`~pipelines.sources.protocol.MetricSource` over one tidy file.

    The options are those of :func:`forecaster.loaders.load_frame`.

    Attributes:
        path: a ``.csv``, ``.csv.gz``, ``.parquet`` or ``.pq`` file.
        layout: ``"long"``, ``"wide"`` or ``"auto"``.
        time_col: the time column; by default the first usual name found.
        id_cols: the columns naming the entity in a long file.
        prefix: prepended to every series name of the file.
    """

    path: Path
    layout: Layout = "auto"
    time_col: str | None = None
    id_cols: tuple[str, ...] | None = None
    value_cols: tuple[str, ...] | None = None
    prefix: str | None = None

    def fetch(
        self,
        queries: Mapping[str, str],
        start: TimeLike,
        end: TimeLike,
        step: timedelta,
    ) -> pd.DataFrame:
        """Return the samples of the named series within ``[start, end]``.

        ``step`` is only checked: samples come back at the file's own resolution and
        regularising them is the series contract's job. Unparseable timestamps are
        dropped (they belong to no window); unparseable values become NaN.

        Raises:
            SourceError: the file cannot be read, or a query names no series of it
                or several; the message lists series it has.
            ValueError: the window or step is invalid.
        """
        first, last = check_window(start, end, step)
        if not queries:
            return empty_frame()
        raw = load_frame(
            self.path,
            layout=self.layout,
            time_col=self.time_col,
            id_cols=self.id_cols,
            value_cols=self.value_cols,
            prefix=self.prefix,
        )
        ids = raw[UID].astype(str)
        known = sorted(ids.unique())
        frames = []
        for series_id, query in queries.items():
            rows = raw[ids == self._resolve(series_id, query, known)]
            ds, _ = parse_timestamps(rows[DS])
            keep = ds.notna() & (ds >= first) & (ds <= last)
            frames.append(
                pd.DataFrame({UID: series_id, DS: ds[keep], Y: parse_values(rows[Y])[keep]})
            )
        return tidy(frames)

    def _resolve(self, series_id: str, query: str, known: Sequence[str]) -> str:
        if query in known:
            return query
        matches = [name for name in known if name.endswith(f"/{query}")]
        if len(matches) == 1:
            return matches[0]
        shown = ", ".join(known[:_SHOWN_IDS]) + (" ..." if len(known) > _SHOWN_IDS else "")
        if matches:
            raise SourceError(
                f"{self.path}: {query!r} (for {series_id!r}) matches several series "
                f"{matches}; name one in full"
            )
        raise SourceError(
            f"{self.path} has no series {query!r} (for {series_id!r}); it has: {shown}. "
            "Set the signal's column (wide files) or name the series by its unique_id"
        )
