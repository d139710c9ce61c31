"""The sample's workloads played step by step under a reactive autoscaler (docs/jobs.md)."""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt
import pandas as pd

from pipelines.config.signals import ALLOCATED_GPUS, GPU_UTIL, NODES, QUEUE_GPUS
from pipelines.sample_cluster import Capacity, InferenceWorkload, TrainingWorkload

FloatArray = npt.NDArray[np.float64]

_BULK_DELETE: Final = 10


class _ReactiveAutoscaler:
    """Cluster-autoscaler's semantics, in whole nodes of pooled GPUs."""

    def __init__(
        self, pool: Capacity, lead_steps: int, unneeded_steps: int, rng: np.random.Generator
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
class Clock:
    """The simulation's time steps, with the calendar features workloads follow."""

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


def simulate_training(
    pool: Capacity, work: TrainingWorkload, clock: Clock, rng: np.random.Generator
) -> dict[str, FloatArray]:
    """Play a training pool: jobs, sweeps and long runs queue for a reactive autoscaler."""
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
    """Start queued jobs that fit in ``free`` GPUs, in order; return the GPUs started."""
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


def simulate_inference(
    pool: Capacity, work: InferenceWorkload, clock: Clock, rng: np.random.Generator
) -> dict[str, FloatArray]:
    """Play an inference pool: replicas follow traffic, nodes a reactive autoscaler."""
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
