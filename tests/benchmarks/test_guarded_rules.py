"""The guarded-choice rule replay: today's rule is the estimator's, and a fold never
sees its own family."""

from __future__ import annotations

import numpy as np
import pandas as pd

from benchmarks.guarded_rules import (
    Rule,
    TailCalibrated,
    apply_rule,
    choose,
    family_of,
    family_table,
    pooled,
    tail_column,
)
from forecaster.models.guarded import ERROR, GUARDED, with_guarded_rows
from forecaster.models.naive import Persistence
from forecaster.types import CUTOFF, DS, MEAN, MODEL, PERSISTENCE, STEP, UID, Y

TODAY = Rule((PERSISTENCE, "gbm", "global_gbm"), 0.10)


def rows(errors: dict[str, list[float]], uid: str = "nab/a") -> pd.DataFrame:
    """Backtest rows of one path: each member's mean is its index, its errors as given."""
    out = []
    for i, (model, errs) in enumerate(errors.items()):
        for k, e in enumerate(errs, start=1):
            out.append(
                {
                    UID: uid,
                    CUTOFF: pd.Timestamp("2025-01-01"),
                    STEP: k,
                    MODEL: model,
                    MEAN: float(i),
                    ERROR: e,
                }
            )
    return pd.DataFrame(out)


def test_family_of_joins_the_helios_vcs() -> None:
    assert family_of("earth_vc_vcpDC/pending_gpus") == "earth_vc"
    assert family_of("earth_total/demand_gpus") == "earth_total"
    assert family_of("nab/rds_cpu_utilization_e47b3b") == "nab"


def test_todays_rule_is_the_estimators() -> None:
    frame = rows(
        {
            PERSISTENCE: [1.0, 1.0, 1.0, 1.0],
            "gbm": [0.95, 0.5, 0.5, 2.0],
            "global_gbm": [1.2, 0.4, 3.0, 3.0],
        }
    )
    ours = apply_rule(frame, TODAY)
    theirs = with_guarded_rows(frame, [PERSISTENCE, "gbm", "global_gbm"])
    theirs = theirs[theirs[MODEL] == GUARDED].reset_index(drop=True)
    pd.testing.assert_frame_equal(ours.reset_index(drop=True), theirs)


def test_band_pooling_reads_the_mean_over_one_to_max_k_band() -> None:
    frame = rows({PERSISTENCE: [1.0, 3.0, 5.0, 7.0]})
    out = pooled(frame, Rule((PERSISTENCE,), 0.0, "band", 2))
    # steps 1-2 both get the mean over 1..2; the cumulative mean at k is then over 1..max(k, 2)
    assert out[ERROR].tolist() == [2.0, 2.0, 5.0, 7.0]
    path = pooled(frame, Rule((PERSISTENCE,), 0.0, "path"))
    assert path[ERROR].tolist() == [4.0] * 4


def test_path_pooling_makes_one_choice_per_path() -> None:
    # gbm is far better at step 1 only: per step it forecasts step 1, on the path never.
    frame = rows(
        {PERSISTENCE: [1.0, 1.0, 1.0, 1.0], "gbm": [0.1, 3.0, 3.0, 3.0], "global_gbm": [9.0] * 4}
    )
    per_step = apply_rule(frame, Rule((PERSISTENCE, "gbm", "global_gbm"), 0.1))
    path = apply_rule(frame, Rule((PERSISTENCE, "gbm", "global_gbm"), 0.1, "path"))
    assert per_step[MEAN].tolist() == [1.0, 0.0, 0.0, 0.0]  # gbm wins step 1 only
    assert path[MEAN].tolist() == [0.0] * 4


def scores(ratios: dict[tuple[str, str], list[float]]) -> pd.DataFrame:
    """A scores frame where persistence's MASE is 1 and each model's is its ratio."""
    out = []
    for (family, model), values in ratios.items():
        for i, r in enumerate(values):
            for m, v in ((model, r), (PERSISTENCE, 1.0)):
                out.append(
                    {
                        UID: f"{family}/s{i}",
                        MODEL: m,
                        "horizon": "1h",
                        "mase": v,
                        "coverage_q0.9": 0.9,
                    }
                )
    return pd.DataFrame(out).drop_duplicates([UID, MODEL])


def test_the_choice_reads_only_the_families_it_is_given() -> None:
    table = family_table(
        scores(
            {
                ("a", "gbm"): [0.5, 0.5],
                ("a", "x"): [0.5, 0.5],
                ("a", "y"): [0.9, 0.9],
                ("b", "gbm"): [1.0, 1.0],
                ("b", "x"): [2.0, 2.0],
                ("b", "y"): [1.0, 1.0],
            }
        )
    )
    assert np.isclose(table.set_index(["family", "model"]).loc[("b", "x"), "gmean"], 2.0)
    assert choose(table, ["a"], ["x", "y"]) == "x"
    assert choose(table, ["b"], ["x", "y"]) == "y"  # x's worst cell, 2.0x, is above 1.10


def test_tail_errors_read_only_the_last_days_of_origins() -> None:
    # Flat for three days, then a ramp of 1 a step: over the last day of origins
    # persistence errs by exactly k at step k; over its whole window the flat part
    # dilutes that.
    y = np.r_[np.zeros(24 * 3), np.arange(24 * 2, dtype=float)]
    ds = pd.date_range("2025-01-01", periods=len(y), freq="1h", tz="UTC")
    df = pd.DataFrame({UID: "pool/demand_gpus", DS: ds, Y: y})
    out = TailCalibrated(Persistence(horizon=3, window=24 * 4), day=24).fit(df).predict(3)
    assert out[tail_column(1)].tolist() == [1.0, 2.0, 3.0]
    assert (out[ERROR] < out[tail_column(1)]).all()
