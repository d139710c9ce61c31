"""Decision-quality ratios, frontiers, the sweep and the frontier plot."""

from __future__ import annotations

import math

import numpy as np
import pytest
from matplotlib.figure import Figure

from pipelines.simulate.compare import Replay, compare, sweep_quantiles
from pipelines.simulate.engine import simulate
from pipelines.simulate.frontier import (
    benefit_at,
    cost_ratio,
    frontier,
    gap_closed,
    plot_frontier,
)
from pipelines.simulate.oracle import OraclePolicy
from pipelines.simulate.reactive import ReactivePolicy


def test_gap_closed_by_hand():
    assert gap_closed(100.0, 100.0, 0.0) == 0.0
    assert gap_closed(100.0, 10.0, 0.0) == pytest.approx(0.9)
    assert gap_closed(100.0, 20.0, 20.0) == 1.0
    assert gap_closed(100.0, 150.0, 0.0) == pytest.approx(-0.5)
    assert math.isnan(gap_closed(5.0, 1.0, 5.0))


def test_cost_ratio_is_provisioned_gpu_hours_over_the_oracles(series, pool):
    demand = series([8.0, 16.0, 8.0, 24.0, 8.0, 8.0])
    config = pool(lead_minutes=5)
    oracle = simulate(demand, config, OraclePolicy(demand))
    reactive = simulate(demand, config, ReactivePolicy())
    assert cost_ratio(oracle, oracle) == 1.0
    assert cost_ratio(reactive, oracle) == pytest.approx(
        reactive.gpu_hours_provisioned / oracle.gpu_hours_provisioned
    )


def test_frontier_keeps_the_best_benefit_at_each_cost():
    points = [(1.2, 0.5), (1.0, 0.1), (1.1, 0.6), (1.3, 0.55), (1.4, 0.9)]
    assert frontier(points) == [(1.0, 0.1), (1.1, 0.6), (1.4, 0.9)]
    assert benefit_at(points, 1.25) == 0.6
    assert math.isnan(benefit_at(points, 0.9))


def test_sweep_reuses_the_forecaster_and_orders_the_frontier(series, pool, sim_settings):
    rng = np.random.default_rng(4)
    demand = series(rng.gamma(2.0, 25.0, 400))
    replay = Replay.split(demand, pool(lead_minutes=10), warmup=demand.index[100] - demand.index[0])
    comparison = compare(
        replay,
        ["reactive", "static", "oracle", "foresight"],
        settings=sim_settings,
        model="persistence",
    )
    assert list(comparison.runs) == ["reactive", "static", "foresight", "oracle"]
    fits = len(comparison.forecaster.fit_log)
    swept = sweep_quantiles(comparison, [0.99, 0.5, 0.9])
    assert list(swept) == [0.5, 0.9, 0.99]
    assert len(comparison.forecaster.fit_log) == fits
    cost = [r.gpu_hours_provisioned for r in swept.values()]
    wait = [r.waiting_gpu_hours for r in swept.values()]
    assert cost == sorted(cost)
    assert wait == sorted(wait, reverse=True)
    figure = plot_frontier(
        {"foresight": [(r.gpu_hours_provisioned, r.waiting_gpu_hours) for r in swept.values()]},
        {n: (r.gpu_hours_provisioned, r.waiting_gpu_hours) for n, r in comparison.runs.items()},
        xlabel="GPU-hours",
        ylabel="waiting GPU-hours",
        labels={"foresight": ["q0.5", "q0.9", "q0.99"]},
    )
    assert isinstance(figure, Figure)
    assert len(figure.axes[0].lines) == 1
    assert len(figure.axes[0].collections) == 4


def test_unknown_policies_and_quantiles_are_refused(series, pool, sim_settings):
    from forecaster.exceptions import ConfigError

    demand = series([8.0] * 50)
    replay = Replay.split(demand, pool(), warmup=demand.index[10] - demand.index[0])
    with pytest.raises(ConfigError, match="unknown policies"):
        compare(replay, ["reactive", "magic"], settings=sim_settings)
    with pytest.raises(ConfigError, match="unknown forecaster"):
        compare(replay, ["reactive"], settings=sim_settings, model="prophet")
    comparison = compare(replay, ["reactive"], settings=sim_settings)
    with pytest.raises(ConfigError, match="outside"):
        sweep_quantiles(comparison, [1.5])


