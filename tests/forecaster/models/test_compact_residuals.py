"""Calibration residuals kept compact: the same matrix, bit for bit, at a fraction of the size.

Persistence, seasonal naive and the two boosting families keep what their residual
matrix is made of (:class:`~forecaster.models.residuals.LaggedResiduals`,
:class:`~forecaster.models.boosting.PathResiduals`) instead of the matrix (#41). Each
rebuilt matrix is compared with the one the earlier code computed: the reference
functions below are that code, and the boosting families' held-out changes are
recorded as their fit passes them on.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from forecaster.models import boosting, gbm, global_gbm
from forecaster.models.base import FloatArray, Forecaster, SeriesFit
from forecaster.models.boosting import PathResiduals, interpolate_changes
from forecaster.models.gbm import GradientBoosting
from forecaster.models.global_gbm import GlobalGradientBoosting
from forecaster.models.guarded import step_errors
from forecaster.models.naive import Persistence, SeasonalNaive
from forecaster.models.residuals import LaggedResiduals, residuals_at
from forecaster.types import UID
from tests.forecaster.models.conftest import DAY

H = 12
LEVELS = (0.05, 0.5, 0.9)


def reference_lagged(y: FloatArray, horizon: int, period: int, window: int) -> FloatArray:
    """``lagged_residuals`` as it was before the compact form (the matrix it returned)."""
    n = len(y)
    origins = np.arange(max(period - 1, n - window - horizon), n - 1)
    residuals = np.full((len(origins), horizon), np.nan)
    for k in range(1, horizon + 1):
        back = period * int(np.ceil(k / period))
        target = origins + k
        source = target - back
        ok = (target < n) & (source >= 0)
        residuals[ok, k - 1] = y[target[ok]] - y[source[ok]]
    return residuals


def reference_paths(
    y: FloatArray, fold_start: int, anchors: tuple[int, ...], changes: FloatArray, horizon: int
) -> FloatArray:
    """The boosting families' residuals as their fit computed them before the compact form."""
    fold_origins = np.arange(fold_start, len(y) - 1)
    paths = y[fold_origins, None] + interpolate_changes(anchors, changes, horizon)
    return residuals_at(y, fold_origins, paths)


def assert_same_bits(got: FloatArray, want: FloatArray) -> None:
    """Equal shapes and equal bytes: NaN where NaN was, and the signs of zeros too."""
    assert got.dtype == want.dtype == np.float64
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    assert got.tobytes() == want.tobytes()


def _series(kind: str, n: int, seed: int) -> FloatArray:
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    if kind == "walk":
        return 100.0 + np.cumsum(rng.normal(0.0, 1.0, n))
    if kind == "cycle":
        return 50.0 + 20.0 * np.sin(2 * np.pi * t / DAY) + rng.normal(0.0, 2.0, n)
    # An idle queue with bursts: most of the boosting anchors stay at persistence.
    return np.where(rng.random(n) < 0.2, rng.gamma(2.0, 5.0, n), 0.0)


@pytest.mark.parametrize("seed", range(30))
def test_lagged_residuals_rebuild_the_earlier_matrix(seed: int) -> None:
    rng = np.random.default_rng(seed)
    period = int(rng.choice([1, 1, 2, 7, 48]))
    horizon = int(rng.integers(1, 40))
    window = int(rng.integers(1, 300))
    n = int(rng.integers(period + 1, 600))  # from barely one season to longer than the window
    y = rng.normal(size=n) * 10 ** rng.uniform(-3, 3)
    y[rng.random(n) < 0.05] = np.nan
    compact = LaggedResiduals.of(y, horizon, period, window)
    assert_same_bits(compact.matrix(), reference_lagged(y, horizon, period, window))
    assert len(compact.values) <= window + horizon + period - 1


