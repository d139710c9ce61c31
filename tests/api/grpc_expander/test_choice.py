"""The gRPC expander's choice: the merged ConfigMap (hand-made tiers too) applied live."""

from __future__ import annotations

import random
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from api.consumers.priority_expander import RankedPool, rank_pools
from api.grpc_expander.choice import ExpanderView, choose
from pipelines.config.pools import PoolConfig
from tests.api.consumers.conftest import MakeRecommendation

POOLS = [
    PoolConfig(name="a100", node_group_id="eks-a100", gpus_per_node=8, cost_per_node_hour=32),
    PoolConfig(name="l4", node_group_id="eks-l4", gpus_per_node=4, cost_per_node_hour=4),
    PoolConfig(name="h100", node_group_id="eks h100 spot", gpus_per_node=8),
]
PROTOS = Path(__file__).resolve().parents[3] / "api" / "grpc_expander" / "protos"


def view(
    ranking: Sequence[RankedPool], tiers: dict[int, tuple[str, ...]] | None = None
) -> ExpanderView:
    return ExpanderView.of(ranking, {} if tiers is None else tiers)


def predictive(recommend: MakeRecommendation, pool: PoolConfig, current: int, desired: int) -> Any:
    return recommend(pool, current, desired, mode="predictive")


def test_the_offered_pool_with_the_largest_shortfall_wins(
    recommend: MakeRecommendation,
) -> None:
    recs = [predictive(recommend, p, 2, d) for p, d in zip(POOLS, (3, 5, 2), strict=True)]
    ranking = rank_pools(POOLS, recs)

    every = choose(["eks h100 spot", "eks-a100", "eks-l4"], view(ranking))
    without_l4 = choose(["eks h100 spot", "eks-a100"], view(ranking))

    # l4: 3 nodes x 4 GPUs = 12 GPUs short; a100: 1 x 8 = 8; h100: 0.
    assert (every.node_group_ids, every.basis) == (("eks-l4",), "ranked")
    assert without_l4.node_group_ids == ("eks-a100",)
    assert "eks-a100 of 2 offered" in without_l4.reason


def test_the_choice_follows_the_recommendations_of_the_moment(
    recommend: MakeRecommendation,
) -> None:
    before = rank_pools(
        POOLS, [predictive(recommend, POOLS[0], 2, 6), predictive(recommend, POOLS[1], 2, 3)]
    )
    after = rank_pools(
        POOLS, [predictive(recommend, POOLS[0], 2, 2), predictive(recommend, POOLS[1], 2, 3)]
    )

    assert choose(["eks-a100", "eks-l4"], view(before)).node_group_ids == ("eks-a100",)
    assert choose(["eks-a100", "eks-l4"], view(after)).node_group_ids == ("eks-l4",)


def test_no_offered_group_of_foresight_means_no_opinion_and_every_option() -> None:
    choice = choose(["ng-x", "ng-y", "ng-x"], view(rank_pools(POOLS, [])))

    assert (choice.node_group_ids, choice.basis) == (("ng-x", "ng-y"), "no_opinion")


# -- issue #36 item 1: the hand-made tiers of the merged ConfigMap come first ----------

CPU = "cpu-critical"


def test_a_hand_made_tier_above_foresights_range_wins(recommend: MakeRecommendation) -> None:
    recs = [predictive(recommend, POOLS[0], 2, 9)]
    ranking = rank_pools(POOLS, recs, reserved={50})

    choice = choose(["eks-a100", CPU], view(ranking, {50: ("^cpu-critical$",)}))

    assert (choice.node_group_ids, choice.basis) == ((CPU,), "operator_tier")


def test_a_hand_made_tier_between_pools_sits_where_the_operator_put_it(
    recommend: MakeRecommendation,
) -> None:
    recs = [predictive(recommend, p, 2, d) for p, d in zip(POOLS, (3, 5, 2), strict=True)]
    ranking = rank_pools(POOLS, recs, reserved={25})  # l4 30, a100 20, h100 10
    tiers = {25: ("spot",)}  # unanchored: any id containing "spot"

    assert choose(["eks-a100", "cpu-spot-1"], view(ranking, tiers)).node_group_ids == (
        "cpu-spot-1",
    )
    assert choose(["eks-l4", "cpu-spot-1"], view(ranking, tiers)).node_group_ids == ("eks-l4",)
    # The h100 pool's id contains "spot" too: the higher of its two priorities counts.
    assert choose(["eks-a100", "eks h100 spot"], view(ranking, tiers)).node_group_ids == (
        "eks h100 spot",
    )


