"""A served state kept from the run before is continued, and issues what a rebuild would."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd

from forecaster.peak.serving import serve_states
from forecaster.peak.types import LAST, LEAD, SCALE
from forecaster.types import DS, UID, Y, quantile_column
from tests.forecaster.peak.serving import serve_frame

STEP = pd.Timedelta(minutes=10)
LEVELS = (0.5, 0.9, 0.95)
COLUMNS = [quantile_column(q) for q in LEVELS]
POOLS = ("a/demand_gpus", "b/demand_gpus")


def fleet(seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Actuals of two pools over 9 days and a raw forecast at every origin of the last 3."""
    rng = np.random.default_rng(seed)
    ds = pd.date_range("2024-05-01", periods=9 * 144, freq=STEP, tz="UTC")
    history = pd.concat(
        pd.DataFrame({UID: uid, DS: ds, Y: rng.poisson(30.0, len(ds)).astype(float)})
        for uid in POOLS
    )
    rows = []
    for uid in POOLS:
        for lead in (1, 3):
            for origin in ds[-3 * 144 :]:
                base = 30.0 + rng.normal(0.0, 3.0)
                bounds = np.sort(base + rng.gamma(2.0, 3.0, len(LEVELS)))
                rows.append([uid, origin, lead, base, rng.uniform(1.0, 5.0), *bounds])
    return history, pd.DataFrame(rows, columns=[UID, DS, LEAD, LAST, SCALE, *COLUMNS])


def run_at(
    origin: pd.Timestamp, history: pd.DataFrame, raw: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """What a run at ``origin`` sees: its fresh rows, the actuals and the earlier raws."""
    fresh = raw[raw[DS] == origin].reset_index(drop=True)
    return fresh, history[history[DS] <= origin], raw[raw[DS] < origin]


def test_continued_states_issue_what_rebuilt_ones_do_run_after_run() -> None:
    history, raw = fleet(3)
    origins = sorted(raw[DS].unique())
    # Across a midnight (the states are rebuilt at each new anchor) and back to steady runs.
    first = next(i for i, o in enumerate(origins) if o.hour == 23 and o.minute == 0)
    states = None
    continued = 0
    for origin in origins[first : first + 14]:
        fresh, seen, earlier = run_at(origin, history, raw)
        got, after = serve_states(fresh, seen, earlier, STEP, states)
        pd.testing.assert_frame_equal(got, serve_frame(fresh, seen, earlier, STEP))
        if states is not None:  # continued: the same state object, stepped on
            continued += sum(after[key].state is states[key].state for key in after)
        assert set(after) == {(uid, lead) for uid in POOLS for lead in (1, 3)}
        states = after
    assert 0 < continued < 4 * 13  # the run after midnight rebuilt its states


def test_a_run_repeated_at_the_same_origin_returns_the_same_bounds() -> None:
    history, raw = fleet(4)
    fresh, seen, earlier = run_at(raw[DS].max(), history, raw)
    first, states = serve_states(fresh, seen, earlier, STEP)
    again, kept = serve_states(fresh, seen, earlier, STEP, dict(states))
    pd.testing.assert_frame_equal(again, first)
    assert all(kept[key] is states[key] for key in states)  # nothing stepped twice


def test_a_state_whose_inputs_changed_is_rebuilt() -> None:
    history, raw = fleet(5)
    origins = sorted(raw[DS].unique())
    fresh, seen, earlier = run_at(origins[-2], history, raw)
    _, states = serve_states(fresh, seen, earlier, STEP)
    # A late sample rewrites an actual the states stepped through, and a stored raw
    # forecast of one pool is gone: both must be rebuilt, not continued.
    rewritten = history.copy()
    late = (rewritten[UID] == POOLS[0]) & (rewritten[DS] == origins[-20])
    rewritten.loc[late, Y] += 7.0
    pruned = raw[~((raw[UID] == POOLS[1]) & (raw[DS] == origins[-30]))]
    for actuals, raws in ((rewritten, raw), (history, pruned)):
        fresh, seen, earlier = run_at(origins[-1], actuals, raws)
        given = copy.deepcopy(states)
        got, after = serve_states(fresh, seen, earlier, STEP, given)
        pd.testing.assert_frame_equal(got, serve_frame(fresh, seen, earlier, STEP))
        assert sum(after[key].state is not given[key].state for key in after) == 2  # one pool
