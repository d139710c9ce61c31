"""The gRPC expander's choice: the ConfigMap's ranking applied to the offered groups."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from api.consumers.priority_expander import rank_pools
from api.grpc_expander.choice import choose
from pipelines.config.pools import PoolConfig
from tests.api.consumers.conftest import MakeRecommendation

POOLS = [
    PoolConfig(name="a100", node_group_id="eks-a100", gpus_per_node=8, cost_per_node_hour=32),
    PoolConfig(name="l4", node_group_id="eks-l4", gpus_per_node=4, cost_per_node_hour=4),
    PoolConfig(name="h100", node_group_id="eks h100 spot", gpus_per_node=8),
]
PROTOS = Path(__file__).resolve().parents[3] / "api" / "grpc_expander" / "protos"


def test_the_offered_pool_with_the_largest_shortfall_wins(
    recommend: MakeRecommendation,
) -> None:
    recs = [recommend(POOLS[0], 2, 3), recommend(POOLS[1], 2, 5), recommend(POOLS[2], 2, 2)]
    ranking = rank_pools(POOLS, recs)

    every = choose(["eks h100 spot", "eks-a100", "eks-l4"], ranking)
    without_l4 = choose(["eks h100 spot", "eks-a100"], ranking)

    # l4: 3 nodes x 4 GPUs = 12 GPUs short; a100: 1 x 8 = 8; h100: 0.
    assert (every.node_group_ids, every.basis) == (("eks-l4",), "ranked")
    assert without_l4.node_group_ids == ("eks-a100",)
    assert "pool a100" in without_l4.reason


def test_the_choice_follows_the_recommendations_of_the_moment(
    recommend: MakeRecommendation,
) -> None:
    before = rank_pools(POOLS, [recommend(POOLS[0], 2, 6), recommend(POOLS[1], 2, 3)])
    after = rank_pools(POOLS, [recommend(POOLS[0], 2, 2), recommend(POOLS[1], 2, 3)])

    assert choose(["eks-a100", "eks-l4"], before).node_group_ids == ("eks-a100",)
    assert choose(["eks-a100", "eks-l4"], after).node_group_ids == ("eks-l4",)


def test_without_recommendations_the_cheaper_gpu_wins_as_in_the_configmap(
    recommend: MakeRecommendation,
) -> None:
    ranking = rank_pools(POOLS, [])

    assert choose(["eks-a100", "eks-l4"], ranking).node_group_ids == ("eks-l4",)


def test_no_offered_group_of_foresight_means_no_opinion_and_every_option() -> None:
    ranking = rank_pools(POOLS, [])

    choice = choose(["ng-x", "ng-y", "ng-x"], ranking)

    assert (choice.node_group_ids, choice.basis) == (("ng-x", "ng-y", "ng-x"), "no_opinion")


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
