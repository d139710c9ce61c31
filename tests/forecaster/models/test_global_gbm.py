"""The global gradient boosting family and the fleet machinery that feeds it."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import pandas as pd
import pytest

from forecaster.champion import ChampionForecaster
from forecaster.fleet import fleet_backtest, has_joint, with_fleet
from forecaster.models.combination import MedianCombination, with_median
from forecaster.models.global_features import series_scale
from forecaster.models.global_gbm import GlobalGradientBoosting, GlobalState
from forecaster.models.naive import Persistence
from forecaster.types import DS, MEAN, STEP, UID, Y

DAY = 48  # steps per day at the 30-min step of the conftest frames
H = 6
LEVELS = (0.1, 0.5, 0.9)


def _model(**params: object) -> GlobalGradientBoosting:
    base: dict[str, object] = {
        "season_length": DAY,
        "horizon": H,
        "anchors": (1, 3, 6),
        "max_iter": 20,
        "learning_rate": 0.2,
        "min_samples_leaf": 20,
        "max_history": 2000,
    }
    return GlobalGradientBoosting(**{**base, **params})  # type: ignore[arg-type]


def _queues(n: int, n_series: int, seed: int, burst: int = 8) -> dict[str, np.ndarray]:
    """Idle queues with bursts that last exactly ``burst`` steps, then drain to 0."""
    rng = np.random.default_rng(seed)
    out = {}
    for i in range(n_series):
        y = np.zeros(n)
        t = 0
        while t < n:
            t += int(rng.integers(10, 40))  # idle gap
            y[t : t + burst] = rng.integers(5, 30) * (i + 1)
            t += burst
        out[f"q{i}"] = y
    return out


def _walks(n: int, n_series: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {f"w{i}": 100.0 + np.cumsum(rng.normal(0.0, 1.0, n)) for i in range(n_series)}


def test_forecast_frame_shape_and_quantiles(make_frame: Callable[..., pd.DataFrame]) -> None:
    frame = make_frame({**_queues(600, 2, seed=1), **_walks(600, 2, seed=2)})
    out = _model().fit(frame).predict(9, levels=LEVELS)
    assert len(out) == 4 * 9
    assert sorted(out[UID].unique()) == ["q0", "q1", "w0", "w1"]
    assert out.groupby(UID)[STEP].apply(list).map(lambda s: s == list(range(1, 10))).all()
    q = out[["q0.1", "q0.5", "q0.9"]].to_numpy()
    assert np.all(np.diff(q, axis=1) >= -1e-9)
    # Queues are nonnegative in training, so nothing forecast for them is below 0.
    assert (out.loc[out[UID].str.startswith("q"), ["mean", "q0.1"]] >= 0).all().all()


def test_one_fleet_model_serves_every_series(make_frame: Callable[..., pd.DataFrame]) -> None:
    frame = make_frame(_queues(600, 3, seed=3))
    model = _model().fit(frame)
    assert model.fleet_.series == ("q0", "q1", "q2")
    assert set(model.fits_) == {"q0", "q1", "q2"}


def test_scale_is_inverted_at_predict(make_frame: Callable[..., pd.DataFrame]) -> None:
    """A series multiplied by 1024 (exact in binary) gets forecasts exactly 1024x."""
    values = _queues(600, 3, seed=4)
    scaled = {**values, "q1": values["q1"] * 1024.0}
    a = _model().fit(make_frame(values)).predict(H)
    b = _model().fit(make_frame(scaled)).predict(H)
    mine = a[a[UID] == "q1"][MEAN].to_numpy()
    theirs = b[b[UID] == "q1"][MEAN].to_numpy()
    np.testing.assert_allclose(theirs, mine * 1024.0, rtol=1e-9)
    fits = _model().fit(make_frame(scaled)).fits_
    assert isinstance(fits["q1"].state, GlobalState)
    assert fits["q1"].state.scale == pytest.approx(series_scale(scaled["q1"][-2000:]))
    # The other series are untouched by one series' units.
    np.testing.assert_allclose(
        a[a[UID] == "q0"][MEAN].to_numpy(), b[b[UID] == "q0"][MEAN].to_numpy(), rtol=1e-9
    )


def test_learns_when_a_burst_drains(make_frame: Callable[..., pd.DataFrame]) -> None:
    """Bursts last 8 steps: the fleet learns the drain that persistence misses."""
    n = 1500
    frame = make_frame(_queues(n, 4, seed=5))
    cut = n - 300
    train = frame[frame.groupby(UID).cumcount() < cut]
    result = fleet_backtest(
        [_model(), Persistence(horizon=H)],
        frame,
        horizon=H,
        cutoffs={
            uid: list(g[DS].iloc[cut : n - H : 7]) for uid, g in frame.groupby(UID, sort=True)
        },
        levels=LEVELS,
        max_train=None,
    )
    assert len(train)  # the cutoffs are all in the last 300 steps
    err = (result.frame[MEAN] - result.frame[Y]).abs().groupby(result.frame["model"]).mean()
    assert err["global_gbm"] < 0.7 * err["persistence"]


def test_random_walks_stay_at_persistence(make_frame: Callable[..., pd.DataFrame]) -> None:
    frame = make_frame(_walks(1500, 6, seed=6))
    model = _model().fit(frame)
    out = model.predict(H)
    last = frame.groupby(UID)[Y].last()
    gap = (out[MEAN] - out[UID].map(last)).abs()
    steps = frame.groupby(UID)[Y].apply(lambda y: np.mean(np.abs(np.diff(y))))
    # At most one weight in six series x three anchors is not 0 ...
    weights = np.concatenate([f.state.weights for f in model.fits_.values()])
    assert np.count_nonzero(weights) <= 1
    # ... and the forecasts stay within a fraction of a typical step of the last value.
    assert (gap / out[UID].map(steps)).max() < 1.0


def test_no_look_ahead_in_fleet_backtest(make_frame: Callable[..., pd.DataFrame]) -> None:
    """Changing every series after the cutoffs changes nothing forecast from them."""
    n = 900
    values = _queues(n, 3, seed=7)
    frame = make_frame(values)
    changed = make_frame({k: np.r_[v[:700], v[700:] * 3 + 11] for k, v in values.items()})
    cut_times = list(frame[DS].drop_duplicates().iloc[[600, 650, 700 - H - 1]])
    cutoffs = dict.fromkeys(values, cut_times)
    runs = [
        fleet_backtest([_model()], f, horizon=H, cutoffs=cutoffs, levels=LEVELS, max_train=None)
        for f in (frame, changed)
    ]
    cols = [UID, DS, "cutoff", STEP, MEAN, "q0.1", "q0.9"]
    pd.testing.assert_frame_equal(runs[0].frame[cols], runs[1].frame[cols])
    # Cutoff times run at once on an executor give the same result.
    with ThreadPoolExecutor(max_workers=2) as executor:
        pooled = fleet_backtest(
            [_model()],
            frame,
            horizon=H,
            cutoffs=cutoffs,
            levels=LEVELS,
            max_train=None,
            executor=executor,
        )
    pd.testing.assert_frame_equal(pooled.frame[cols], runs[0].frame[cols])
    # The fleet model was learnt per cutoff time, from every series.
    assert runs[0].frame["cutoff"].nunique() == 3


def test_with_fleet_learns_once_and_reaches_nested_members(
    make_frame: Callable[..., pd.DataFrame],
) -> None:
    frame = make_frame(_queues(600, 2, seed=8))
    family = _model()
    prototypes = with_median([Persistence(horizon=H), family])
    assert has_joint(prototypes["median"])
    memo: dict[int, object] = {}
    learnt = {k: with_fleet(v, frame, memo) for k, v in prototypes.items()}
    median = learnt["median"]
    assert isinstance(median, MedianCombination)
    inner = [m for m in median.members if isinstance(m, GlobalGradientBoosting)]
    assert inner[0].fleet is not None
    assert inner[0].fleet is learnt["global_gbm"].fleet  # one prototype, learnt once
    assert not has_joint(median)
    assert family.fleet is None  # the prototype itself is not changed


def _fleets(champion: ChampionForecaster) -> list[object]:
    """Every fleet model the champion's fitted models hold, copies included."""
    found: list[object] = []
    for fitted in champion.models_.values():
        assert isinstance(fitted, MedianCombination)
        found += [m.fleet for m in fitted.members if isinstance(m, GlobalGradientBoosting)]
        for models in fitted.fitted_.values():
            for m in models:
                if isinstance(m, GlobalGradientBoosting):
                    found += [m.fleet, m.fleet_]
    return found


