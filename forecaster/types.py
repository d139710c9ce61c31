"""Shared names and type aliases of the series contract."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Final, NamedTuple, TypeAlias

from forecaster.exceptions import DataValidationError

if TYPE_CHECKING:
    import pandas as pd

UID: Final = "unique_id"
DS: Final = "ds"
Y: Final = "y"
MODEL: Final = "model"
MEAN: Final = "mean"
CUTOFF: Final = "cutoff"
STEP: Final = "step"
"""Column of forecast frames: 1-based steps ahead of the last observation."""

SERIES_COLUMNS: Final = (UID, DS, Y)

PERSISTENCE: Final = "persistence"
"""The persistence family's name: the reference every model is measured against and
the family of a series nothing else was chosen for."""


class SeriesId(NamedTuple):
    """A series id ``<pool>/<signal>`` (e.g. ``a100-80g/queue_gpus``); ``str()`` formats it.

    The pool is everything before the last ``/`` (pool names never hold one). The one
    rule for an id without ``/`` (:meth:`of`, :meth:`split`): it is a pool with signal
    ``""`` (a series named by the user, e.g. ``series-7``), so it never matches a signal
    name such as ``demand_gpus``; :meth:`parse` rejects it.
    """

    pool: str
    signal: str

    @classmethod
    def parse(cls, text: str) -> SeriesId:
        """Split ``<pool>/<signal>``.

        Raises:
            DataValidationError: ``text`` has no ``/``, or nothing before or after it.
        """
        pool, sep, signal = text.rpartition("/")
        if not sep or not pool or not signal:
            raise DataValidationError(
                f"series id {text!r} is not '<pool>/<signal>', e.g. 'a100-train/queue_gpus'"
            )
        return cls(pool, signal)

    @classmethod
    def of(cls, text: str) -> SeriesId:
        """Split ``<pool>/<signal>`` leniently: an id without ``/`` is a pool with signal ``""``.

        For frames the forecaster takes from anyone (its ids need not name a pool).
        """
        pool, sep, signal = text.rpartition("/")
        return cls(pool, signal) if sep else cls(text, "")

    @staticmethod
    def split(ids: pd.Series) -> tuple[pd.Series, pd.Series]:
        """Return the pools and the signals of a column of ids, as :meth:`of` splits them."""
        import pandas as pd

        if ids.empty:
            # rpartition of no strings has no columns at all.
            return pd.Series([], dtype=object), pd.Series([], dtype=object)
        parts = ids.astype(str).str.rpartition("/")
        bare = parts[1] == ""
        return parts[0].mask(bare, parts[2]).rename(None), parts[2].mask(bare, "").rename(None)

    def __str__(self) -> str:
        return f"{self.pool}/{self.signal}"


DEFAULT_LEVELS: Final[tuple[float, ...]] = (0.5, 0.9, 0.95)
"""Quantile levels every model predicts unless told otherwise."""

SeriesFrame: TypeAlias = "pd.DataFrame"
"""Long frame with columns ``unique_id`` (str), ``ds`` (UTC), ``y`` (float)."""

Levels = Sequence[float]

Progress = Callable[[str, int, int], None]
"""Progress callback: ``(stage, done, total)``, as ``pipelines.reporting.progress_bar``."""


def quantile_column(level: float) -> str:
    """Return the forecast-frame column name of a quantile level, e.g. ``q0.9``."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"quantile level must be in (0, 1), got {level}")
    return f"q{level:g}"


def quantile_level(column: str) -> float:
    """Return the level a ``q<level>`` column name holds: the inverse of :func:`quantile_column`.

    Raises:
        ValueError: ``column`` is not ``q`` followed by a level in (0, 1).
    """
    try:
        level = float(column[1:]) if column.startswith("q") else math.nan
    except ValueError:
        level = math.nan
    if not 0.0 < level < 1.0:
        raise ValueError(f"{column!r} is not a quantile column such as 'q0.9'")
    return level


def quantile_levels(columns: Iterable[object]) -> list[float]:
    """Return the levels of the ``q<level>`` columns among ``columns``, sorted.

    Every other column (``mean``, ``raw_q0.9``, ``qty``) is skipped.
    """
    levels = []
    for column in columns:
        try:
            levels.append(quantile_level(str(column)))
        except ValueError:
            continue
    return sorted(levels)
