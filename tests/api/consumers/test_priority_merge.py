"""Merging Foresight's priorities with an operator's entries in the live ConfigMap."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from api.consumers.k8s import Manifest
from api.consumers.priority_expander import (
    MANAGED_NODE_GROUPS,
    priority_expander_configmap,
)
from api.consumers.priority_merge import (
    PriorityConflictError,
    accepts_quoted_keys,
    managed_node_groups,
    merge_priorities,
    operator_entries,
)
from pipelines.config.pools import PoolConfig
from pipelines.errors import PublishError
from tests.api.consumers.conftest import MakeRecommendation

POOLS = [
    PoolConfig(name="a100", node_group_id="eks-a100", gpus_per_node=8),
    PoolConfig(name="l4", node_group_id="eks-l4", gpus_per_node=4),
]


def desired(recommend: MakeRecommendation, pools: list[PoolConfig] = POOLS) -> Manifest:
    recs = [recommend(pools[0], 2, 4), *(recommend(p, 2, 2) for p in pools[1:])]
    return priority_expander_configmap(pools, recs).manifest


def live(priorities: str, managed: list[str] | None = None) -> Manifest:
    metadata: dict[str, object] = {"name": "cluster-autoscaler-priority-expander"}
    if managed is not None:
        metadata["annotations"] = {MANAGED_NODE_GROUPS: json.dumps(managed)}
    return {"kind": "ConfigMap", "metadata": metadata, "data": {"priorities": priorities}}


def parsed(manifest: Manifest) -> dict[int, list[str]]:
    value: dict[int, list[str]] = yaml.safe_load(manifest["data"]["priorities"])
    return value


def test_the_built_configmap_records_the_node_groups_it_manages(
    recommend: MakeRecommendation,
) -> None:
    assert managed_node_groups(desired(recommend)) == ["eks-a100", "eks-l4"]


def test_operator_entries_are_kept_at_their_priorities(recommend: MakeRecommendation) -> None:
    # The operator added a CPU group between Foresight's two pools and a spot group
    # at Foresight's top priority; Foresight's own entries moved since.
    existing = live(
        "20:\n  - ^eks-l4$\n  - ^cpu-spot-.*\n15:\n  - ^cpu-general$\n"
        "10:\n  - ^eks-a100$\n0:\n  - .*\n",
        managed=["eks-a100", "eks-l4"],
    )

    merged = merge_priorities(existing, desired(recommend))

    assert parsed(merged) == {
        20: ["^eks-a100$", "^cpu-spot-.*"],
        15: ["^cpu-general$"],
        10: ["^eks-l4$"],
        0: [".*"],
    }
    assert merged["metadata"] == desired(recommend)["metadata"]


def test_nothing_to_keep_returns_the_desired_object_unchanged(
    recommend: MakeRecommendation,
) -> None:
    wanted = desired(recommend)
    before = copy.deepcopy(wanted)

    merged = merge_priorities(live("10:\n  - ^eks-a100$\n0:\n  - .*\n", ["eks-a100"]), wanted)

    assert merged == before


def test_a_pool_removed_from_the_pools_file_loses_its_entry(
    recommend: MakeRecommendation,
) -> None:
    # eks-old was Foresight's (recorded in the annotation): it goes with its pool.
    existing = live(
        "30:\n  - ^eks-old$\n20:\n  - ^eks-a100$\n0:\n  - .*\n",
        managed=["eks-a100", "eks-old"],
    )

    merged = merge_priorities(existing, desired(recommend))

    assert parsed(merged) == {20: ["^eks-a100$"], 10: ["^eks-l4$"], 0: [".*"]}


def test_without_the_annotation_only_the_current_regexes_are_foresights(
    recommend: MakeRecommendation,
) -> None:
    # Written by a version before the annotation (or labelled by hand): eks-old is
    # not known to be Foresight's, so it is kept.
    existing = live("30:\n  - ^eks-old$\n20:\n  - ^eks-l4$\n0:\n  - .*\n")

    merged = merge_priorities(existing, desired(recommend))

    assert parsed(merged) == {30: ["^eks-old$"], 20: ["^eks-a100$"], 10: ["^eks-l4$"], 0: [".*"]}


def test_an_operator_entry_matching_a_managed_node_group_is_a_conflict(
    recommend: MakeRecommendation,
) -> None:
    existing = live("50:\n  - ^eks-.*\n0:\n  - .*\n", managed=["eks-a100", "eks-l4"])

    with pytest.raises(PriorityConflictError, match=r"'\^eks-\.\*' at priority 50.*eks-a100"):
        merge_priorities(existing, desired(recommend))


def test_an_unanchored_operator_regex_is_matched_as_cluster_autoscaler_matches(
    recommend: MakeRecommendation,
) -> None:
    # 'a100' is found inside 'eks-a100' by an unanchored search.
    existing = live("50:\n  - a100\n0:\n  - .*\n", managed=["eks-a100", "eks-l4"])

    with pytest.raises(PriorityConflictError, match="eks-a100"):
        merge_priorities(existing, desired(recommend))


def test_an_operator_entry_beside_the_catch_all_is_a_conflict(
    recommend: MakeRecommendation,
) -> None:
    existing = live("0:\n  - .*\n  - ^cpu$\n", managed=["eks-a100", "eks-l4"])

    with pytest.raises(PriorityConflictError, match="catch-all's priority 0"):
        merge_priorities(existing, desired(recommend))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("10: [unclosed\n", "not valid YAML"),
        ("- a list\n", "not a map"),
        ("'ten':\n  - ^cpu$\n", "does not have an integer priority"),
        ("10.5:\n  - ^cpu$\n", "does not have an integer priority"),
    ],
)
def test_a_live_value_foresight_cannot_read_is_not_overwritten(
    recommend: MakeRecommendation, text: str, message: str
) -> None:
    with pytest.raises(PriorityConflictError, match=message):
        merge_priorities(live(text, ["eks-a100"]), desired(recommend))


def test_a_corrupt_annotation_is_a_clear_error(recommend: MakeRecommendation) -> None:
    existing = live("0:\n  - .*\n")
    existing["metadata"]["annotations"] = {MANAGED_NODE_GROUPS: "{not json"}

    with pytest.raises(PublishError, match="remove it and publish again"):
        merge_priorities(existing, desired(recommend))


QUOTED = '"15":\n  - ^cpu-general$\n10:\n  - ^eks-a100$\n0:\n  - .*\n'


@pytest.mark.parametrize("version", ["1.35", "1.36"])
def test_a_quoted_key_is_kept_where_cluster_autoscaler_reads_it(
    recommend: MakeRecommendation, version: str
) -> None:
    # Issue #36 item 5: from 1.35 sigs.k8s.io/yaml reads "15" as priority 15.
    merged = merge_priorities(live(QUOTED, ["eks-a100"]), desired(recommend), version=version)  # type: ignore[arg-type]

    assert parsed(merged)[15] == ["^cpu-general$"]
    # Written back plain: every release reads that.
    assert '"15"' not in merged["data"]["priorities"]
    assert "\n15:\n" in "\n" + merged["data"]["priorities"]


@pytest.mark.parametrize("version", ["1.33", "1.34"])
def test_a_quoted_key_is_refused_with_the_reason_where_it_is_not_read(
    recommend: MakeRecommendation, version: str
) -> None:
    with pytest.raises(PriorityConflictError) as caught:
        merge_priorities(live(QUOTED, ["eks-a100"]), desired(recommend), version=version)  # type: ignore[arg-type]

    message = str(caught.value)
    assert f"cluster-autoscaler {version}" in message
    assert "gopkg.in/yaml.v2" in message
    assert "publish.cluster_autoscaler_version" in message
    assert "rejects it too" not in message


def test_quoted_keys_follow_the_release_that_switched_yaml_readers() -> None:
    assert [accepts_quoted_keys(v) for v in ("1.33", "1.34", "1.35", "1.36")] == [
        False,
        False,
        True,
        True,
    ]


def test_operator_entries_of_a_hand_made_configmap_are_all_but_foresights() -> None:
    existing = live("50:\n  - ^cpu-critical$\n20:\n  - ^eks-a100$\n0:\n  - .*\n")

    assert operator_entries(existing, ["eks-a100"]) == {50: ["^cpu-critical$"]}


def test_merging_twice_does_not_repeat_operator_entries(recommend: MakeRecommendation) -> None:
    existing = live("15:\n  - ^cpu-general$\n0:\n  - .*\n", ["eks-a100", "eks-l4"])
    once = merge_priorities(existing, desired(recommend))

    assert merge_priorities(existing, once) == once
