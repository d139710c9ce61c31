"""Where a benchmark's series come from: the shared traces by default, or any files.

The benchmarks that take outside data share ``--data-dir`` (the directory of the shared
traces, default ``../shared/data``), ``--data FILE`` (repeatable: CSV or Parquet, long
``unique_id, ds, y`` or wide with a time column, the formats ``foresight --data``
accepts; ``<entity>/demand_gpus`` is derived from allocated plus queued or pending
GPUs) and ``--series`` (repeatable: which series or cases to run; any series id of the
data, whatever its signal; default today's list).

A user's mistake (a missing or empty file, a series id the data does not hold, no
series to run) is found here, before any slow work, and said in one line that names
what is wrong and what to pass (:func:`input_error`); never as a traceback.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final, TextIO

import pandas as pd

from forecaster.exceptions import DataValidationError, SourceError
from forecaster.loaders import derive_demand, load_frame, shared_data_dir
from forecaster.types import UID, SeriesId

QUEUE_SIGNAL = "queue_gpus"
INPUT_ERRORS: Final = (DataValidationError, SourceError)
"""What reading and choosing the inputs raises for a user's mistake."""
LISTED = 12
"""Series ids an error message lists before saying how many more there are."""


def add_input_options(
    parser: argparse.ArgumentParser, what: str, from_files: str = "every series"
) -> None:
    """Add ``--data-dir``, ``--data`` and ``--series`` to a benchmark's parser.

    ``what`` names what ``--series`` picks; ``from_files`` what runs by default with ``--data``.
    """
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="directory of the shared traces (default: ../shared/data next to the repository)",
    )
    parser.add_argument(
        "--data",
        type=Path,
        action="append",
        default=None,
        help="a CSV or Parquet file, long (unique_id, ds, y) or wide (a time column, one "
        "column per series); repeatable; replaces the shared traces",
    )
    parser.add_argument(
        "--series",
        action="append",
        default=None,
        metavar="ID",
        help=f"{what} to run (repeatable); default: today's list, or with --data "
        f"{from_files} of the files; with --data any series id of the files, whatever "
        "its signal (e.g. x/rate_rps)",
    )


def data_dir(args: argparse.Namespace, root: Path) -> Path | None:
    """The shared-traces directory the options name, or None when it is absent."""
    if args.data_dir is not None:
        return Path(args.data_dir) if Path(args.data_dir).is_dir() else None
    return shared_data_dir(root)


def load_files(paths: list[Path]) -> pd.DataFrame:
    """Read files as one long frame (not yet validated) with demand derived.

    Raises:
        SourceError: a file is missing, is not a file, cannot be read or holds no rows.
    """
    frames = []
    for path in paths:
        if not path.is_file():
            what = "is a directory" if path.is_dir() else "does not exist"
            raise SourceError(
                f"--data {path} {what}; give a CSV or Parquet file (long unique_id, ds, y "
                "or wide with a time column)"
            )
        if path.stat().st_size == 0:
            raise SourceError(f"--data {path} is empty; give a file with a series in it")
        frame = load_frame(path)
        if frame.empty:
            raise SourceError(f"--data {path} holds no rows; give a file with a series in it")
        raw = derive_demand(frame, pending=QUEUE_SIGNAL)
        frames.append(derive_demand(raw))
    return pd.concat(frames, ignore_index=True)


def pick_series(
    ids: Iterable[str], wanted: Sequence[str] | None, *, signal: str | None = None
) -> list[str]:
    """The series ids to run: the ``wanted`` ones, else every id with ``signal``.

    Args:
        ids: the series ids the data holds.
        wanted: ids the user named with ``--series`` (None or empty: the default).
        signal: the default's signal (e.g. ``demand_gpus``); None: every series.

    Raises:
        DataValidationError: a wanted id is not in the data (the message says which
            ids are, and the likeliest meant), or nothing is wanted and no id has
            ``signal`` (the message lists the ids and says to pass ``--series``).
    """
    known = sorted(set(ids))
    if wanted:
        for text in wanted:
            if text not in known:
                raise DataValidationError(unknown_series(text, known))
        return list(dict.fromkeys(wanted))
    chosen = [u for u in known if signal is None or SeriesId.of(u).signal == signal]
    if not chosen:
        raise DataValidationError(
            f"no '<pool>/{signal}' series in the data, the default to run; pass --series ID "
            f"(repeatable) with the ids to run: {listing(known)}"
        )
    return chosen


def unknown_series(text: str, known: Sequence[str]) -> str:
    """One line saying ``text`` is not a series of the data, what may be meant, what is."""
    try:
        SeriesId.parse(text)
        what = f"--series {text!r} is not a series of the data"
    except DataValidationError:
        what = f"--series {text!r} is not a series id '<pool>/<signal>' of the data"
    meant = [u for u in known if u.replace("/", "_") == text]
    meant += [u for u in difflib.get_close_matches(text, known, n=3) if u not in meant]
    hint = f"; did you mean {' or '.join(repr(u) for u in meant)}?" if meant else "."
    return f"{what}{hint} The data holds: {listing(known)}"


def listing(ids: Sequence[str]) -> str:
    """Up to :data:`LISTED` ids, then how many more there are."""
    shown = ", ".join(ids[:LISTED])
    more = len(ids) - LISTED
    return f"{shown} (and {more} more)" if more > 0 else shown or "(none)"


def pool_signal_ids(ids: Iterable[str], why: str) -> list[SeriesId]:
    """Each id split as ``<pool>/<signal>``.

    Raises:
        DataValidationError: an id is not ``<pool>/<signal>``; ``why`` says what needs it.
    """
    parsed = []
    for uid in ids:
        try:
            parsed.append(SeriesId.parse(uid))
        except DataValidationError:
            raise DataValidationError(
                f"series {uid!r} is not '<pool>/<signal>' (e.g. 'a100-train/demand_gpus'), "
                f"which {why}; name it so in the file (a wide file's columns are named "
                "'<file name>/<column>')"
            ) from None
    return parsed


def keep_series(frame: pd.DataFrame, wanted: list[str] | None) -> pd.DataFrame:
    """Only the ``wanted`` series (all when None).

    Raises:
        DataValidationError: a wanted series is not in the frame (the message lists
            some that are).
    """
    if not wanted:
        return frame
    pick_series(frame[UID].astype(str).unique(), wanted)
    return frame[frame[UID].isin(wanted)].reset_index(drop=True)


def input_error(prog: str, error: Exception, stream: TextIO | None = None) -> int:
    """Say a user's mistake in one line on stderr and return the exit status (2).

    2, as argparse exits on a bad option: the run did not start.
    """
    line = " ".join(str(error).splitlines())
    print(f"{prog}: error: {line}", file=stream or sys.stderr)
    return 2
