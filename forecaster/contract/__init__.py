"""The series data contract: validate and clean a long frame once, at the edge.

Everything downstream (features, models, backtests, the policy) may assume a frame of
exactly ``unique_id`` (str), ``ds`` (``datetime64[ns, UTC]``), ``y`` (float64), sorted,
one row per step of a regular per-series grid, with no missing values. This package
is the one place that turns real data into that shape.

What is cleaned, and how (every change is written to the :class:`CleaningReport`):

- ``unique_id`` becomes ``str``; naive ``ds`` is read as UTC, aware ``ds`` converted.
- Rows with the same ``(unique_id, ds)`` keep the **last** one in input order: a
  repeated sample is a re-delivery or a correction, and averaging a correction with
  the value it corrects is wrong.
- NaN and infinite ``y`` are missing values. So are negative values of a series that
  cannot be negative (GPU counts, queue depth): clipping them to 0 would invent a
  plausible-looking value, while treating them as missing lets the bounded gap fill
  replace them from their neighbours or, if there are many, cut the stretch off.
- The step of each series is its most common timestamp difference (or ``freq``).
  Timestamps off that grid are snapped to the nearest grid point; several samples in
  one grid point are **averaged** (they are distinct measurements of one period).
- Missing steps are inserted; runs of at most ``max_gap_steps`` missing steps are
  filled by linear interpolation. Missing steps at either end are trimmed (there is
  nothing to interpolate from). If a longer run remains, only the stretch after the
  last such run is kept: the models need a gap-free series, and the recent stretch
  is the one that predicts the future.

What is rejected: missing columns, unparseable timestamps, non-numeric values, and
series shorter than ``min_length`` after cleaning. Errors name every bad series and
the fix; with ``on_error="drop"`` bad series are dropped (and named in the report)
instead, so that one bad series does not hide the good ones.
"""

from forecaster.contract.report import CleaningReport, CleaningWarning
from forecaster.contract.validate import validate_series

__all__ = ["CleaningReport", "CleaningWarning", "validate_series"]
