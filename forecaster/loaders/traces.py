"""Readers of the real public traces in ``../shared/data`` (see the README there).

Details: docs/forecasting.md, "Notes from the code", `forecaster/loaders/traces.py`."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from forecaster.exceptions import SourceError
from forecaster.loaders.files import Layout, read_table, to_long
from forecaster.types import DS, UID, SeriesId, Y

DEMAND = "demand_gpus"
"""Signal name of the derived demand series."""

_HELIOS = ("pending_jobs", "pending_gpus", "running_jobs", "allocated_gpus", "total_gpus")


@dataclass(frozen=True)
class TraceSpec:
    """How one shared trace file maps to series.

    Attributes:
        file: the file name in the shared data folder.
        prefix: the entity name; with ``id_col``, prepended verbatim to each id value
            (so ``"earth_vc_"`` + ``"vc3sl"``; ``"nab/"`` + ``"ec2_cpu..."``).
        values: the value columns kept (each a signal, or the one value of a long file).
        id_col: the column naming the entity, if the file holds several.
        layout: ``"wide"`` (one series per value column) or ``"long"``.
    """

    file: str
    prefix: str
    values: tuple[str, ...]
    id_col: str | None = None
    layout: Layout = "wide"


TRACES: dict[str, TraceSpec] = {
    "helios_earth_total": TraceSpec("helios_earth_total_10min.csv", "earth_total", _HELIOS),
    "helios_earth_vc": TraceSpec("helios_earth_vc_10min.csv", "earth_vc_", _HELIOS, "vc"),
    "alibaba_lora": TraceSpec(
        "alibaba_lora_requests_10min.csv",
        "alibaba_lora",
        ("arrivals", "exec_seconds", "busy_gpus_est"),
    ),
    "alibaba_openb": TraceSpec(
        "alibaba_openb2023_10min.csv",
        "alibaba_openb",
        (
            "pending_pods",
            "pending_gpus",
            "running_pods",
            "running_gpu_pods",
            "allocated_gpus",
            "arrivals_pods",
        ),
    ),
    "nab": TraceSpec("nab_cloudwatch_5min.csv", "nab/", ("value",), "series", "long"),
}
"""The shared traces by name."""


def shared_data_dir(start: Path | None = None) -> Path | None:
    """Find ``../shared/data`` next to the repository root, or None when it is absent.

    Args:
        start: a file or folder inside the repository; default this module's file.
            The root is the nearest folder up from it holding ``pyproject.toml``.
    """
    here = (start or Path(__file__)).resolve()
    for folder in (here, *here.parents):
        if (folder / "pyproject.toml").is_file():
            data = (folder / ".." / "shared" / "data").resolve()
            return data if data.is_dir() else None
    return None


def load_trace(
    name_or_path: str | Path,
    *,
    data_dir: Path | None = None,
    signals: Collection[str] | None = None,
) -> pd.DataFrame:
    """Load a shared trace as a long frame ``unique_id, ds (UTC), y (float)``.

    The frame is typed but not validated (NAB has missing values): pass it through
    :func:`forecaster.contract.validate_series`.

    Args:
        name_or_path: a key of :data:`TRACES` (e.g. ``"helios_earth_total"``) or the
            path of one of their files.
        data_dir: the folder of the shared files; default :func:`shared_data_dir`.
        signals: keep only these signals (the part after the last ``/``), e.g.
            ``{"demand_gpus"}``; default all.

    Raises:
        SourceError: the name or file is unknown, or the data folder is not found.
    """
    spec, path = _resolve(name_or_path, data_dir)
    table = read_table(path)
    ids: list[str] = []
    prefix: str | None = spec.prefix
    if spec.id_col is not None:
        if spec.id_col not in table.columns:
            raise SourceError(f"{str(path)!r} lacks its id column {spec.id_col!r}.")
        table["__entity"] = spec.prefix + table[spec.id_col].astype(str)
        ids, prefix = ["__entity"], None
    frame = to_long(
        table,
        layout=spec.layout,
        time_col="timestamp",
        id_cols=ids,
        value_cols=list(spec.values),
        prefix=prefix,
        source=str(path),
    )
    # The shared files hold naive UTC wall-clock times (their README says so).
    frame[DS] = pd.to_datetime(frame[DS], format="ISO8601").dt.tz_localize("UTC")
    frame[Y] = frame[Y].astype("float64")
    frame[UID] = frame[UID].astype(str)
    frame = derive_demand(frame)
    if signals is not None:
        frame = frame.loc[SeriesId.split(frame[UID])[1].isin(set(signals))]
    return frame.sort_values([UID, DS], kind="stable").reset_index(drop=True)


def derive_demand(
    df: pd.DataFrame,
    *,
    allocated: str = "allocated_gpus",
    pending: str = "pending_gpus",
    name: str = DEMAND,
) -> pd.DataFrame:
    """Append ``<entity>/<name>`` = allocated + pending for every entity with both.

    Only timestamps present in both inputs get a demand value; a missing input value
    stays missing (NaN) in the sum rather than counting as zero. A repeated timestamp
    of an input keeps its last row, as :func:`~forecaster.contract.validate_series` does.
    """
    entity, signal = SeriesId.split(df[UID])
    is_alloc = signal == allocated
    is_pend = signal == pending
    if not (is_alloc.any() and is_pend.any()):
        return df
    alloc = df.loc[is_alloc, [DS, Y]].assign(entity=entity[is_alloc].to_numpy())
    pend = df.loc[is_pend, [DS, Y]].assign(entity=entity[is_pend].to_numpy())
    # Repeated timestamps keep the last row, as validate_series does, not a cross product.
    alloc, pend = (x.drop_duplicates(["entity", DS], keep="last") for x in (alloc, pend))
    both = alloc.merge(pend, on=["entity", DS], suffixes=("_a", "_p"))
    demand = pd.DataFrame(
        {UID: both["entity"] + "/" + name, DS: both[DS], Y: both[f"{Y}_a"] + both[f"{Y}_p"]}
    )
    return pd.concat([df, demand], ignore_index=True)


def _resolve(name_or_path: str | Path, data_dir: Path | None) -> tuple[TraceSpec, Path]:
    if isinstance(name_or_path, str) and name_or_path in TRACES:
        folder = data_dir or shared_data_dir()
        if folder is None:
            raise SourceError(
                "The shared data folder ../shared/data (next to the repository) was not "
                f"found, so trace {name_or_path!r} cannot be loaded; pass data_dir=."
            )
        spec = TRACES[name_or_path]
        return spec, Path(folder) / spec.file
    path = Path(name_or_path)
    for spec in TRACES.values():
        if path.name == spec.file:
            return spec, path
    raise SourceError(
        f"Unknown trace {str(name_or_path)!r}: known names are {sorted(TRACES)} (files "
        f"{sorted(s.file for s in TRACES.values())}). Read other files with load_frame()."
    )