def test_points_beaten_counts_points_cheaper_than_the_subject_as_lost():
    from pipelines.simulate.frontier import gap_at_cost, interpolated, points_beaten

    subject = [(1.0, 0.2), (1.2, 0.6)]
    assert interpolated(subject, 1.1) == pytest.approx(0.4)
    assert math.isnan(interpolated(subject, 1.3))
    assert gap_at_cost(subject, 1.3) == pytest.approx(0.6)  # above its range: its best
    assert math.isnan(gap_at_cost(subject, 0.9))  # below: it has no setting that cheap
    # 0.3 at 1.1 is beaten (0.4); 0.5 at 1.1 is not; 0.9 at 1.5 is not (best 0.6);
    # 0.1 at 0.9 is cheaper than anything the subject offers: lost, not skipped.
    assert points_beaten(subject, [(1.1, 0.3), (1.1, 0.5), (1.5, 0.9), (0.9, 0.1)]) == (1, 4)


def test_a_policy_without_a_cheap_setting_cannot_win_at_equal_cost():
    from benchmarks.decision_report import at_least_as_good
    from pipelines.simulate.equal_cost import (
        best_gap_at_budgets,
        compare_policies,
        equal_cost_rows,
    )

    costly = [(1.20, 0.7), (1.30, 0.9)]
    cheap = [(1.01, 0.3), (1.04, 0.5), (1.08, 0.6)]
    assert best_gap_at_budgets(cheap) == {"<=1.02": 0.3, "<=1.05": 0.5, "<=1.10": 0.6}
    assert all(math.isnan(v) for v in best_gap_at_budgets(costly).values())
    rows = equal_cost_rows(("costly", costly), ("cheap", cheap))
    assert [r["cost_ratio"] for r in rows] == [1.01, 1.04, 1.08, 1.20, 1.30]
    assert math.isnan(rows[0]["costly"])
    assert rows[-1]["cheap"] == 0.6
    judged = compare_policies("costly", {"costly": costly, "cheap": cheap, "oracle": [(1.0, 1.0)]})
    assert judged["against"]["cheap"]["beaten"] == [0, 3]
    # Nor does the cheap one reach the costly one's gaps: neither dominates.
    assert judged["against"]["cheap"]["beaten_by"] == [0, 2]
    assert judged["against"]["cheap"]["wins_at_budgets"] == [0, 3]
    assert not at_least_as_good(judged, "cheap")
    flipped = compare_policies("cheap", {"costly": costly, "cheap": cheap})
    assert flipped["against"]["costly"]["wins_at_budgets"] == [0, 0]  # costly reaches none


def test_where_both_reach_compares_only_inside_both_ranges():
    from benchmarks.decision_report import where_both_reach

    subject = [(1.0, 0.2), (1.2, 0.6)]
    # The other's 0.9 at 1.5 lies above the subject's range: not compared (the beaten
    # count would call it lost); its 0.1 at 0.9 lies below: not compared either.
    other = [(0.9, 0.1), (1.0, 0.3), (1.2, 0.5), (1.5, 0.9)]
    margin = where_both_reach(subject, other)
    assert margin["costs"] == 2  # 1.0 and 1.2
    assert margin["worst"] == pytest.approx(-0.1)
    assert margin["at_cost"] == pytest.approx(1.0)
    assert margin["mean"] == pytest.approx(0.0)
    # Both interpolated inside the overlap: 0.3 against 0.3 at 1.05, 0.4 against 0.5 at 1.1.
    inside = where_both_reach(subject, [(1.05, 0.3), (1.1, 0.5)])
    assert inside["costs"] == 2
    assert inside["worst"] == pytest.approx(-0.1)  # at 1.1: 0.4 against 0.5
    apart = where_both_reach(subject, [(1.3, 0.9)])
    assert apart["costs"] == 0
    assert math.isnan(apart["worst"])
