"""The record of what validation changed, and the one warning that tells the user."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

from forecaster.types import SeriesId


class CleaningWarning(UserWarning):
    """Foresight cleaned a series frame; the message says what was changed."""


@dataclass(frozen=True)
class CleaningReport:
    """What :func:`~forecaster.contract.validate_series` changed, per series.

    Attributes:
        notes: per kept ``unique_id``, the changes made to that series, in order
            (an empty tuple when the series was already clean).
        frame_notes: changes that concern the whole frame (time zone, extra columns).
        dropped: per dropped ``unique_id`` (``on_error="drop"``), why it was dropped.
        steps: the step of every kept series (inferred or given); informational.
    """

    notes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    frame_notes: tuple[str, ...] = ()
    dropped: Mapping[str, str] = field(default_factory=dict)
    steps: Mapping[str, pd.Timedelta] = field(default_factory=dict)

    def __bool__(self) -> bool:
        """Return True when anything was changed or dropped."""
        return bool(self.frame_notes or self.dropped or any(self.notes.values()))

    @property
    def changed(self) -> dict[str, tuple[str, ...]]:
        """The notes of the series that were changed, by ``unique_id``."""
        return {uid: notes for uid, notes in self.notes.items() if notes}

    def summary(self) -> str:
        """Return a multi-line text naming every changed or dropped series."""
        changed = self.changed
        lines = [
            f"Cleaned the series frame: {len(changed)} of {len(self.notes)} kept series "
            f"changed, {len(self.dropped)} dropped."
        ]
        lines += [f"  frame: {note}" for note in self.frame_notes]
        lines += [f"  {uid!r}: " + "; ".join(notes) for uid, notes in sorted(changed.items())]
        lines += [f"  {uid!r} DROPPED: {why}" for uid, why in sorted(self.dropped.items())]
        return "\n".join(lines)

    def readable_lines(self) -> list[str]:
        """What was changed, one line per distinct change, naming the series it touched.

        Series that got the same changes share a line (``h100-train/{nodes, queue_gpus}:
        ...``), so a gap shared by every signal of a pool reads once, not per signal.
        """
        if not self:
            return []
        changed = self.changed
        lines = [
            f"{len(changed)} of {len(self.notes)} series cleaned, {len(self.dropped)} left out:"
        ]
        lines += [f"  every series: {note}" for note in self.frame_notes]
        by_change: dict[tuple[str, ...], list[str]] = {}
        for uid, notes in sorted(changed.items()):
            by_change.setdefault(notes, []).append(uid)
        for notes, uids in by_change.items():
            lines.append(f"  {_name_series(uids)}: {'; '.join(notes)}")
        by_reason: dict[str, list[str]] = {}
        for uid, why in sorted(self.dropped.items()):
            by_reason.setdefault(why, []).append(uid)
        lines += [f"  {_name_series(uids)} left out: {why}" for why, uids in by_reason.items()]
        return lines

    def warn(self, stacklevel: int = 1) -> None:
        """Emit one :class:`CleaningWarning` summarising the report, if anything changed.

        Args:
            stacklevel: 1 attributes the warning to the line that calls ``warn``, 2 to
                that function's caller, and so on (as for :func:`warnings.warn`).
        """
        if self:
            warnings.warn(self.summary(), CleaningWarning, stacklevel=stacklevel + 1)


def _name_series(uids: list[str]) -> str:
    """``a/x`` for one series, ``a/{x, y}`` for series of one pool, else a comma list."""
    if len(uids) == 1:
        return uids[0]
    ids = [SeriesId.of(uid) for uid in uids]
    pools = {sid.pool for sid in ids}
    if len(pools) == 1 and all(sid.signal for sid in ids):
        (pool,) = pools
        return f"{pool}/{{{', '.join(sid.signal for sid in ids)}}}"
    return ", ".join(uids)
