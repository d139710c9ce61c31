"""``GET /dashboard/pool/{pool}``: what the dashboard draws for one pool (docs/dashboard.md)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Final

from api.dashboard.explain import headline, terms
from api.dashboard.schemas import (
    Age,
    BandOut,
    BandPoint,
    HistoryPoint,
    LiveErrorOut,
    PoolViewOut,
    ScaleEvent,
    StepPoint,
)
from api.errors import PoolUnavailableError
from api.service import RecommendationService
from forecaster.loaders import DEMAND
from forecaster.types import DS, UID, Y
from pipelines.config.pools import PoolConfig
from pipelines.config.signals import NODES
from pipelines.store.recommendations import DesiredNodes
from policy.types import DemandForecast

SIGNALS: Final = (DEMAND, NODES)
"""The signals the dashboard charts (history, pool view): what was demanded and what was there."""
MAX_EVENTS: Final = 200
"""Events beyond this many (the newest kept) would only blot the chart."""


def age(at: datetime | None, now: datetime) -> Age:
    """``at`` with its age at ``now`` (never negative: a time from the future is age 0)."""
    return Age(at=at, age_seconds=None if at is None else max(0.0, (now - at).total_seconds()))


def samples(
    service: RecommendationService, pool: PoolConfig, since: datetime, until: datetime
) -> dict[str, list[HistoryPoint]]:
    """The pool's demand and node samples over ``[since, until]``, oldest first."""
    ids = {pool.series_id(signal): signal for signal in SIGNALS}
    # The end bound is exclusive; the sample at "now" belongs in the chart.
    frame = service.services.store.samples.read(
        list(ids), start=since, end=until + timedelta(microseconds=1)
    )
    series: dict[str, list[HistoryPoint]] = {signal: [] for signal in SIGNALS}
    for uid, ds, y in zip(frame[UID], frame[DS], frame[Y], strict=True):
        series[ids[uid]].append(HistoryPoint(ds=ds.to_pydatetime(), y=float(y)))
    return series


def recommended_steps(in_force: Sequence[DesiredNodes], since: datetime) -> list[StepPoint]:
    """The recommendations in force as a step series starting no earlier than ``since``.

    Consecutive records asking for the same count are merged (the audit trail also
    records changes of the current nodes, action or mode).
    """
    steps: list[StepPoint] = []
    for made in in_force:
        if steps and steps[-1].nodes == made.desired_nodes:
            continue
        steps.append(StepPoint(ds=max(made.generated_at, since), nodes=made.desired_nodes))
    return steps


def scale_events(steps: Sequence[StepPoint], nodes: Sequence[HistoryPoint]) -> list[ScaleEvent]:
    """Where the recommended or the ready node count changed, oldest first."""
    events = [
        ScaleEvent(ds=b.ds, kind="recommended", before=a.nodes, after=b.nodes)
        for a, b in pairwise(steps)
    ]
    events += [
        ScaleEvent(ds=b.ds, kind="nodes", before=a.y, after=b.y)
        for a, b in pairwise(nodes)
        if a.y != b.y
    ]
    events.sort(key=lambda event: event.ds)
    return events[-MAX_EVENTS:]


def served_band(service: RecommendationService, pool: PoolConfig) -> tuple[BandOut | None, str]:
    """The forecast the decision uses, with its quantile calibrated as the decision does.

    Returns:
        The band, or None and why there is none.
    """
    try:
        made = service.forecast(pool.name)
    except PoolUnavailableError as exc:
        return None, str(exc)
    forecast = made.forecast
    assert forecast is not None  # service.forecast raises instead
    offset = None
    services = service.services
    if services.settings.service.live_calibration and forecast.calibration is None:
        # The same step as the decision's (api.service), so the band is what it used.
        calibrated: DemandForecast = forecast.calibrated(services.calibration(pool, forecast.level))
        if calibrated.calibration is not None:
            offset = calibrated.calibration.offset
        forecast = calibrated
    elif forecast.calibration is not None:
        offset = forecast.calibration.offset
    lo_level = min(forecast.quantiles)
    lo, hi = forecast.quantiles[lo_level], forecast.quantiles[forecast.level]
    mid = forecast.quantiles.get(0.5)
    points = [
        BandPoint(ds=ds, lo=min(lo[i], hi[i]), mid=None if mid is None else mid[i], hi=hi[i])
        for i, ds in enumerate(forecast.timestamps)
    ]
    band = BandOut(
        lo_level=lo_level,
        level=forecast.level,
        offset=offset,
        generated_at=forecast.generated_at,
        observed_until=made.last_observed,
        points=points,
    )
    return band, ""


def pool_view(service: RecommendationService, name: str, hours: float) -> PoolViewOut:
    """Return the dashboard's view of pool ``name`` over the ``hours`` before now.

    Raises:
        UnknownPoolError: no such pool (404).
        StoreError: the store failed (503).
    """
    pool = service.pool(name)
    store = service.services.store
    until = service.now()
    since = until - timedelta(hours=hours)
    series = samples(service, pool, since, until)
    in_force = store.recommendations.desired_in_force(
        name, since, until + timedelta(microseconds=1)
    )
    steps = recommended_steps(in_force, since)
    band, band_missing = served_band(service, pool)
    newest = store.samples.last_timestamps([pool.series_id(signal) for signal in SIGNALS])
    newest_at = max(newest.values()).to_pydatetime() if newest else None
    mase, measured_at = service.services.live_error(pool, until)
    try:
        rec = service.recommendation(name).body
    except PoolUnavailableError:
        rec = None
    return PoolViewOut(
        pool=name,
        since=since,
        until=until,
        gpus_per_node=pool.gpus_per_node,
        series=series,
        recommended=steps,
        events=scale_events(steps, series[NODES]),
        band=band,
        band_missing=band_missing,
        newest_sample=age(newest_at, until),
        live_error=LiveErrorOut(
            mase=mase,
            bound=service.services.settings.service.max_live_mase,
            measured=age(measured_at, until),
        ),
        headline=None if rec is None else headline(rec),
        terms=[] if rec is None else terms(rec),
    )
