"""The priority expander ConfigMap: exact text, RE2-safe regexes, ranking, refusals."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
import re2
import yaml

from api.consumers.go_regex import unsupported_constructs
from api.consumers.priority_expander import (
    CATCH_ALL,
    CONFIGMAP_KEY,
    CONFIGMAP_NAME,
    PriorityExpanderConfig,
    compile_re2,
    node_group_regex,
    priority_expander_configmap,
    quote_meta,
    rank_pools,
    validate_priorities,
    validate_value_text,
)
from pipelines.config.pools import PoolConfig
from pipelines.errors import PublishError
from policy.recommendation import Recommendation

MakeRecommendation = Callable[..., Recommendation]

AWS_ID = "eks-a100-nodes-2024a1b2c3"
GCE_ID = (
    "https://www.googleapis.com/compute/v1/projects/acme-ml/zones/us-central1-a/"
    "instanceGroups/gke-ml-l4-pool-9f8e7d6c-grp"
)
CAPI_ID = "MachineDeployment/gpu-workers/h100-md-0"

A100 = PoolConfig(name="a100", node_group_id=AWS_ID, gpus_per_node=8, cost_per_node_hour=32.77)
L4 = PoolConfig(name="l4", node_group_id=GCE_ID, gpus_per_node=4, cost_per_node_hour=3.0)
H100 = PoolConfig(name="h100", node_group_id=CAPI_ID, gpus_per_node=8, cost_per_node_hour=98.0)
POOLS = [A100, L4, H100]


def three_pool_config(recommend: MakeRecommendation) -> PriorityExpanderConfig:
    # h100 short 3 nodes = 24 GPUs; a100 short 2 x 8 = 16; l4 short 4 x 4 = 16, cheaper per GPU.
    recs = [recommend(A100, 3, 5), recommend(L4, 1, 5), recommend(H100, 2, 5)]
    return priority_expander_configmap(POOLS, recs)


def test_three_pool_yaml_text_is_exact(recommend: MakeRecommendation) -> None:
    config = three_pool_config(recommend)

    assert config.value == (
        "30:\n"
        "  - ^MachineDeployment/gpu-workers/h100-md-0$\n"
        "20:\n"
        "  - ^https://www\\.googleapis\\.com/compute/v1/projects/acme-ml/zones/us-central1-a/"
        "instanceGroups/gke-ml-l4-pool-9f8e7d6c-grp$\n"
        "10:\n"
        "  - ^eks-a100-nodes-2024a1b2c3$\n"
        "0:\n"
        "  - .*\n"
    )
    assert config.yaml_text == (
        "apiVersion: v1\n"
        "kind: ConfigMap\n"
        "metadata:\n"
        "  name: cluster-autoscaler-priority-expander\n"
        "  namespace: kube-system\n"
        "  labels:\n"
        "    app.kubernetes.io/managed-by: foresight\n"
        "  annotations:\n"
        '    foresight.io/managed-node-groups: \'["MachineDeployment/gpu-workers/h100-md-0",'
        '"eks-a100-nodes-2024a1b2c3","https://www.googleapis.com/compute/v1/projects/'
        "acme-ml/zones/us-central1-a/instanceGroups/gke-ml-l4-pool-9f8e7d6c-grp\"]'\n"
        "data:\n"
        "  priorities: |\n" + "".join(f"    {line}\n" for line in config.value.splitlines())
    )


def test_keys_are_plain_unquoted_integers_and_round_trip(recommend: MakeRecommendation) -> None:
    config = three_pool_config(recommend)
    top_level = [line for line in config.value.splitlines() if not line.startswith(" ")]

    assert top_level == ["30:", "20:", "10:", "0:"]
    assert all(re.fullmatch(r"[0-9]+:", line) for line in top_level)
    parsed = yaml.safe_load(config.value)
    assert list(parsed) == [30, 20, 10, 0]
    assert all(type(key) is int for key in parsed)
    assert all(isinstance(v, list) and all(isinstance(r, str) for r in v) for v in parsed.values())
    assert parsed[0] == [CATCH_ALL]


def test_manifest_is_the_configmap_cluster_autoscaler_reads(recommend: MakeRecommendation) -> None:
    config = three_pool_config(recommend)

    assert (
        config.manifest["metadata"]["name"]
        == CONFIGMAP_NAME
        == ("cluster-autoscaler-priority-expander")
    )
    assert config.manifest["metadata"]["namespace"] == "kube-system"
    assert list(config.manifest["data"]) == [CONFIGMAP_KEY] == ["priorities"]
    assert yaml.safe_load(config.yaml_text) == config.manifest
    assert yaml.safe_load(yaml.safe_load(config.yaml_text)["data"]["priorities"]) == {
        p: list(r) for p, r in config.priorities.items()
    }


def test_namespace_is_configurable_and_checked() -> None:
    assert (
        priority_expander_configmap(POOLS, [], namespace="autoscaler").manifest["metadata"][
            "namespace"
        ]
        == "autoscaler"
    )
    with pytest.raises(PublishError, match="DNS-1123"):
        priority_expander_configmap(POOLS, [], namespace="Kube_System")


@pytest.mark.parametrize("node_group_id", [AWS_ID, GCE_ID, CAPI_ID])
def test_each_cloud_id_regex_compiles_in_re2_and_matches_only_its_id(node_group_id: str) -> None:
    regex = node_group_regex(node_group_id)
    compiled = re2.compile(regex)
    # Near misses: a wildcard '.', a missing anchor, or another pool's id would match these.
    near_misses = [
        node_group_id + "-2",
        "x" + node_group_id,
        node_group_id.replace(".", "x"),
        node_group_id.upper(),
        *(other for other in (AWS_ID, GCE_ID, CAPI_ID) if other != node_group_id),
    ]

    assert compiled.search(node_group_id) is not None
    assert [m for m in near_misses if m != node_group_id and compiled.search(m)] == []


def test_quote_meta_matches_go_regexp_quotemeta() -> None:
    # The example of Go's regexp.QuoteMeta documentation.
    assert quote_meta("Escaping symbols like: .+*?()|[]{}^$") == (
        r"Escaping symbols like: \.\+\*\?\(\)\|\[\]\{\}\^\$"
    )
    # '/', ':' and '-' are literal in RE2 and stay unescaped, as Go leaves them.
    assert quote_meta("MachineDeployment/ns/a-b:c") == "MachineDeployment/ns/a-b:c"


@pytest.mark.parametrize(
    "node_group_id", ["gpu#1&x:y", "ng'quoted'", r"back\slash\1", "a.b+c*(d)|[e]{f}^$", "ümlaut-ng"]
)
def test_awkward_ids_survive_escaping_and_yaml(node_group_id: str) -> None:
    pool = PoolConfig(name="odd", node_group_id=node_group_id)
    config = priority_expander_configmap([pool, A100], [])
    regex = config.ranking[0].regex if config.ranking[0].pool == "odd" else config.ranking[1].regex

    assert re2.compile(regex).fullmatch(node_group_id) is not None
    assert re2.compile(regex).search(AWS_ID) is None
    # Without recommendations, at equal cost, the two pools share one priority.
    assert [regex, config.ranking[0].regex] in yaml.safe_load(config.value).values() or [
        config.ranking[0].regex,
        regex,
    ] in yaml.safe_load(config.value).values()


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("^(?=gpu)a100$", "\\(\\?="),
        ("^(?!cpu).*$", "\\(\\?!"),
        ("^(?<=x)y$", "\\(\\?<="),
        ("^(a)\\1$", "\\\\1"),
        ("^\\k<n>$", "\\\\k"),
        ("^a\\Cb$", "\\\\C"),
        ("^a++$", "does not compile with RE2"),
        ("^(unclosed$", "does not compile with RE2"),
    ],
)
def test_re2_incompatible_regex_is_refused(pattern: str, reason: str) -> None:
    with pytest.raises(PublishError, match=reason):
        validate_priorities({10: [pattern], 0: [CATCH_ALL]})


def test_escaped_lookalikes_are_not_mistaken_for_lookarounds() -> None:
    assert unsupported_constructs(r"^\(\?=x\)$") == []
    assert unsupported_constructs(r"^[(?=]$") == []
    assert unsupported_constructs(r"^a\\1$") == []  # an escaped backslash, then '1'
    assert unsupported_constructs(r"^[]\d]$") == []
    assert compile_re2(r"^a\\1$").fullmatch("a\\1") is not None


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('"10":\n  - ^a$\n0:\n  - .*\n', "plain unquoted integer"),
        ("1.5:\n  - ^a$\n0:\n  - .*\n", "plain unquoted integer"),
        ("-1:\n  - ^a$\n", "plain unquoted integer"),
        ("010:\n  - ^a$\n0:\n  - .*\n", "plain unquoted integer"),
        ("10:\n  - ^a$\n", "catch-all"),
        ("10:\n  - .*\n0:\n  - ^a$\n", "catch-all"),
        ("10: []\n0:\n  - .*\n", "plain unquoted integer"),
        ("10:\n  - 5\n0:\n  - .*\n", "regexes are strings"),
        ("", "non-empty mapping"),
        ("10:\n  - [unclosed\n", "not valid YAML"),
    ],
)
def test_invalid_values_are_refused(text: str, reason: str) -> None:
    with pytest.raises(PublishError, match=reason):
        validate_value_text(text)


def test_bool_and_negative_keys_are_refused_in_a_parsed_map() -> None:
    with pytest.raises(PublishError, match="plain integer in"):
        validate_priorities({True: ["^a$"], 0: [CATCH_ALL]})
    with pytest.raises(PublishError, match="plain integer in"):
        validate_priorities({-5: ["^a$"], 0: [CATCH_ALL]})
    with pytest.raises(PublishError, match="plain integer in"):
        validate_priorities({"10": ["^a$"], 0: [CATCH_ALL]})
    with pytest.raises(PublishError, match="plain integer in"):
        validate_priorities({2**63: ["^a$"], 0: [CATCH_ALL]})
    with pytest.raises(PublishError, match="non-empty list"):
        validate_priorities({10: [], 0: [CATCH_ALL]})


def test_pools_sharing_a_node_group_id_are_refused() -> None:
    twin = PoolConfig(name="a100-twin", node_group_id=AWS_ID)
    with pytest.raises(PublishError, match="also matches"):
        priority_expander_configmap([A100, twin], [])


def test_largest_shortfall_in_gpus_ranks_first(recommend: MakeRecommendation) -> None:
    # 3 nodes x 4 GPUs = 12 GPUs beats 1 node x 8 GPUs = 8 GPUs, though fewer nodes.
    small = PoolConfig(name="small", node_group_id="small", gpus_per_node=4, cost_per_node_hour=99)
    big = PoolConfig(name="big", node_group_id="big", gpus_per_node=8, cost_per_node_hour=1)
    ranking = rank_pools([big, small], [recommend(small, 1, 4), recommend(big, 1, 2)])

    assert [(r.pool, r.shortfall_gpus, r.priority) for r in ranking] == [
        ("small", 12, 20),
        ("big", 8, 10),
    ]


def test_equal_shortfall_prefers_cheaper_per_gpu_not_per_node(
    recommend: MakeRecommendation,
) -> None:
    # 16/h for 8 GPUs is 2 per GPU; 3/h for 1 GPU is 3 per GPU.
    wide = PoolConfig(name="wide", node_group_id="wide", gpus_per_node=8, cost_per_node_hour=16)
    narrow = PoolConfig(
        name="narrow", node_group_id="narrow", gpus_per_node=1, cost_per_node_hour=3
    )
    ranking = rank_pools([narrow, wide], [recommend(wide, 2, 3), recommend(narrow, 0, 8)])

    assert [r.pool for r in ranking] == ["wide", "narrow"]
    assert [r.cost_per_gpu_hour for r in ranking] == [2.0, 3.0]


def test_pools_the_rule_cannot_tell_apart_share_a_priority(recommend: MakeRecommendation) -> None:
    # Same shortfall, same cost per GPU: the tie goes to cluster-autoscaler's next
    # expander, not to whichever name sorts first.
    pools = [PoolConfig(name=n, node_group_id=f"ng-{n}") for n in ("c", "a", "b")]
    recs = [recommend(pools[0], 2, 3), recommend(pools[1], 2, 2), recommend(pools[2], 2, 2)]
    ranking = rank_pools(pools, recs, spacing=5)

    assert [(r.pool, r.priority) for r in ranking] == [("c", 10), ("a", 5), ("b", 5)]
    config = priority_expander_configmap(pools, recs)
    assert config.priorities == {20: ("^ng-c$",), 10: ("^ng-a$", "^ng-b$"), 0: (CATCH_ALL,)}


def test_pool_priorities_avoid_the_numbers_of_hand_made_entries(
    recommend: MakeRecommendation,
) -> None:
    # Issue #36 item 6: an operator entry at 20 tied with whichever pool ranked second.
    pools = [PoolConfig(name=n, node_group_id=f"ng-{n}") for n in ("a", "b", "c")]
    recs = [recommend(pools[0], 2, 5), recommend(pools[1], 2, 4), recommend(pools[2], 2, 3)]

    plain = rank_pools(pools, recs)
    avoiding = rank_pools(pools, recs, reserved={20, 21, 15})

    assert [r.priority for r in plain] == [30, 20, 10]
    # 20 and 21 are the operator's: the second pool takes the next free number above.
    assert [r.priority for r in avoiding] == [30, 22, 10]
    config = priority_expander_configmap(pools, recs, reserved={20, 21, 15})
    assert set(config.priorities) == {30, 22, 10, 0}


def test_pool_priorities_stay_put_while_the_ranking_does_not_change(
    recommend: MakeRecommendation,
) -> None:
    pools = [PoolConfig(name=n, node_group_id=f"ng-{n}") for n in ("a", "b")]
    first = rank_pools(pools, [recommend(pools[0], 2, 6), recommend(pools[1], 2, 3)], reserved={20})
    # Other numbers, same order: the same priorities.
    second = rank_pools(
        pools, [recommend(pools[0], 1, 9), recommend(pools[1], 4, 5)], reserved={20}
    )

    assert [(r.pool, r.priority) for r in first] == [("a", 21), ("b", 10)]
    assert [(r.pool, r.priority) for r in second] == [(r.pool, r.priority) for r in first]


def test_a_gap_full_of_hand_made_numbers_is_refused_with_what_to_move() -> None:
    with pytest.raises(PublishError, match="from 1 to 19"):
        rank_pools(POOLS[:1], [], reserved=set(range(1, 20)))


def test_scale_down_and_missing_recommendations_rank_last(recommend: MakeRecommendation) -> None:
    up = PoolConfig(name="up", node_group_id="up")
    down = PoolConfig(name="down", node_group_id="down")
    unknown = PoolConfig(name="unknown", node_group_id="unknown", cost_per_node_hour=0.01)
    stranger = PoolConfig(name="stranger", node_group_id="stranger")
    recs = [recommend(up, 2, 3), recommend(down, 5, 3), recommend(stranger, 0, 9)]
    ranking = rank_pools([unknown, down, up], recs)

    assert [(r.pool, r.shortfall_gpus) for r in ranking] == [
        ("up", 8),
        ("down", -16),
        ("unknown", None),
    ]
    config = priority_expander_configmap([unknown, down, up], recs)
    assert list(config.priorities) == [30, 20, 10, 0]
    assert config.priorities[0] == (CATCH_ALL,)


def test_spacing_must_be_positive() -> None:
    with pytest.raises(ValueError, match="spacing"):
        rank_pools(POOLS, [], spacing=0)


def test_an_auto_scaling_group_name_with_spaces_is_matched_exactly(
    recommend: MakeRecommendation,
) -> None:
    pools = [
        PoolConfig(name="spot", node_group_id="GPU training (spot) 2"),
        PoolConfig(name="plain", node_group_id="GPU training"),
    ]

    config = priority_expander_configmap(pools, [recommend(pools[0], 2, 4)])

    assert config.priorities[20] == (r"^GPU training \(spot\) 2$",)
    assert config.priorities[10] == ("^GPU training$",)
    assert yaml.safe_load(config.value)[20] == [r"^GPU training \(spot\) 2$"]
