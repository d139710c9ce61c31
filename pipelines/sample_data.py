"""Deterministic generator of the committed sample: a small GPU cluster's metrics.

Three pools of a simulated cluster, every signal of the data contract at 5-minute
steps for four weeks:

- ``a100-train`` and ``h100-train``: training pools. Jobs arrive with a weak daily
  and weekly rhythm, queue until GPUs are free, and run for hours; hyperparameter
  sweeps arrive as bursts; multi-day pretraining runs set a persistent level that
  shifts when they start and end; a team onboarding raises the arrival rate.
- ``l4-infer``: an inference pool. One GPU per replica, replicas follow request
  traffic with a strong daily cycle, quiet weekends, traffic spikes and a launch that
  shifts the level up.

Every pool is scaled by a reactive autoscaler with cluster-autoscaler's semantics:
nodes are requested only for pending work and arrive one lead time later; a node
unneeded for 10 minutes is removed. So queues build up at every burst, which is what
Foresight exists to prevent. ``h100-train`` also has a scrape outage: a few hours
with no samples for any of its signals.

The output is byte-identical for the same seed, so the committed
``data/sample/metrics.csv.gz`` can be regenerated and checked.
"""

from __future__ import annotations

import gzip
import heapq
import io
import math
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt
import pandas as pd

from forecaster.types import DS, UID, SeriesId, Y
from pipelines.config.signals import ALLOCATED_GPUS, GPU_UTIL, NODES, QUEUE_GPUS

SAMPLE_SEED: Final = 20250303
SAMPLE_START: Final = "2025-03-03T00:00:00Z"
"""A Monday, so weekday and weekend effects line up with calendar weeks."""
METRICS_FILE: Final = "metrics.csv.gz"

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class _Capacity:
    """The part of a pool the autoscaler sees; matches data/sample/pools.yaml."""

    name: str
    gpus_per_node: int
    min_nodes: int
    max_nodes: int
    lead_time_min: float


@dataclass(frozen=True)
class _TrainingWorkload:
    base_jobs_per_hour: float
    job_gpus: tuple[int, ...]
    job_gpu_probs: tuple[float, ...]
    median_job_hours: float
    job_hours_sigma: float
    daily_amplitude: float
    weekend_factor: float
    busy_util: float
    sweeps_per_day: float
    sweep_jobs: tuple[int, int]
    sweep_gpus: tuple[int, ...]
    long_runs: tuple[tuple[float, float, int], ...]
    """Multi-day runs as (start day, length in days, GPUs)."""
    rate_shift: tuple[float, float]
    """From this day on, arrivals are multiplied by this factor."""


@dataclass(frozen=True)
class _InferenceWorkload:
    peak_gpus: float
    trough_ratio: float
    peak_hour_utc: float
    weekend_factor: float
    busy_util: float
    spikes: tuple[tuple[float, float, float], ...]
    """Traffic spikes as (start day, length in hours, multiplier)."""
    level_shift: tuple[float, float]
    """From this day on, traffic is multiplied by this factor."""


