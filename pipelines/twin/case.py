"""A twin case: the pool, its history and the demand replayed, and the deployment they run in.

Details: docs/twin.md, "Notes from the code", `pipelines/twin/case.py`."""

from __future__ import annotations

import math
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final

import numpy as np
import pandas as pd
import yaml

from forecaster.exceptions import DataValidationError
from forecaster.loaders import load_trace
from forecaster.types import DS, UID, SeriesId, Y
from pipelines.config.pools import PoolConfig
from pipelines.config.pools_file import load_pools
from pipelines.config.settings import Settings, load_settings
from pipelines.dataset import SAMPLE_FILE
from pipelines.jobs.forecast import run_forecast
from pipelines.jobs.train import run_train
from pipelines.store.store import Store, open_store
from pipelines.twin.loop import ForecastRun

SIGNALS: Final = ("allocated_gpus", "queue_gpus", "nodes")
"""The pool signals the cluster reports and the twin pushes."""
REFRESH_SECONDS: Final = 0.25
"""The service's background refresh in a twin deployment (``service.refresh_seconds``)."""
_FAR: Final = 10**6  # minutes: the scheduler's timed jobs never fire during a run


@dataclass(frozen=True)
class TwinCase:
    """What one twin run replays.

    Attributes:
        name: the case's name (for tables and files).
        pool: the pool (its ``name`` is the service's pool).
        history: long frame ``unique_id, ds, y`` of the pool's signals before the window.
        demand: GPUs of work wanted per step over the replayed window (UTC index).
        initial_nodes: ready nodes at the window's first step.
    """

    name: str
    pool: PoolConfig
    history: pd.DataFrame
    demand: pd.Series
    initial_nodes: int

    @property
    def step(self) -> timedelta:
        """The series step."""
        index = pd.DatetimeIndex(self.demand.index)
        return pd.Timedelta(index[1] - index[0]).to_pytimedelta()


def _window(index: pd.DatetimeIndex, history: timedelta, steps: int) -> pd.DatetimeIndex:
    start = index[0] + history
    kept = index[index >= start][:steps]
    if len(kept) < max(2, steps):
        raise DataValidationError(
            f"the series has {len(kept)} steps after {history} of history, fewer than the "
            f"{steps} asked for; replay fewer steps (--steps) or use less history"
        )
    return kept


def long_signals(pool: str, wide: pd.DataFrame) -> pd.DataFrame:
    parts = [
        pd.DataFrame({UID: f"{pool}/{signal}", DS: wide.index, Y: wide[signal].to_numpy()})
        for signal in SIGNALS
    ]
    return pd.concat(parts, ignore_index=True)


def sample_signals(sample_dir: Path, pool: str) -> pd.DataFrame:
    """The committed sample's signals of ``pool``, one column each, on a regular UTC grid."""
    raw = pd.read_csv(sample_dir / SAMPLE_FILE)
    raw = raw[raw[UID].str.startswith(f"{pool}/")]
    wide = raw.pivot(index=DS, columns=UID, values=Y)
    wide.index = pd.DatetimeIndex(wide.index).tz_convert("UTC")
    wide.columns = [SeriesId.parse(str(c)).signal for c in wide.columns]
    wide = wide.asfreq(pd.infer_freq(wide.index[:10]) or "5min")
    return wide.ffill()  # the sample's scrape outage: the last reading holds


def sample_case(sample_dir: Path, pool: str, history: timedelta, steps: int) -> TwinCase:
    """A pool of the committed sample: its signals before the window, its demand after.

    Raises:
        DataValidationError: the pool is not in the sample or the window does not fit.
    """
    pools = {p.name: p for p in load_pools(sample_dir / "pools.yaml").pools}
    if pool not in pools:
        raise DataValidationError(
            f"the sample has no pool {pool!r}; pass one of {', '.join(pools)} (--pool)"
        )
    wide = sample_signals(sample_dir, pool)
    window = _window(pd.DatetimeIndex(wide.index), history, steps)
    demand = (wide["allocated_gpus"] + wide["queue_gpus"]).loc[window]
    before = wide[wide.index < window[0]]
    return TwinCase(
        name=f"sample_{pool}",
        pool=pools[pool],
        history=long_signals(pool, before),
        demand=demand.rename(f"{pool}/demand_gpus"),
        initial_nodes=int(wide["nodes"].loc[window[0]]),
    )