def test_options_it_cannot_tell_apart_all_come_back(recommend: MakeRecommendation) -> None:
    recs = [predictive(recommend, POOLS[0], 2, 3)]
    ranking = rank_pools(POOLS, recs, reserved={50})
    tiers = {50: ("^cpu-a$", "^cpu-b$")}

    tied = choose(["eks-a100", "cpu-a", "cpu-b"], view(ranking, tiers))
    twins = [PoolConfig(name=n, node_group_id=f"ng-{n}", gpus_per_node=8) for n in "ab"]
    same = rank_pools(twins, [predictive(recommend, p, 2, 4) for p in twins])
    same_place = choose(["ng-b", "ng-a", "x"], view(same))

    assert tied.node_group_ids == ("cpu-a", "cpu-b")
    # Same shortfall, same cost per GPU: both come back, for the next expander.
    assert (same_place.node_group_ids, same_place.basis) == (("ng-b", "ng-a"), "ranked")


def test_unknown_tiers_mean_no_opinion(recommend: MakeRecommendation) -> None:
    ranking = rank_pools(POOLS, [predictive(recommend, POOLS[0], 2, 9)])

    choice = choose(["eks-a100", CPU], ExpanderView.of(ranking, None, "403 Forbidden"))

    assert (choice.node_group_ids, choice.basis) == (("eks-a100", CPU), "no_opinion")
    assert "403 Forbidden" in choice.reason


def test_an_invalid_hand_made_regex_counts_as_unknown_tiers() -> None:
    bad = ExpanderView.of(rank_pools(POOLS, []), {40: ("^(?!x)$",)})

    assert bad.tiers is None
    assert "look-arounds" in bad.problem


@pytest.mark.parametrize("seed", range(5))
def test_never_an_empty_answer_to_a_non_empty_offer(
    recommend: MakeRecommendation, seed: int
) -> None:
    rng = random.Random(seed)
    ids = [p.node_group_id for p in POOLS] + ["cpu-a", "cpu-b", "gpu-x"]
    recs = [predictive(recommend, p, 2, rng.randint(0, 6)) for p in POOLS]
    tiers = {rng.choice([5, 15, 25, 45]): (rng.choice(["cpu", "^gpu", "zzz"]),)}
    ranking = rank_pools(POOLS, recs, reserved=set(tiers))
    for _ in range(20):
        offered = rng.sample(ids, rng.randint(1, len(ids)))
        for reactive in ("no_opinion", "rank"):
            kept = choose(offered, view(ranking, tiers), reactive).node_group_ids  # type: ignore[arg-type]
            assert kept
            assert set(kept) <= set(offered)


# -- issue #36 item 3: no trusted forecast, no opinion unless the setting says rank ----


def test_a_reactive_pool_on_offer_means_no_opinion_by_default(
    recommend: MakeRecommendation,
) -> None:
    recs = [recommend(POOLS[0], 2, 3), recommend(POOLS[1], 2, 3)]  # reactive
    ranking = rank_pools(POOLS, recs)

    default = choose(["eks-a100", "eks-l4"], view(ranking))
    ranked = choose(["eks-a100", "eks-l4"], view(ranking), "rank")

    assert (default.node_group_ids, default.basis) == (("eks-a100", "eks-l4"), "no_opinion")
    assert "reactive" in default.reason
    # 'rank': by shortfall from live demand: a100 1 x 8 GPUs beats l4 1 x 4.
    assert (ranked.node_group_ids, ranked.basis) == (("eks-a100",), "ranked")


def test_the_committed_generated_modules_match_the_proto(tmp_path: Path) -> None:
    root = PROTOS.parents[2]
    relative = PROTOS.relative_to(root) / "expander.proto"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{root}",
            f"--python_out={tmp_path}",
            f"--pyi_out={tmp_path}",
            f"--grpc_python_out={tmp_path}",
            str(root / relative),
        ],
        check=True,
    )
    for name in ("expander_pb2.py", "expander_pb2.pyi", "expander_pb2_grpc.py"):
        generated = _unstamped((tmp_path / relative.parent / name).read_text())
        committed = _unstamped((PROTOS / name).read_text())
        assert generated == committed, f"{name}: regenerate (see the .proto)"


def _unstamped(module: str) -> str:
    """A generated module without the versions of the tools that generated it.

    grpcio-tools writes its own version (and protobuf's) into the modules; a newer
    patch release of the tools (1.85.1 -> 1.85.4 broke CI) changes nothing the .proto
    says. The generated code still requires a runtime at least as new as the stamp.
    """
    module = re.sub(r"GRPC_GENERATED_VERSION = '[^']*'", "GRPC_GENERATED_VERSION = ''", module)
    module = re.sub(r"# Protobuf Python Version: \S+", "# Protobuf Python Version:", module)
    return re.sub(
        r"ValidateProtobufRuntimeVersion\([^)]*\)", "ValidateProtobufRuntimeVersion()", module
    )