_POOLS: Final[tuple[tuple[_Capacity, _TrainingWorkload | _InferenceWorkload], ...]] = (
    (
        _Capacity("a100-train", gpus_per_node=8, min_nodes=2, max_nodes=48, lead_time_min=10),
        _TrainingWorkload(
            base_jobs_per_hour=3.0,
            job_gpus=(1, 2, 4, 8, 16, 32),
            job_gpu_probs=(0.2, 0.15, 0.2, 0.25, 0.12, 0.08),
            median_job_hours=3.0,
            job_hours_sigma=1.0,
            daily_amplitude=0.3,
            weekend_factor=0.6,
            busy_util=88.0,
            sweeps_per_day=0.5,
            sweep_jobs=(12, 30),
            sweep_gpus=(1, 2, 4),
            long_runs=((3.4, 6.0, 64), (16.2, 9.0, 96)),
            rate_shift=(11.0, 1.35),
        ),
    ),
    (
        _Capacity("h100-train", gpus_per_node=8, min_nodes=1, max_nodes=32, lead_time_min=15),
        _TrainingWorkload(
            base_jobs_per_hour=0.38,
            job_gpus=(8, 16, 32, 64),
            job_gpu_probs=(0.4, 0.3, 0.2, 0.1),
            median_job_hours=5.0,
            job_hours_sigma=0.9,
            daily_amplitude=0.2,
            weekend_factor=0.7,
            busy_util=93.0,
            sweeps_per_day=0.3,
            sweep_jobs=(6, 12),
            sweep_gpus=(8,),
            long_runs=((2.5, 11.0, 96), (15.0, 10.0, 64)),
            rate_shift=(20.0, 0.8),
        ),
    ),
    (
        _Capacity("l4-infer", gpus_per_node=4, min_nodes=2, max_nodes=30, lead_time_min=10),
        _InferenceWorkload(
            peak_gpus=72.0,
            trough_ratio=0.2,
            peak_hour_utc=16.0,
            weekend_factor=0.45,
            busy_util=82.0,
            spikes=((6.6, 1.5, 1.8), (13.75, 1.0, 2.2), (23.4, 2.0, 1.6)),
            level_shift=(15.375, 1.3),
        ),
    ),
)

_OUTAGE: Final = ("h100-train", 19.0 + 2 / 24 + 10 / 1440, 3.5)
"""A scrape outage: (pool, start day, hours) with no samples for any signal."""


_BULK_DELETE: Final = 10