def test_champion_fitted_on_a_process_pool_holds_one_fleet_model(
    make_frame: Callable[..., pd.DataFrame],
) -> None:
    """Fits sent back from workers bring copies of the fleet; the champion keeps one."""
    frame = make_frame({**_queues(700, 3, seed=9), **_walks(700, 2, seed=10)})
    candidates = with_median([Persistence(horizon=H), _model()])
    selection = dict.fromkeys(frame[UID].unique(), "median")
    here = ChampionForecaster(selection, candidates).fit(frame)
    with ProcessPoolExecutor(2) as pool:
        pooled = ChampionForecaster(selection, candidates).fit(frame, executor=pool)
    pd.testing.assert_frame_equal(pooled.predict(H, LEVELS), here.predict(H, LEVELS))
    assert len({id(f) for f in _fleets(pooled)}) == 1
    # So it pickles as small as the champion fitted in this process.
    assert len(pickle.dumps(pooled)) < 1.05 * len(pickle.dumps(here))


def test_champion_median_with_it_never_crosses_quantiles(
    make_frame: Callable[..., pd.DataFrame],
) -> None:
    frame = make_frame({**_queues(700, 3, seed=9), **_walks(700, 2, seed=10)})
    candidates = with_median([Persistence(horizon=H), _model()])
    selection = dict.fromkeys(frame[UID].unique(), "median")
    champion = ChampionForecaster(selection, candidates).fit(frame)
    out = champion.predict(12, levels=LEVELS)
    q = out[["q0.1", "q0.5", "q0.9"]].to_numpy()
    assert np.all(np.diff(q, axis=1) >= -1e-9)
    assert len(out) == 5 * 12
    # The champion learnt the fleet once, from all five series, and every series uses it.
    fleets = set()
    for fitted in champion.models_.values():
        assert isinstance(fitted, MedianCombination)
        for models in fitted.fitted_.values():
            fleets |= {m.fleet_ for m in models if isinstance(m, GlobalGradientBoosting)}
    assert len(fleets) == 1
    assert next(iter(fleets)).series == ("q0", "q1", "q2", "w0", "w1")
