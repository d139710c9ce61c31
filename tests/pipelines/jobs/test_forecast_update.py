"""The forecast job updates the champion's trained fits rather than refitting them.

Each series' model, fitted at the training, is advanced to its newest observation;
a series whose model cannot be updated is refitted and reported, never lost; a
champion saved without its fits (an older version) is refitted series by series.
"""

from __future__ import annotations

import copy

import pandas as pd
import pytest

from forecaster.champion import ChampionForecaster
from forecaster.models.naive import Persistence
from forecaster.registry import LoadedModel, load_champion
from forecaster.training import recent_history
from forecaster.types import DS, MEAN, STEP, UID
from pipelines.config.settings import Settings
from pipelines.config.tracking import tracking_config
from pipelines.jobs.forecast import SAMPLE_AT_NOW, run_forecast
from pipelines.jobs.history import read_history, training_plan
from pipelines.jobs.ingest import run_ingest
from pipelines.jobs.train import run_train
from pipelines.store.store import Store
from tests.pipelines.jobs.job_fakes import START, FakeSource, synthetic

pytestmark = pytest.mark.slow

TRAINED = START + pd.Timedelta(days=3)
LATER = TRAINED + pd.Timedelta(hours=2)


def trained(settings: Settings, store: Store) -> LoadedModel:
    """Train (fast set) on three days, then ingest two more hours."""
    data = synthetic()
    run_ingest(settings, store=store, source=FakeSource(data), now=TRAINED.to_pydatetime())
    assert run_train(settings, store=store, fast=True).outcome == "ok"
    run_ingest(settings, store=store, source=FakeSource(data), now=LATER.to_pydatetime())
    return load_champion(
        settings.registered_model_name,
        models_dir=settings.models_dir,
        tracking=tracking_config(settings),
    )


def recent(settings: Settings, store: Store) -> pd.DataFrame:
    read = read_history(store, settings, end=LATER + SAMPLE_AT_NOW, days=settings.max_train_days)
    return recent_history(read.frame, training_plan(settings, read.step).max_train)


def stored(store: Store) -> pd.DataFrame:
    return store.forecasts.read().sort_values([UID, STEP]).reset_index(drop=True)


def test_the_job_updates_each_trained_fit_to_the_newest_observation(
    settings: Settings, store: Store
) -> None:
    loaded = trained(settings, store)
    made = run_forecast(settings, store=store, now=LATER.to_pydatetime())
    assert made.outcome == "ok", (made.summary, made.problems)
    assert made.details["updated"] == made.details["series"] == 5
    assert made.details["refitted"] == 0
    rows = stored(store)
    assert (rows.groupby(UID)[DS].min() == LATER + pd.Timedelta(minutes=10)).all()
    assert isinstance(loaded.model, ChampionForecaster)
    expected = loaded.model.update(recent(settings, store)).predict(settings.horizon)
    expected = expected.sort_values([UID, STEP]).reset_index(drop=True)
    pd.testing.assert_series_equal(rows[MEAN], expected[MEAN])


def test_a_champion_saved_without_its_fits_is_refitted_series_by_series(
    settings: Settings, store: Store
) -> None:
    loaded = trained(settings, store)
    assert isinstance(loaded.model, ChampionForecaster)
    unfitted = LoadedModel(loaded.model.unfitted(), loaded.version, loaded.source)
    made = run_forecast(settings, store=store, now=LATER.to_pydatetime(), champion=unfitted)
    assert made.outcome == "ok", (made.summary, made.problems)
    assert made.details["updated"] == 0
    assert made.details["refitted"] == made.details["series"] == 5
    refit = loaded.model.unfitted().fit(recent(settings, store)).predict(settings.horizon)
    refit = refit.sort_values([UID, STEP]).reset_index(drop=True)
    pd.testing.assert_series_equal(stored(store)[MEAN], refit[MEAN])


class Stuck(Persistence):
    """Persistence whose update fails (a state that cannot be advanced)."""

    update_refits = False


def test_a_series_whose_update_fails_is_refitted_and_reported(
    settings: Settings, store: Store
) -> None:
    loaded = trained(settings, store)
    model = loaded.model
    assert isinstance(model, ChampionForecaster)
    broken = copy.copy(model)
    uid = sorted(model.models_)[0]
    stuck = Stuck(horizon=settings.horizon).fit(recent(settings, store)[lambda f: f[UID] == uid])
    broken.models_ = {**model.models_, uid: stuck}
    champion = LoadedModel(broken, loaded.version, loaded.source)
    made = run_forecast(settings, store=store, now=LATER.to_pydatetime(), champion=champion)
    assert made.outcome == "ok", (made.summary, made.problems)
    assert made.details["series"] == 5
    assert made.details["refitted"] == 1
    assert made.details["updated"] == 4
    assert "refit" in made.details["refits"][uid]