class _ReactiveAutoscaler:
    """Cluster-autoscaler's semantics, in whole nodes of pooled GPUs.

    Scale-up requests nodes for work that does not fit, ready one lead time later
    (plus up to one step of jitter); a surplus of nodes that lasts ``unneeded_steps``
    is removed, at most 10 at a time (cluster-autoscaler's default bulk delete of empty
    nodes), never below what running work occupies.
    """

    def __init__(
        self, pool: _Capacity, lead_steps: int, unneeded_steps: int, rng: np.random.Generator
    ) -> None:
        self.pool = pool
        self.lead_steps = lead_steps
        self.unneeded_steps = unneeded_steps
        self.rng = rng
        self.ready = pool.min_nodes
        self.provisioning: list[int] = []
        self.surplus_for = 0

    @property
    def capacity(self) -> int:
        return self.ready * self.pool.gpus_per_node

    def arrive(self, step: int) -> None:
        arrived = [at for at in self.provisioning if at <= step]
        self.provisioning = [at for at in self.provisioning if at > step]
        self.ready += len(arrived)

    def decide(self, step: int, allocated: int, queued: int) -> None:
        gpn = self.pool.gpus_per_node
        needed = min(self.pool.max_nodes, max(self.pool.min_nodes, -(-(allocated + queued) // gpn)))
        in_flight = self.ready + len(self.provisioning)
        for _ in range(needed - in_flight):
            self.provisioning.append(step + self.lead_steps + int(self.rng.integers(0, 2)))
        surplus = self.ready - max(needed, self.pool.min_nodes, -(-allocated // gpn))
        self.surplus_for = self.surplus_for + 1 if surplus > 0 and queued == 0 else 0
        if self.surplus_for >= self.unneeded_steps:
            self.ready -= min(surplus, _BULK_DELETE)
            self.surplus_for = 0


@dataclass(frozen=True)
class _Clock:
    index: pd.DatetimeIndex
    step_hours: float

    @property
    def day(self) -> FloatArray:
        return np.arange(len(self.index), dtype=np.float64) * self.step_hours / 24.0

    @property
    def hour(self) -> FloatArray:
        return np.asarray(self.index.hour + self.index.minute / 60.0, dtype=np.float64)

    @property
    def weekend(self) -> npt.NDArray[np.bool_]:
        return np.asarray(self.index.dayofweek >= 5, dtype=np.bool_)

    def steps(self, hours: float) -> int:
        return max(1, round(hours / self.step_hours))


def _ar1(rng: np.random.Generator, n: int, phi: float, sigma: float) -> FloatArray:
    """A stationary AR(1) path: slowly wandering noise, as real load has."""
    shocks = rng.normal(0.0, sigma * math.sqrt(1 - phi * phi), n)
    out = np.empty(n)
    out[0] = rng.normal(0.0, sigma)
    for i in range(1, n):
        out[i] = phi * out[i - 1] + shocks[i]
    return out


def _simulate_training(
    pool: _Capacity, work: _TrainingWorkload, clock: _Clock, rng: np.random.Generator
) -> dict[str, FloatArray]:
    n = len(clock.index)
    day, hour = clock.day, clock.hour
    rate = np.full(n, work.base_jobs_per_hour * clock.step_hours)
    rate *= 1 + work.daily_amplitude * np.cos(2 * np.pi * (hour - 15.0) / 24.0)
    rate *= np.where(clock.weekend, work.weekend_factor, 1.0)
    rate *= np.where(day >= work.rate_shift[0], work.rate_shift[1], 1.0)
    # Sweeps start in the 10 working hours of weekdays, when people launch them.
    sweep_p = work.sweeps_per_day * clock.step_hours / 10.0
    sweep_at = (rng.random(n) < sweep_p) & (hour >= 8) & (hour < 18) & ~clock.weekend
    long_at = {
        round(start * 24 / clock.step_hours): (length, gpus)
        for start, length, gpus in work.long_runs
    }
    noise = _ar1(rng, n, phi=0.97, sigma=3.0)

    scaler = _ReactiveAutoscaler(
        pool,
        lead_steps=clock.steps(pool.lead_time_min / 60),
        unneeded_steps=clock.steps(1 / 6),
        rng=rng,
    )
    queue: deque[tuple[int, int]] = deque()  # (gpus, duration in steps), FIFO
    running: list[tuple[int, int]] = []  # heap of (end step, gpus)
    allocated = 0
    out = {name: np.zeros(n) for name in (QUEUE_GPUS, ALLOCATED_GPUS, GPU_UTIL, NODES)}
    for t in range(n):
        scaler.arrive(t)
        while running and running[0][0] <= t:
            allocated -= heapq.heappop(running)[1]
        for _ in range(rng.poisson(rate[t])):
            gpus = int(rng.choice(work.job_gpus, p=work.job_gpu_probs))
            hours = work.median_job_hours * math.exp(rng.normal(0.0, work.job_hours_sigma))
            queue.append((gpus, clock.steps(min(hours, 72.0))))
        if sweep_at[t]:
            for _ in range(rng.integers(*work.sweep_jobs, endpoint=True)):
                gpus = int(rng.choice(work.sweep_gpus))
                queue.append((gpus, clock.steps(rng.uniform(0.75, 2.5))))
        if t in long_at:
            length, gpus = long_at[t]
            queue.append((gpus, clock.steps(length * 24)))
        allocated = _start_fitting(queue, running, t, scaler.capacity - allocated) + allocated
        queued = sum(gpus for gpus, _ in queue)
        scaler.decide(t, allocated, queued)
        busy = min(99.0, max(40.0, work.busy_util + float(noise[t])))
        out[QUEUE_GPUS][t] = queued
        out[ALLOCATED_GPUS][t] = allocated
        out[NODES][t] = scaler.ready
        out[GPU_UTIL][t] = busy * allocated / scaler.capacity if scaler.capacity else 0.0
    return out


def _start_fitting(
    queue: deque[tuple[int, int]], running: list[tuple[int, int]], t: int, free: int
) -> int:
    """Start queued jobs that fit in ``free`` GPUs, in order; return the GPUs started.

    Jobs that do not fit stay queued while smaller ones behind them start (backfill),
    as Kueue's BestEffortFIFO does.
    """
    started = 0
    waiting: deque[tuple[int, int]] = deque()
    while queue:
        gpus, steps = queue.popleft()
        if gpus <= free - started:
            heapq.heappush(running, (t + steps, gpus))
            started += gpus
        else:
            waiting.append((gpus, steps))
    queue.extend(waiting)
    return started


def _simulate_inference(
    pool: _Capacity, work: _InferenceWorkload, clock: _Clock, rng: np.random.Generator
) -> dict[str, FloatArray]:
    n = len(clock.index)
    day, hour = clock.day, clock.hour
    # A smooth daily wave with a sharper peak than a sine: traffic follows people.
    wave = ((1 + np.cos(2 * np.pi * (hour - work.peak_hour_utc) / 24.0)) / 2) ** 1.5
    demand = work.peak_gpus * (work.trough_ratio + (1 - work.trough_ratio) * wave)
    demand *= np.where(clock.weekend, work.weekend_factor, 1.0)
    demand *= np.where(day >= work.level_shift[0], work.level_shift[1], 1.0)
    for start, hours, factor in work.spikes:
        inside = (day >= start) & (day < start + hours / 24)
        demand *= np.where(inside, factor, 1.0)
    demand *= np.exp(_ar1(rng, n, phi=0.9, sigma=0.06))
    desired = np.ceil(demand).astype(np.int64)
    noise = _ar1(rng, n, phi=0.8, sigma=2.0)

    scaler = _ReactiveAutoscaler(
        pool,
        lead_steps=clock.steps(pool.lead_time_min / 60),
        unneeded_steps=clock.steps(1 / 6),
        rng=rng,
    )
    # The HPA scales replicas down only after a 5-minute stabilisation window.
    hold = clock.steps(5 / 60)
    running = 0
    out = {name: np.zeros(n) for name in (QUEUE_GPUS, ALLOCATED_GPUS, GPU_UTIL, NODES)}
    for t in range(n):
        scaler.arrive(t)
        target = int(desired[max(0, t - hold) : t + 1].max())
        running = min(target, scaler.capacity)
        pending = target - running
        scaler.decide(t, running, pending)
        load = min(1.0, demand[t] / running) if running else 0.0
        busy = min(99.0, max(0.0, work.busy_util * load**0.8 + float(noise[t])))
        out[QUEUE_GPUS][t] = pending
        out[ALLOCATED_GPUS][t] = running
        out[NODES][t] = scaler.ready
        out[GPU_UTIL][t] = busy * running / scaler.capacity if scaler.capacity else 0.0
    return out


def generate_sample(
    seed: int = SAMPLE_SEED,
    days: int = 28,
    step: str = "5min",
    start: str | pd.Timestamp = SAMPLE_START,
) -> pd.DataFrame:
    """Simulate the sample cluster and return its metrics as a long series frame.

    Args:
        seed: seeds every random draw; each pool has its own stream.
        days: length of the simulation.
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
    clock = _Clock(
        index=pd.date_range(first, periods=periods, freq=step_delta),
        step_hours=step_delta / pd.Timedelta(hours=1),
    )
    frames = []
    for number, (capacity, workload) in enumerate(_POOLS):
        rng = np.random.default_rng([seed, number])
        if isinstance(workload, _TrainingWorkload):
            signals = _simulate_training(capacity, workload, clock, rng)
        else:
            signals = _simulate_inference(capacity, workload, clock, rng)
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


def _observed(pool: str, clock: _Clock) -> npt.NDArray[np.bool_]:
    name, start_day, hours = _OUTAGE
    day = clock.day
    if pool != name:
        return np.ones(len(day), dtype=np.bool_)
    return ~((day >= start_day) & (day < start_day + hours / 24))


def write_sample(directory: Path, seed: int = SAMPLE_SEED) -> Path:
    """Generate the sample and write it as ``metrics.csv.gz`` in ``directory``.

    The gzip header carries no file name and a zero timestamp, so the same seed
    always writes the same bytes.

    Returns:
        The path of the written file.
    """
    frame = generate_sample(seed=seed)
    # Format each distinct timestamp once: strftime over every row is the slow part.
    codes, stamps = pd.factorize(frame[DS])
    frame[DS] = np.asarray(pd.DatetimeIndex(stamps).strftime("%Y-%m-%dT%H:%M:%SZ"))[codes]
    text = frame.to_csv(index=False, float_format="%.10g", lineterminator="\n")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / METRICS_FILE
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
