"""Deterministic generator of the committed sample: a small GPU cluster's metrics (docs/jobs.md)."""

from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt
import pandas as pd

from forecaster.types import DS, UID, SeriesId, Y
from pipelines.config.signals import GPU_UTIL
from pipelines.dataset import SAMPLE_FILE
from pipelines.sample_cluster import OUTAGE, POOLS, TrainingWorkload
from pipelines.sample_workloads import Clock, simulate_inference, simulate_training

SAMPLE_SEED: Final = 20250303
SAMPLE_START: Final = "2025-03-03T00:00:00Z"
"""A Monday, so weekday and weekend effects line up with calendar weeks."""


def generate_sample(
    seed: int = SAMPLE_SEED,
    days: int = 28,
    step: str = "5min",
    start: str | pd.Timestamp = SAMPLE_START,
) -> pd.DataFrame:
    """Simulate the sample cluster and return its metrics as a long series frame.

    Args:
        seed: seeds every random draw; each pool has its own stream.
        step: sampling interval, a pandas frequency such as ``"5min"``.
        start: first timestamp (UTC).

    Returns:
        Columns ``unique_id`` (``<pool>/<signal>``), ``ds`` (UTC), ``y`` (float),
        sorted by ``unique_id`` then ``ds``; the outage's rows are absent.
    """
    step_delta = pd.Timedelta(step)
    first = pd.Timestamp(start)
    first = first.tz_localize("UTC") if first.tzinfo is None else first.tz_convert("UTC")
    periods = int(pd.Timedelta(days=days) / step_delta)
    clock = Clock(
        index=pd.date_range(first, periods=periods, freq=step_delta),
        step_hours=step_delta / pd.Timedelta(hours=1),
    )
    frames = []
    for number, (capacity, workload) in enumerate(POOLS):
        rng = np.random.default_rng([seed, number])
        if isinstance(workload, TrainingWorkload):
            signals = simulate_training(capacity, workload, clock, rng)
        else:
            signals = simulate_inference(capacity, workload, clock, rng)
        keep = _observed(capacity.name, clock)
        for signal, values in sorted(signals.items()):
            decimals = 1 if signal == GPU_UTIL else 0
            frames.append(
                pd.DataFrame(
                    {
                        UID: str(SeriesId(capacity.name, signal)),
                        DS: clock.index[keep],
                        Y: np.round(values[keep], decimals).astype(np.float64),
                    }
                )
            )
    frame = pd.concat(frames, ignore_index=True)
    return frame.sort_values([UID, DS], kind="stable").reset_index(drop=True)


def _observed(pool: str, clock: Clock) -> npt.NDArray[np.bool_]:
    name, start_day, hours = OUTAGE
    day = clock.day
    if pool != name:
        return np.ones(len(day), dtype=np.bool_)
    return ~((day >= start_day) & (day < start_day + hours / 24))


def write_sample(directory: Path, seed: int = SAMPLE_SEED) -> Path:
    """Generate the sample and write it as ``metrics.csv.gz`` in ``directory``.

    The gzip header carries no file name and a zero timestamp, so the same seed
    always writes the same bytes.
    """
    frame = generate_sample(seed=seed)
    # Format each distinct timestamp once: strftime over every row is the slow part.
    codes, stamps = pd.factorize(frame[DS])
    frame[DS] = np.asarray(pd.DatetimeIndex(stamps).strftime("%Y-%m-%dT%H:%M:%SZ"))[codes]
    text = frame.to_csv(index=False, float_format="%.10g", lineterminator="\n")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / SAMPLE_FILE
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, compresslevel=9, mtime=0) as gz:
        gz.write(text.encode("utf-8"))
    path.write_bytes(buffer.getvalue())
    return path


def main() -> None:
    """Regenerate ``data/sample/metrics.csv.gz`` under the working directory."""
    print(write_sample(Path("data") / "sample"))


if __name__ == "__main__":
    main()