@pytest.mark.parametrize("seed", range(30))
def test_path_residuals_rebuild_the_earlier_matrix(seed: int) -> None:
    rng = np.random.default_rng(seed)
    anchors = tuple(sorted(int(a) for a in rng.choice(np.arange(1, 40), 4, replace=False)))
    horizon = int(rng.integers(1, 50))
    n = int(rng.integers(2, 400))
    fold_start = int(rng.integers(0, n))
    y = rng.normal(size=n) * 10 ** rng.uniform(-3, 3)
    y[rng.random(n) < 0.03] = np.nan
    # Negative zeros: where an anchor's changes are all zero, their signs still show.
    y[rng.random(n) < (0.4 if seed % 2 else 0.03)] = -0.0
    changes = rng.normal(size=(n - 1 - fold_start, len(anchors)))
    # Anchors at weight 0 (all zeros, of either sign), one all +0, some NaN and inf.
    changes[:, rng.random(len(anchors)) < 0.5] *= 0.0
    changes[:, 0] = 0.0 if seed % 3 == 0 else changes[:, 0]
    odd = rng.random(changes.shape)
    changes[odd < 0.02] = np.nan
    changes[(odd > 0.02) & (odd < 0.03)] = np.inf
    compact = PathResiduals.of(y[fold_start:], anchors, changes, horizon)
    assert_same_bits(compact.matrix(), reference_paths(y, fold_start, anchors, changes, horizon))


def _families() -> list[Forecaster]:
    return [
        Persistence(horizon=H, window=3 * DAY),
        SeasonalNaive(season_length=DAY, horizon=H, window=3 * DAY),
        GradientBoosting(season_length=DAY, week_length=7 * DAY, horizon=H, min_samples_leaf=20),
        GlobalGradientBoosting(season_length=DAY, horizon=H, min_samples_leaf=20),
    ]


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    from tests.forecaster.models.conftest import _series_frame

    n = 10 * DAY
    return _series_frame(
        {
            f"{kind}-{seed}": _series(kind, n - 17 * seed, seed)
            for seed, kind in enumerate(["walk", "cycle", "queue", "queue", "walk"])
        }
    )


def _y(frame: pd.DataFrame, uid: str) -> FloatArray:
    return np.asarray(frame.loc[frame[UID] == uid, "y"].to_numpy(), dtype=np.float64)


class _Recorded:
    """Records the held-out tail and changes each boosting fit keeps."""

    def __init__(self) -> None:
        self.calls: list[tuple[FloatArray, tuple[int, ...], FloatArray, int]] = []

    def of(
        self, tail: FloatArray, anchors: tuple[int, ...], changes: FloatArray, horizon: int
    ) -> PathResiduals:
        self.calls.append((tail.copy(), anchors, changes.copy(), horizon))
        return PathResiduals.of(tail, anchors, changes, horizon)


def _earlier_matrices(
    model: Forecaster, frame: pd.DataFrame, recorded: _Recorded
) -> dict[str, FloatArray]:
    """Each series' residual matrix as the earlier code computed it."""
    ids = sorted(frame[UID].unique())
    if isinstance(model, Persistence | SeasonalNaive):
        period = model.season_length if isinstance(model, SeasonalNaive) else 1
        return {u: reference_lagged(_y(frame, u), H, period, model.window) for u in ids}
    assert isinstance(model, GradientBoosting | GlobalGradientBoosting)
    assert len(recorded.calls) == len(ids)  # one fit per series, in the fit's order
    out = {}
    for uid, (tail, anchors, changes, horizon) in zip(ids, recorded.calls, strict=True):
        y = _y(frame, uid)[-model.max_history :]
        fold_start = model._fold_start(len(y))
        np.testing.assert_array_equal(tail, y[fold_start:])
        out[uid] = reference_paths(y, fold_start, anchors, changes, horizon)
    return out


def _as_earlier(model: Forecaster, matrices: dict[str, FloatArray]) -> bytes:
    """``model`` pickled with its fits holding matrices, as the earlier code pickled it."""
    old = pickle.loads(pickle.dumps(model))
    fits = {}
    for uid, fit in old.fits_.items():
        earlier = object.__new__(SeriesFit)
        earlier.__dict__.update(
            state=fit.state,
            residuals=matrices[uid],
            last_ds=fit.last_ds,
            step=fit.step,
            nonnegative=fit.nonnegative,
        )
        fits[uid] = earlier
    old.fits_ = fits
    return pickle.dumps(old, protocol=5)


