"""The cluster the committed sample simulates: its pools, their workloads, one outage.

Details: docs/jobs.md, "Notes from the code", `pipelines/sample_cluster.py`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Capacity:
    """The part of a pool the autoscaler sees; matches data/sample/pools.yaml."""

    name: str
    gpus_per_node: int
    min_nodes: int
    max_nodes: int
    lead_time_min: float


@dataclass(frozen=True)
class TrainingWorkload:
    """How jobs arrive on a training pool and how long they run."""

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
class InferenceWorkload:
    """How request traffic, in GPUs of replicas, moves on an inference pool."""

    peak_gpus: float
    trough_ratio: float
    peak_hour_utc: float
    weekend_factor: float
    busy_util: float
    spikes: tuple[tuple[float, float, float], ...]
    """Traffic spikes as (start day, length in hours, multiplier)."""
    level_shift: tuple[float, float]
    """From this day on, traffic is multiplied by this factor."""


POOLS: Final[tuple[tuple[Capacity, TrainingWorkload | InferenceWorkload], ...]] = (
    (
        Capacity("a100-train", gpus_per_node=8, min_nodes=2, max_nodes=48, lead_time_min=10),
        TrainingWorkload(
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
        Capacity("h100-train", gpus_per_node=8, min_nodes=1, max_nodes=32, lead_time_min=15),
        TrainingWorkload(
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
        Capacity("l4-infer", gpus_per_node=4, min_nodes=2, max_nodes=30, lead_time_min=10),
        InferenceWorkload(
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
"""The sample's pools: what the autoscaler sees of each, and the workload on it."""

OUTAGE: Final = ("h100-train", 19.0 + 2 / 24 + 10 / 1440, 3.5)
"""A scrape outage: (pool, start day, hours) with no samples for any signal."""
