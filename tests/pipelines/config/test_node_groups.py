"""node_group_id forms per cloud provider, as cluster-autoscaler reports them."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pydantic import ValidationError

from pipelines.config.node_groups import node_group_problem
from pipelines.config.pools import PoolConfig, PoolsConfig
from pipelines.config.pools_file import load_pools

GCE = (
    "https://www.googleapis.com/compute/v1/projects/acme-ml/zones/us-central1-a/"
    "instanceGroups/gke-ml-l4-pool-9f8e7d6c-grp"
)


@pytest.mark.parametrize(
    ("node_group_id", "provider"),
    [
        (GCE, "gce"),
        (GCE, None),
        # A provider configured with another domain keeps the path.
        ("https://compute.example.test/v1/projects/p/zones/z/instanceGroups/gke-x", "gce"),
        ("MachineDeployment/gpu-workers/h100-md-0", "clusterapi"),
        ("MachinePool/default/l4.pool-1", "clusterapi"),
        ("eks-a100-train-ng-7ac4e1b2", "aws"),
        ("GPU training group (spot)", "aws"),
        ("eks-a100-train-ng-7ac4e1b2", None),
        ("anything goes without a provider", None),
    ],
)
def test_ids_in_the_providers_form_pass(node_group_id: str, provider: str | None) -> None:
    assert node_group_problem(node_group_id, provider) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("node_group_id", "provider", "message"),
    [
        ("gke-ml-l4-pool-9f8e7d6c-grp", "gce", "instance group URL"),
        # The GKE name is unmistakable even without a provider.
        ("gke-ml-l4-pool-9f8e7d6c-grp", None, "instance group URL"),
        ("projects/acme-ml/zones/us-central1-a/instanceGroups/x", "gce", "instance group URL"),
        ("gpu-workers/h100-md-0", "clusterapi", "<Kind>/<namespace>/<name>"),
        ("Machine/gpu-workers/h100", "clusterapi", "<Kind>/<namespace>/<name>"),
        (GCE, "aws", "not an Auto Scaling group name"),
        ("a" * 256, "aws", "longer than an Auto Scaling group name"),
    ],
)
def test_ids_in_another_form_are_reported(
    node_group_id: str, provider: str | None, message: str
) -> None:
    problem = node_group_problem(node_group_id, provider)  # type: ignore[arg-type]
    assert problem is not None
    assert message in problem


def test_node_group_ids_may_hold_inner_spaces_but_not_at_the_edges() -> None:
    assert PoolConfig(name="a", node_group_id="GPU training group").node_group_id == (
        "GPU training group"
    )
    for bad in (" leading", "trailing ", "two\nlines", ""):
        with pytest.raises(ValidationError):
            PoolConfig(name="a", node_group_id=bad)


def test_load_warns_per_pool_and_the_config_keeps_the_warnings(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "pools.yaml"
    path.write_text(
        "cloud_provider: gce\n"
        "pools:\n"
        "  - {name: l4, node_group_id: gke-ml-l4-pool-9f8e7d6c-grp}\n"
        f"  - {{name: a100, node_group_id: '{GCE.replace('l4', 'a100')}'}}\n"
    )

    with caplog.at_level(logging.WARNING, logger="pipelines.config.pools_file"):
        pools = load_pools(path)

    assert set(pools.node_group_warnings()) == {"l4"}
    (record,) = [r for r in caplog.records if "node_group_id" in r.getMessage()]
    assert "pool l4" in record.getMessage()
    assert "instance group URL" in record.getMessage()


def test_an_unknown_cloud_provider_is_an_error() -> None:
    with pytest.raises(ValidationError, match="cloud_provider"):
        PoolsConfig.model_validate(
            {"cloud_provider": "azure-ish", "pools": [{"name": "a", "node_group_id": "x"}]}
        )
