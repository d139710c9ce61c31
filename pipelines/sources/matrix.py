"""Prometheus ``matrix`` results to arrays: parsing and combining several series (docs/jobs.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

LabelSet = tuple[tuple[str, str], ...]
"""The labels of one series, sorted by name."""

_MS_PER_S: Final = 1000


@dataclass(frozen=True)
class Matrix:
    """One series of one ``query_range`` answer: epoch milliseconds and float values."""

    labels: LabelSet
    ds_ms: npt.NDArray[np.int64]
    y: npt.NDArray[np.float64]


def parse_matrix(data: Mapping[str, Any]) -> list[Matrix]:
    """Parse the ``data`` member of a successful ``query_range`` answer.

    Values that are not finite (``"NaN"``, ``"+Inf"``, ``"-Inf"``) become NaN: to
    Foresight they are missing measurements, which the series contract handles.

    Raises:
        ValueError: the result is not a matrix, holds only native histograms, or a
            sample is malformed.
        KeyError: a member the API always sends is missing.
    """
    if data["resultType"] != "matrix":
        raise ValueError(f"resultType is {data['resultType']!r}, expected 'matrix'")
    series = []
    for item in data["result"]:
        values = item.get("values") or []
        if not values and item.get("histograms"):
            raise ValueError(
                "the query returns native histograms, which Foresight cannot store; "
                "query a float expression such as histogram_quantile(0.95, ...)"
            )
        count = len(values)
        # Timestamps are float seconds with millisecond precision; round, not truncate.
        ds = np.fromiter(
            (round(float(sample[0]) * _MS_PER_S) for sample in values), np.int64, count
        )
        y = np.fromiter((float(sample[1]) for sample in values), np.float64, count)
        y[~np.isfinite(y)] = np.nan
        labels = tuple(sorted((str(k), str(v)) for k, v in (item.get("metric") or {}).items()))
        series.append(Matrix(labels, ds, y))
    return series


def combine(
    parts: Sequence[Matrix],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Merge series into one, sorted by time, summing values that share a timestamp.

    A sum with a NaN term is NaN, as in PromQL: a missing measurement must not
    silently lower the total. One series comes back unchanged (only sorted).

    Raises:
        ValueError: ``parts`` is empty.
    """
    if not parts:
        raise ValueError("nothing to combine")
    ds = np.concatenate([part.ds_ms for part in parts])
    y = np.concatenate([part.y for part in parts])
    order = np.argsort(ds, kind="stable")
    ds, y = ds[order], y[order]
    unique, first = np.unique(ds, return_index=True)
    return unique.astype(np.int64), np.add.reduceat(y, first).astype(np.float64)