def trace_case(
    shared: Path | None,
    history: timedelta,
    steps: int,
    *,
    lead: timedelta = timedelta(minutes=10),
    gpus_per_node: int = 8,
) -> TwinCase:
    """Helios Earth total as a pool, sized as ``benchmarks/decision_quality.py`` sizes it.

    8 GPUs per node, no floor, room for twice the trace's peak, target utilisation 1,
    the given lead; demand = allocated + pending GPUs. Its history is the trace's own
    allocated and pending GPUs with the nodes that demand would occupy.

    ``shared``: the shared traces folder; None finds ``../shared/data``.

    Raises:
        SourceError: the shared data folder or the trace is missing.
        DataValidationError: the window does not fit the trace.
    """
    frame = load_trace(
        "helios_earth_total", data_dir=shared, signals={"allocated_gpus", "pending_gpus"}
    )
    wide = frame.pivot(index=DS, columns=UID, values=Y)
    wide.columns = [SeriesId.parse(str(c)).signal for c in wide.columns]
    wide = wide.rename(columns={"pending_gpus": "queue_gpus"}).clip(lower=0.0)
    demand_all = wide["allocated_gpus"] + wide["queue_gpus"]
    wide["nodes"] = np.ceil(demand_all / gpus_per_node)
    name = "earth-total"
    peak_nodes = math.ceil(float(demand_all.max()) / gpus_per_node)
    pool = PoolConfig(
        name=name,
        node_group_id="earth_total",
        gpus_per_node=gpus_per_node,
        min_nodes=0,
        max_nodes=2 * peak_nodes + 4,
        lead_time=lead,
        target_utilisation=1.0,
    )
    window = _window(pd.DatetimeIndex(wide.index), history, steps)
    demand = demand_all.loc[window]
    return TwinCase(
        name="earth_total",
        pool=pool,
        history=long_signals(name, wide[wide.index < window[0]]),
        demand=demand.rename(f"{name}/demand_gpus"),
        initial_nodes=math.ceil(float(demand.iloc[0]) / gpus_per_node),
    )


def _write_config(workdir: Path) -> tuple[Path, Settings]:
    """The settings file of a deployment in ``workdir`` (its pools file is there too).

    Returns:
        The file (for ``foresight serve --config``) and the twin's own settings: the
        same values but the API's group, which only the service reads (the pipelines'
        settings do not know it and would refuse the file).
    """
    config: dict[str, Any] = {
        "root": str(workdir),
        "pools_file": str(workdir / "pools.yaml"),
        # No committed sample to seed from: the store holds the case's history only.
        "sample_dir": str(workdir / "no-sample"),
        "scheduler": {
            "workers": 1,
            "ingest_every_minutes": _FAR,
            "forecast_every_minutes": _FAR,
            "evaluate_every_minutes": _FAR,
            "publish_every_minutes": _FAR,
            "train_cron": "0 3 1 1 *",
        },
    }
    # The twin waits for the service to serve each step's run: a short refresh makes
    # that wait short (nothing else in the service depends on the wall clock here).
    served = {**config, "service": {"refresh_seconds": REFRESH_SECONDS}}
    config_file = workdir / "settings.yaml"
    config_file.write_text(yaml.safe_dump(served, sort_keys=False), encoding="utf-8")
    return config_file, load_settings(**config)


def prepare(case: TwinCase, workdir: Path) -> tuple[Path, Settings]:
    """Lay out the case's deployment in ``workdir``: pools, settings, history, champion.

    Returns:
        The settings file (for ``foresight serve --config``) and the settings.

    Raises:
        DataValidationError: the champion could not be trained on the history.
    """
    return deploy([case.pool], case.history, case.step, workdir)


def deploy(
    pools: Sequence[PoolConfig], history: pd.DataFrame, step: timedelta, workdir: Path
) -> tuple[Path, Settings]:
    """Lay out a deployment of ``pools`` in ``workdir``: pools file, settings, history
    (long frame of the pools' signals) and a champion trained on it.

    Raises:
        DataValidationError: the champion could not be trained on the history.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "pools.yaml").write_text(
        yaml.safe_dump({"pools": [p.model_dump(mode="json") for p in pools]}, sort_keys=False),
        encoding="utf-8",
    )
    config_file, settings = _write_config(workdir)

    with open_store(settings.store_url) as opened:
        opened.samples.upsert_with_demand(history)
        end = pd.Timestamp(history[DS].max()).to_pydatetime()
        trained = run_train(settings, store=opened, now=end + step, fast=True)
    if trained.outcome not in ("ok", "partial"):
        raise DataValidationError(f"training the twin's champion failed: {trained.summary}")
    return config_file, settings


def copy_deployment(template: Path, workdir: Path) -> tuple[Path, Settings]:
    """A deployment :func:`prepare` laid out, copied to ``workdir`` before any run.

    The store (history only) and the model registry are copied, so a second run
    starts from the same state without training again; the registry's artifacts stay
    in ``template``, which must outlive the copy.
    """
    shutil.copytree(template, workdir, ignore=shutil.ignore_patterns("serve.log"))
    return _write_config(workdir)


class JobForecaster:
    """Runs the forecast job (:func:`pipelines.jobs.forecast.run_forecast`) for a time.

    Args:
        store: the store the service reads (the job borrows it).
    """

    def __init__(self, settings: Settings, store: Store) -> None:
        self.settings, self.store = settings, store

    def __call__(self, now: datetime) -> ForecastRun:
        """Run it with ``now`` as ``generated_at``, as the scheduler under the replay clock does."""
        report = run_forecast(self.settings, store=self.store, now=now)
        version = report.details.get("version")
        return ForecastRun(
            report.outcome, None if version is None else str(version), report.summary
        )
