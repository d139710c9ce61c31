"""Where a benchmark's series come from: the shared traces by default, or any files.

Both benchmarks take ``--data-dir`` (the directory of the shared traces, default
``../shared/data``), ``--data FILE`` (repeatable: CSV or Parquet, long ``unique_id, ds,
y`` or wide with a time column, the formats ``foresight --data`` accepts; ``<entity>/
demand_gpus`` is derived from allocated plus queued or pending GPUs) and ``--series``
(repeatable: which series or cases to run; default today's list).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from forecaster.exceptions import DataValidationError
from forecaster.loaders import derive_demand, load_frame, shared_data_dir
from forecaster.types import UID

QUEUE_SIGNAL = "queue_gpus"


def add_input_options(parser: argparse.ArgumentParser, what: str) -> None:
    """Add ``--data-dir``, ``--data`` and ``--series`` to a benchmark's parser."""
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
        help=f"{what} to run (repeatable); default: today's list, or with --data every "
        "series of the files",
    )


def data_dir(args: argparse.Namespace, root: Path) -> Path | None:
    """The shared-traces directory the options name, or None when it is absent."""
    if args.data_dir is not None:
        return Path(args.data_dir) if Path(args.data_dir).is_dir() else None
    return shared_data_dir(root)


def load_files(paths: list[Path]) -> pd.DataFrame:
    """Read files as one long frame (not yet validated) with demand derived.

    Raises:
        DataValidationError: a file is missing.
    """
    frames = []
    for path in paths:
        if not path.is_file():
            raise DataValidationError(
                f"--data {path} does not exist; give a CSV or Parquet file (long unique_id, "
                "ds, y or wide with a time column)"
            )
        raw = derive_demand(load_frame(path), pending=QUEUE_SIGNAL)
        frames.append(derive_demand(raw))
    return pd.concat(frames, ignore_index=True)


def keep_series(frame: pd.DataFrame, wanted: list[str] | None) -> pd.DataFrame:
    """Only the ``wanted`` series (all when None).

    Raises:
        DataValidationError: a wanted series is not in the frame (the message lists
            some that are).
    """
    if not wanted:
        return frame
    known = set(frame[UID].astype(str))
    unknown = sorted(set(wanted) - known)
    if unknown:
        raise DataValidationError(
            f"series {unknown} are not in the data; known series include: "
            f"{', '.join(sorted(known)[:20])}"
        )
    return frame[frame[UID].isin(wanted)].reset_index(drop=True)
