"""A shadow run of the real service: forecast-only, the trail fills, the scorecard covers it.

Two hours of the synthetic history arrive sample by sample, the forecast job runs
every 15 minutes and the service refreshes after each sample, as ``foresight serve``
does; nothing is published. The scorecard then covers every sample from one lead time
after the first decision.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pandas as pd
import pytest

from api.service import RecommendationService
from api.services import Services
from api.settings import AppSettings
from forecaster.registry import LoadedModel
from pipelines.config.pools import PoolsConfig
from pipelines.scorecard.load import pool_scorecard
from pipelines.scorecard.types import Window
from pipelines.store.store import open_store
from tests.api.app.conftest import END, STEP, FakeClock, history, run_forecast_job

pytestmark = pytest.mark.slow

STEPS = 24
"""Two hours of 5-minute samples arrive one by one."""


def test_a_forecast_only_run_is_scored(
    tmp_path: Path, settings: AppSettings, pools: PoolsConfig, champion: LoadedModel
) -> None:
    assert settings.service.forecast_only
    frame = pd.concat([history("alpha"), history("beta", seed=1)])
    start = END - STEPS * STEP
    clock = FakeClock(start)
    with open_store(f"sqlite:///{tmp_path / 'shadow.db'}") as store:
        store.samples.upsert(frame[frame["ds"] <= start])
        run_forecast_job(settings, store, champion, now=start)
        service = RecommendationService(Services(settings, pools, store, champion, clock=clock))
        service.start()
        for step in range(1, STEPS + 1):
            clock.now = start + step * STEP
            store.samples.upsert(frame[frame["ds"] == clock.now])
            if step % 3 == 0:
                run_forecast_job(settings, store, champion, now=clock.now)
            service.refresh()

        first = {
            pool.name: store.recommendations.history(pool.name, limit=1000)[-1]
            for pool in pools.pools
        }
        cards = {pool.name: pool_scorecard(store, pool, now=END) for pool in pools.pools}

    for pool in pools.pools:
        assert first[pool.name].generated_at == start + STEP
        day = cards[pool.name].windows[Window.DAY]
        # Samples from the first decision + lead time up to (not including) END.
        covered = STEPS - 1 - pool.lead_time // STEP
        assert day.samples == covered, pool.name
        assert day.coverage == pytest.approx(covered * STEP / timedelta(days=1))
        assert day.waiting_gpu_hours.plan <= day.waiting_gpu_hours.actual
        assert day.node_hours.plan >= day.node_hours.actual > 0
