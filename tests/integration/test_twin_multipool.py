"""The twin with two pools the same work runs on: the served ConfigMap picks the group.

The committed sample's ``a100-train`` work on an on-demand group (its history) and a
cheaper spot group (none), 8 five-minute steps with the work raised 60 % from the
third step so that pods go pending: each pending pod's node goes to the group the
priority-expander ConfigMap served at that step prefers, until that group reaches its
maximum size (cluster-autoscaler then skips it and the next group takes the rest).
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest

from benchmarks.twin_multipool import run_group_case, sample_group_case

pytestmark = pytest.mark.integration

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"
STEPS = 8


@pytest.mark.timeout(600)
def test_pending_pods_grow_the_group_the_served_configmap_prefers(tmp_path: Path) -> None:
    case = sample_group_case(SAMPLE, timedelta(days=7), STEPS)
    surge = case.demand.copy()
    surge.iloc[2:] *= 1.6
    case = dataclasses.replace(case, demand=surge)
    result, steps = run_group_case(case, tmp_path / "groups")
    assert [s.ts for s in steps] == list(case.demand.index)
    preferred = {s.ts: s.preferred for s in steps}
    steps_by_ts = {s.ts: s for s in steps}
    assert all(preferred.values())
    assert result.choices, "the surge left no pod pending: nothing for the expander to pick"
    by_id = {pool.node_group_id: pool for pool in case.pools}
    picked_before: dict[object, list[str]] = {}
    for ts, group, _ in result.choices:
        earlier = picked_before.setdefault(ts, [])
        if group != preferred[ts]:
            # CA skips a group at its max size: the preferred group filled up first.
            full = by_id[preferred[ts]]
            assert preferred[ts] in earlier or steps_by_ts[ts].desired[full.name] >= full.max_nodes
        earlier.append(group)
    assert any(group == preferred[ts] for ts, group, _ in result.choices)
    grown = {group for _, group, _ in result.choices}
    for pool in case.pools:
        added = result.groups[pool.name]["expander_nodes"]
        assert (added > 0) == (pool.node_group_id in grown)
