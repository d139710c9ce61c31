"""The fleets the peak forecaster learns from, one per decision-quality case.

A case replays one demand series; the peak forecaster (``--model peak``) learns from
the series' *fleet*: its own pool's covariates (queue depth, pending jobs, arrivals)
and the other pools of the same trace, in the case's units and on its step. The
shared cases: Earth total alone (its own class: pooled with the VCs its pinball
loss was 1.2-1.8x the reference on the peak benchmark's tune window), the 16 Earth
VCs together (with the training's default parameters), and Alibaba LoRA scaled as
the case is. With ``--data`` files, the files' series are the fleet, and the model
forecasts the case's own signal (``demand_gpus``, or whatever ``--series`` named) over
every pool of the files that has it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from forecaster.contract import validate_series
from forecaster.loaders import load_trace
from forecaster.loaders.traces import DEMAND
from forecaster.peak.fleet import fleet_frame
from forecaster.types import DS, UID, SeriesId, Y

HELIOS_SIGNALS = frozenset({"demand_gpus", "pending_gpus", "pending_jobs"})
VC_PARAMS: Mapping[str, Any] = {}
"""The Earth VCs' parameters: the training's defaults, as serving fits them (the training
has no per-fleet setting, so neither the replay nor the peak benchmark uses one)."""


@dataclass(frozen=True)
class CaseFleet:
    """What the peak forecaster of one case learns from.

    Attributes:
        name: the fleet's name (cases of one fleet share its daily fits).
        frame: long frame ``unique_id, ds, y`` in the case's units, on the trace's step.
        target: the id of the replayed series in ``frame``.
        params: keyword arguments of the peak forecaster for this fleet.
    """

    name: str
    frame: pd.DataFrame
    target: str
    params: Mapping[str, Any] = field(default_factory=dict)


def default_fleets(shared: Path, vcs: tuple[str, ...], lora_peak: float) -> dict[str, CaseFleet]:
    """The fleet of every default case (names as ``decision_quality.default_cases``)."""
    total = _clean(load_trace("helios_earth_total", data_dir=shared, signals=HELIOS_SIGNALS))
    vc = _clean(load_trace("helios_earth_vc", data_dir=shared, signals=HELIOS_SIGNALS))
    lora = load_trace("alibaba_lora", data_dir=shared, signals={"busy_gpus_est", "arrivals"})
    busy = lora[UID] == "alibaba_lora/busy_gpus_est"
    lora.loc[busy, Y] *= lora_peak / float(lora.loc[busy, Y].max())
    lora.loc[busy, UID] = f"alibaba_lora/{DEMAND}"
    fleets = {"earth_total": CaseFleet("helios_total", total, f"earth_total/{DEMAND}")}
    for name in vcs:
        fleets[f"earth_vc_{name}"] = CaseFleet(
            "helios_vc", vc, f"earth_vc_{name}/{DEMAND}", VC_PARAMS
        )
    fleets["alibaba_lora_x"] = CaseFleet("alibaba_lora", _clean(lora), f"alibaba_lora/{DEMAND}")
    return fleets


def file_fleets(raw: pd.DataFrame, cases: list[str]) -> dict[str, CaseFleet]:
    """Every case of ``--data`` files learns from all the files' series.

    A case's target signal is its own (``<pool>/<signal>``), so a request rate is
    forecast as a rate; cases of one signal share a fleet (and its daily fits).

    Raises:
        DataValidationError: a case is not ``<pool>/<signal>``, or the files' series
            break the data contract.
    """
    clean, _ = validate_series(raw.reset_index(drop=True))
    frames: dict[str, pd.DataFrame] = {}
    fleets = {}
    for uid in cases:
        signal = SeriesId.parse(uid).signal
        if signal not in frames:
            frames[signal] = fleet_frame(clean, (signal,))
        fleets[uid.replace("/", "_")] = CaseFleet(
            f"files/{signal}", frames[signal], uid, {"targets": (signal,)}
        )
    return fleets


def on_step(frame: pd.DataFrame, step: pd.Timedelta) -> pd.DataFrame:
    """The fleet on a finer step, each value held (as the case's series is for a 5-min lead)."""
    current = pd.Timedelta(frame.groupby(UID)[DS].apply(lambda d: d.diff().min()).min())
    if step >= current:
        return frame
    parts = []
    for uid, group in frame.groupby(UID, sort=True):
        fine = group.set_index(DS)[Y].resample(step).ffill()
        parts.append(pd.DataFrame({UID: uid, DS: fine.index, Y: fine.to_numpy()}))
    return pd.concat(parts, ignore_index=True)


def _clean(frame: pd.DataFrame) -> pd.DataFrame:
    """Validated, UTC, with demand clipped at zero as the cases are."""
    clean, _ = validate_series(frame.reset_index(drop=True))
    # The same fleet frame the training fits the served peak model on.
    return fleet_frame(clean)
