"""The priority expander's choice as the twin applies it, and the multi-group cluster."""

from __future__ import annotations

from datetime import timedelta

import pandas as pd
import pytest

from benchmarks.twin_expander import (
    ExpanderConfigError,
    choose,
    parse_priorities,
    priorities_of_configmap,
)
from benchmarks.twin_groups import Group, GroupCluster
from pipelines.simulate.types import SimPool
from pipelines.twin.cluster import Published

STEP = timedelta(minutes=10)
PREFER_SPOT = parse_priorities("20:\n  - ^ng-spot$\n10:\n  - ^ng-od$\n0:\n  - .*\n")
PREFER_OD = parse_priorities("20:\n  - ^ng-od$\n10:\n  - ^ng-spot$\n0:\n  - .*\n")


def test_the_highest_matching_priority_wins() -> None:
    assert choose(PREFER_SPOT, ["ng-od", "ng-spot"]) == "ng-spot"
    assert choose(PREFER_OD, ["ng-od", "ng-spot"]) == "ng-od"


def test_a_group_that_cannot_take_the_pods_is_not_a_candidate() -> None:
    assert choose(PREFER_SPOT, ["ng-od"]) == "ng-od"
    assert choose(PREFER_SPOT, []) is None


def test_regexes_match_unanchored_and_the_highest_entry_of_a_group_counts() -> None:
    # "gpu" matches both ids (unanchored); ng-od also sits at 5, but its 30 counts.
    both = parse_priorities("30:\n  - od\n15:\n  - gpu\n5:\n  - ng-od\n")
    assert choose(both, ["gpu-spot", "gpu-od"]) == "gpu-od"


def test_ties_go_to_the_id_that_sorts_first_whatever_the_order_offered() -> None:
    tied = parse_priorities("10:\n  - ^ng-b$\n  - ^ng-a$\n0:\n  - .*\n")
    assert choose(tied, ["ng-b", "ng-a"]) == "ng-a"
    assert choose(tied, ["ng-a", "ng-b"]) == "ng-a"


def test_no_matching_entry_filters_nothing() -> None:
    other = parse_priorities("10:\n  - ^cpu$\n")
    assert choose(other, ["ng-z", "ng-y"]) == "ng-y"
    # A group that matches beats one that does not.
    assert choose(other, ["cpu", "ng-a"]) == "cpu"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- a\n", "non-empty mapping"),
        ('"10":\n  - a\n', "plain integer"),
        ("-1:\n  - a\n", "plain integer"),
        ("10: []\n", "non-empty list"),
        ("10:\n  - (?=a)\n", "not RE2"),
        ("10: [a\n", "not YAML"),
    ],
)
def test_a_value_cluster_autoscaler_would_not_read_is_refused(text: str, message: str) -> None:
    with pytest.raises(ExpanderConfigError, match=message):
        parse_priorities(text)


def test_the_priorities_are_read_from_the_configmap_object() -> None:
    manifest = {"kind": "ConfigMap", "data": {"priorities": "10:\n  - ^ng-od$\n0:\n  - .*\n"}}
    assert choose(priorities_of_configmap(manifest), ["ng-spot", "ng-od"]) == "ng-od"
    with pytest.raises(ExpanderConfigError, match=r"data\.priorities"):
        priorities_of_configmap({"data": {}})


def _groups(max_spot: int = 40) -> list[Group]:
    od = SimPool(8, 1, 40, timedelta(minutes=20), 32.0, STEP)
    spot = SimPool(8, 0, max_spot, timedelta(minutes=20), 12.0, STEP)
    return [Group("od", "ng-od", od, 2), Group("spot", "ng-spot", spot, 0)]


def _run(priorities: object, demand: list[float], max_spot: int = 40) -> GroupCluster:
    index = pd.date_range("2025-03-03", periods=len(demand), freq=STEP, tz="UTC")
    cluster = GroupCluster(_groups(max_spot), index, "autoscaler")
    published = {"od": Published(0, 0), "spot": Published(0, 0)}
    for t, value in enumerate(demand):
        cluster.begin(t)
        cluster.arrive(t, value)
        cluster.act(t, published, priorities)  # type: ignore[arg-type]
        cluster.serve(t)
    return cluster


def test_the_expanders_choice_decides_which_group_grows() -> None:
    demand = [16.0, 80.0, 80.0, 80.0, 80.0]
    spot = _run(PREFER_SPOT, demand).result()
    od = _run(PREFER_OD, demand).result()
    # 80 GPUs = 10 nodes, 2 od nodes held: the pending pods' nodes (the backlog's too,
    # while they boot) all go to the group the ConfigMap prefers, as many either way.
    grown = spot.groups["spot"]["expander_nodes"]
    assert grown >= 8
    assert spot.groups["od"]["expander_nodes"] == 0
    assert od.groups["od"]["expander_nodes"] == grown
    assert od.groups["spot"]["nodes_added"] == 0
    assert spot.cost < od.cost
    # Same nodes, same lead: the work waits the same either way.
    assert spot.waiting_gpu_hours == pytest.approx(od.waiting_gpu_hours)


def test_a_preferred_group_at_its_max_size_leaves_the_rest_to_the_next() -> None:
    result = _run(PREFER_SPOT, [16.0, 80.0], max_spot=5).result()
    assert result.groups["spot"]["expander_nodes"] == 5
    assert result.groups["od"]["expander_nodes"] == 3
    assert [(gid, n) for _, gid, n in result.choices] == [("ng-spot", 5), ("ng-od", 3)]


def test_pending_work_is_reported_by_the_group_it_waits_for() -> None:
    index = pd.date_range("2025-03-03", periods=3, freq=STEP, tz="UTC")
    cluster = GroupCluster(_groups(), index, "autoscaler")
    published = {"od": Published(0, 0), "spot": Published(0, 0)}
    cluster.begin(0)
    first = cluster.arrive(0, 40.0)
    assert (first["od"].allocated_gpus, first["od"].queue_gpus) == (16.0, 24.0)
    cluster.act(0, published, PREFER_SPOT)
    cluster.serve(0)
    cluster.begin(1)
    second = cluster.arrive(1, 0.0)
    # Of the 24 GPUs carried, 16 run on the od nodes; the rest wait for the spot nodes
    # the expander asked for.
    assert second["od"].allocated_gpus == pytest.approx(16.0)
    assert second["spot"].queue_gpus == pytest.approx(8.0)
    assert second["od"].queue_gpus == 0.0


def test_groups_of_different_node_sizes_are_refused() -> None:
    index = pd.date_range("2025-03-03", periods=2, freq=STEP, tz="UTC")
    small = SimPool(4, 0, 10, timedelta(minutes=10), 1.0, STEP)
    groups = [*_groups()[:1], Group("small", "ng-small", small, 0)]
    with pytest.raises(ValueError, match="one node size"):
        GroupCluster(groups, index)