@pytest.mark.parametrize("index", range(4), ids=["persistence", "seasonal", "gbm", "global"])
def test_fitted_families_rebuild_and_forecast_as_before(
    index: int, frame: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = _Recorded()
    for module in (gbm, global_gbm):
        monkeypatch.setattr(module, "PathResiduals", recorded)
    model = _families()[index].fit(frame)
    earlier = _earlier_matrices(model, frame, recorded)
    loaded = pickle.loads(pickle.dumps(model, protocol=5))
    for uid, fit in loaded.fits_.items():
        assert not isinstance(fit.calibration, np.ndarray)
        assert_same_bits(fit.residuals, earlier[uid])
        assert_same_bits(model.fits_[uid].residuals, earlier[uid])
        assert np.array_equal(step_errors(loaded, uid, 2 * H), _errors(earlier[uid], 2 * H))
        kept = len(pickle.dumps(fit.calibration, protocol=5))
        assert kept < earlier[uid].nbytes / 2
    old = pickle.loads(_as_earlier(model, earlier))
    want = old.predict(2 * H, LEVELS)  # past the calibrated horizon too
    pd.testing.assert_frame_equal(loaded.predict(2 * H, LEVELS), want, check_exact=True)
    pd.testing.assert_frame_equal(model.predict(2 * H, LEVELS), want, check_exact=True)


def _errors(matrix: FloatArray, h: int) -> Any:
    """The guarded choice's per-step errors of a matrix, as :func:`step_errors` reads a fit."""

    fit = SeriesFit(None, matrix, pd.Timestamp(0), pd.Timedelta(1), False)
    return step_errors(SimpleNamespace(fits_={"u": fit}), "u", h)


@pytest.mark.parametrize("index", range(4), ids=["persistence", "seasonal", "gbm", "global"])
def test_a_fit_pickled_with_its_matrix_loads_and_forecasts(
    index: int, frame: pd.DataFrame, make_frame: Callable[..., pd.DataFrame]
) -> None:
    model = _families()[index].fit(frame)
    matrices = {uid: fit.residuals for uid, fit in model.fits_.items()}
    # Pickled as the earlier code did: the matrix under ``residuals`` in the fit's dict.
    blob = _as_earlier(model, matrices)
    assert b"calibration" not in blob
    loaded = pickle.loads(blob)
    for uid, fit in loaded.fits_.items():
        assert isinstance(fit.calibration, np.ndarray)
        assert "residuals" not in vars(fit)
        assert_same_bits(fit.residuals, matrices[uid])
    pd.testing.assert_frame_equal(
        loaded.predict(H, LEVELS), model.predict(H, LEVELS), check_exact=True
    )
    # It updates too, keeping its matrix.
    moved = loaded.update(frame)
    for uid, fit in moved.fits_.items():
        assert_same_bits(fit.residuals, matrices[uid])


def test_the_boosting_module_keeps_path_residuals() -> None:
    # The families name it through the module they import it from.
    assert gbm.PathResiduals is boosting.PathResiduals is global_gbm.PathResiduals


@pytest.mark.parametrize("index", range(4), ids=["persistence", "seasonal", "gbm", "global"])
def test_a_forecast_rebuilds_each_matrix_once_and_pickles_without_its_summaries(
    index: int, frame: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _families()[index].fit(frame)
    sizes = {
        uid: len(pickle.dumps(fit.calibration, protocol=5)) for uid, fit in model.fits_.items()
    }
    rebuilt: list[int] = []
    for kind in {type(fit.calibration) for fit in model.fits_.values()}:
        original = kind.matrix

        def counted(self: Any, _original: Any = original) -> FloatArray:
            rebuilt.append(id(self))
            matrix: FloatArray = _original(self)
            return matrix

        monkeypatch.setattr(kind, "matrix", counted)
    first = model.predict(2 * H, LEVELS)
    errors = {uid: step_errors(model, uid, 2 * H) for uid in model.fits_}
    # Once per fit: the intervals and the guarded choice's errors read the same rebuild.
    assert sorted(rebuilt) == sorted(id(fit.calibration) for fit in model.fits_.values())
    pd.testing.assert_frame_equal(model.predict(2 * H, LEVELS), first, check_exact=True)
    for uid, fit in model.fits_.items():
        assert np.array_equal(step_errors(model, uid, 2 * H), errors[uid], equal_nan=True)
        assert np.array_equal(errors[uid], _errors(fit.calibration.matrix(), 2 * H), equal_nan=True)
        # Only the compact form is pickled, not the summaries kept beside it.
        assert len(pickle.dumps(fit.calibration, protocol=5)) == sizes[uid]
