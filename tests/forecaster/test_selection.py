"""Per-series selection, the promotion gate and the routing champion."""

from __future__ import annotations

import pickle
from concurrent.futures import ProcessPoolExecutor

import cloudpickle
import numpy as np
import pandas as pd
import pytest

from forecaster.backtest import backtest
from forecaster.champion import ChampionForecaster
from forecaster.exceptions import DataValidationError, ModelError, NotFittedError
from forecaster.metrics import score_backtest
from forecaster.models.naive import Persistence, SeasonalNaive
from forecaster.selection import promotion_gate, select_per_series


def scores(rows: list[tuple[str, str, str, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["unique_id", "model", "horizon", "mase"])


def test_select_picks_lowest_score_per_series() -> None:
    table = scores(
        [
            ("a", "persistence", "1h", 1.0),
            ("a", "ets", "1h", 0.8),
            ("b", "persistence", "1h", 0.5),
            ("b", "ets", "1h", 0.9),
        ]
    )
    assert select_per_series(table) == {"a": "ets", "b": "persistence"}


def test_select_breaks_ties_towards_the_simpler_model() -> None:
    table = scores(
        [
            ("a", "gbm", "1h", 0.7),
            ("a", "ets", "1h", 0.7),
            ("a", "persistence", "1h", 0.7 + 1e-12),
            ("b", "zeta", "1h", 0.4),
            ("b", "alpha", "1h", 0.4),
        ]
    )
    choice = select_per_series(table)
    assert choice["a"] == "persistence"
    # Models outside the preference order tie-break by name.
    assert choice["b"] == "alpha"


def test_select_by_horizon_or_mean_over_horizons() -> None:
    table = scores(
        [
            ("a", "persistence", "10min", 0.5),
            ("a", "persistence", "3h", 3.0),
            ("a", "ets", "10min", 0.6),
            ("a", "ets", "3h", 2.0),
        ]
    )
    assert select_per_series(table, horizon="10min") == {"a": "persistence"}
    assert select_per_series(table, horizon="3h") == {"a": "ets"}
    assert select_per_series(table) == {"a": "ets"}  # means 1.75 vs 1.3
    with pytest.raises(ValueError, match="known"):
        select_per_series(table, horizon="1d")


def test_select_falls_back_to_simplest_when_every_score_is_nan() -> None:
    table = scores([("a", "ets", "1h", np.nan), ("a", "persistence", "1h", np.nan)])
    assert select_per_series(table) == {"a": "persistence"}


def test_select_rejects_higher_is_better_metric() -> None:
    with pytest.raises(ValueError, match="lower-is-better"):
        select_per_series(scores([]), metric="coverage_q0.9")


# -- promotion gate --------------------------------------------------------------

TS = pd.Timestamp("2024-01-01", tz="UTC")


def bt_frame(
    uid: str, cutoffs: list[int], means: list[float], actual: float = 10.0
) -> pd.DataFrame:
    """One model's backtest rows: two steps per cutoff (cutoffs in hours after TS)."""
    rows = []
    for c, mean in zip(cutoffs, means, strict=True):
        cut = TS + pd.Timedelta(hours=c)
        for step in (1, 2):
            rows.append((uid, cut + pd.Timedelta(minutes=10 * step), cut, step, mean, actual))
    return pd.DataFrame(rows, columns=["unique_id", "ds", "cutoff", "step", "mean", "y"])


def bt_scales(uid: str, cutoffs: list[int], scale: float = 2.0) -> pd.DataFrame:
    cuts = [TS + pd.Timedelta(hours=c) for c in cutoffs]
    return pd.DataFrame({"unique_id": uid, "cutoff": cuts, "scale": scale})


def test_gate_promotes_without_a_champion() -> None:
    decision = promotion_gate(bt_frame("a", [0], [9.0]), None)
    assert decision.promote
    assert "no champion" in decision.reason


def test_gate_promotes_a_better_challenger_on_shared_windows() -> None:
    challenger = bt_frame("a", [0, 1], [9.0, 9.0])  # error 1
    champion = bt_frame("a", [0, 1], [7.0, 7.0])  # error 3
    decision = promotion_gate(challenger, champion, scales=bt_scales("a", [0, 1]))
    assert decision.promote
    assert decision.challenger_score == pytest.approx(0.5)
    assert decision.champion_score == pytest.approx(1.5)
    assert decision.per_series["a"].n_windows == 2
    assert "beats" in decision.reason


def test_gate_keeps_the_champion_when_challenger_is_worse_or_equal() -> None:
    scales = bt_scales("a", [0])
    worse = promotion_gate(bt_frame("a", [0], [5.0]), bt_frame("a", [0], [9.0]), scales=scales)
    assert not worse.promote
    equal = promotion_gate(bt_frame("a", [0], [9.0]), bt_frame("a", [0], [11.0]), scales=scales)
    assert not equal.promote
    assert equal.challenger_score == equal.champion_score
    assert "champion stays" in equal.reason


def test_gate_requires_the_minimum_improvement() -> None:
    challenger, champion = bt_frame("a", [0], [9.1]), bt_frame("a", [0], [9.0])
    # Errors 0.9 vs 1.0: a 10 % gain passes 5 % but not 20 %.
    assert promotion_gate(challenger, champion, metric="mae", min_improvement=0.05).promote
    assert not promotion_gate(challenger, champion, metric="mae", min_improvement=0.2).promote


def test_gate_compares_only_the_windows_both_have() -> None:
    # The challenger is bad on a window the champion never saw: it must not count.
    challenger = pd.concat([bt_frame("a", [0], [9.5]), bt_frame("a", [5], [0.0])])
    champion = pd.concat([bt_frame("a", [0], [9.0]), bt_frame("b", [0], [10.0])])
    decision = promotion_gate(challenger, champion, metric="mae")
    assert decision.promote
    assert set(decision.per_series) == {"a"}
    assert decision.per_series["a"].n_windows == 1


def test_gate_refuses_disjoint_windows() -> None:
    decision = promotion_gate(
        bt_frame("a", [0], [10.0]), bt_frame("a", [3], [0.0]), scales=bt_scales("a", [0, 3])
    )
    assert not decision.promote
    assert "share no backtest window" in decision.reason


def test_gate_needs_scales_for_mase_and_one_model_per_frame() -> None:
    frame = bt_frame("a", [0], [9.0])
    with pytest.raises(ValueError, match="scales="):
        promotion_gate(frame, frame)
    doubled = pd.concat([frame.assign(model="x"), frame.assign(model="y")])
    with pytest.raises(DataValidationError, match="filter it"):
        promotion_gate(doubled, frame, metric="mae")


# -- champion -----------------------------------------------------------------------


def two_series(n: int = 48) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    ds = pd.date_range("2024-03-01", periods=n, freq="10min", tz="UTC")
    cycle = np.tile([0.0, 10.0, 20.0, 10.0], n // 4)
    return pd.concat(
        [
            pd.DataFrame({"unique_id": "flat/y", "ds": ds, "y": 5.0 + rng.normal(0, 0.1, n)}),
            pd.DataFrame({"unique_id": "cycle/y", "ds": ds, "y": cycle}),
        ],
        ignore_index=True,
    )


CANDIDATES = {
    "persistence": Persistence(horizon=4),
    "seasonal_naive": SeasonalNaive(season_length=4, horizon=4),
}


def test_selection_on_a_backtest_routes_each_series_to_its_winner() -> None:
    df = two_series()
    result = backtest(list(CANDIDATES.values()), df, horizon=4, n_windows=3, levels=[0.9])
    choice = select_per_series(score_backtest(result.frame, result.scales, [0.9]))
    assert choice == {"cycle/y": "seasonal_naive", "flat/y": "persistence"}
    champion = ChampionForecaster(choice, CANDIDATES).fit(df)
    assert champion.describe() == choice
    forecast = champion.predict(4, [0.5, 0.9])
    assert set(forecast["model"]) == {"champion"}
    assert forecast.groupby("unique_id")["family"].first().to_dict() == choice
    cycle = forecast[forecast["unique_id"] == "cycle/y"]
    assert cycle["mean"].tolist() == [0.0, 10.0, 20.0, 10.0]
    flat = forecast[forecast["unique_id"] == "flat/y"]["mean"]
    assert (flat == df[df["unique_id"] == "flat/y"]["y"].iloc[-1]).all()


def test_champion_pickles_and_predicts_the_same() -> None:
    champion = ChampionForecaster(
        {"cycle/y": "seasonal_naive", "flat/y": "persistence"}, CANDIDATES
    ).fit(two_series())
    expected = champion.predict(3)
    for dumps, loads in ((cloudpickle.dumps, cloudpickle.loads), (pickle.dumps, pickle.loads)):
        restored = loads(dumps(champion))
        pd.testing.assert_frame_equal(restored.predict(3), expected)


def test_champion_fits_through_an_executor_like_in_process() -> None:
    selection = {"cycle/y": "seasonal_naive", "flat/y": "persistence"}
    serial = ChampionForecaster(selection, CANDIDATES).fit(two_series())
    with ProcessPoolExecutor(max_workers=2) as pool:
        fanned = ChampionForecaster(selection, CANDIDATES).fit(two_series(), executor=pool)
    assert fanned.describe() == selection
    pd.testing.assert_frame_equal(fanned.predict(4, [0.9]), serial.predict(4, [0.9]))


def test_champion_is_backtestable_and_gated_against_persistence() -> None:
    df = two_series()
    champion = ChampionForecaster(
        {"cycle/y": "seasonal_naive", "flat/y": "persistence"}, CANDIDATES
    )
    result = backtest([champion, Persistence(horizon=4)], df, horizon=4, n_windows=3, levels=[0.9])
    assert not hasattr(champion, "models_")
    frame = result.frame
    decision = promotion_gate(
        frame[frame["model"] == "champion"],
        frame[frame["model"] == "persistence"],
        scales=result.scales,
    )
    assert decision.promote
    assert decision.per_series["cycle/y"].challenger < decision.per_series["cycle/y"].champion
    assert decision.per_series["flat/y"].challenger == decision.per_series["flat/y"].champion


def test_champion_needs_a_family_for_every_series() -> None:
    df = two_series()
    with pytest.raises(ModelError, match="cycle/y"):
        ChampionForecaster({"flat/y": "persistence"}, CANDIDATES).fit(df)
    with pytest.raises(ModelError, match="not a candidate"):
        ChampionForecaster({"flat/y": "ets"}, CANDIDATES, default="persistence").fit(df)
    fitted = ChampionForecaster({}, CANDIDATES, default="persistence").fit(df)
    assert fitted.describe() == {"cycle/y": "persistence", "flat/y": "persistence"}
    with pytest.raises(NotFittedError):
        ChampionForecaster({}, CANDIDATES).predict(2)


def test_a_restricted_champion_forecasts_only_its_series_as_the_whole_does() -> None:
    champion = ChampionForecaster(
        {"cycle/y": "seasonal_naive", "flat/y": "persistence"}, CANDIDATES
    ).fit(two_series())
    whole = champion.predict(3, [0.5, 0.9])
    part = champion.restricted_to(["cycle/y", "unknown/y"])
    assert part.describe() == {"cycle/y": "seasonal_naive"}
    expected = whole[whole["unique_id"] == "cycle/y"].reset_index(drop=True)
    pd.testing.assert_frame_equal(part.predict(3, [0.5, 0.9]), expected)
    assert champion.describe() == {"cycle/y": "seasonal_naive", "flat/y": "persistence"}
