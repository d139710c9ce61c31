"""publish_once through the official client against the stub API server (issue #36).

A conflicting hand-made entry costs the ConfigMap only, the dry run shows what the PUT
carries, quoted keys follow the configured cluster-autoscaler release, and pool
numbers never tie with a hand-made one. The stub is not a cluster
(:mod:`tests.integration.kube_stub`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from api.publish_cluster import Mode
from api.publishing import publish_once
from api.service import RecommendationService
from api.services import Services
from api.settings import load_app_settings
from pipelines.config.pools import PoolConfig, PoolsConfig
from pipelines.store.store import open_store
from tests.integration.kube_stub import Key, KubeStub, running_stub, write_kubeconfig

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

NOW = datetime(2025, 3, 30, 12, 0, tzinfo=UTC)
BUFFERS = "gpu-buffers"
POOLS = [
    PoolConfig(name="a100", node_group_id="eks-a100", gpus_per_node=8),
    PoolConfig(name="l4", node_group_id="eks-l4", gpus_per_node=4),
]
CM_KEY: Key = ("v1", "configmaps", "kube-system", "cluster-autoscaler-priority-expander")


@pytest.fixture
def stub() -> Iterator[tuple[KubeStub, str]]:
    with running_stub() as served:
        yield served


Publish = Callable[..., Any]


@pytest.fixture
def publish_to_stub(stub: tuple[KubeStub, str], tmp_path: Path) -> Iterator[Publish]:
    """Run publish_once against the stub; keyword arguments go to ``publish``."""
    _, url = stub
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", url)
    with open_store(f"sqlite:///{tmp_path / 'store.db'}") as store:
        ds = pd.date_range(end=NOW, periods=2, freq="5min", tz="UTC")
        store.samples.upsert(
            pd.concat(
                pd.DataFrame({"unique_id": f"{p.name}/{s}", "ds": ds, "y": y})
                for p in POOLS
                for s, y in (
                    ("allocated_gpus", 20.0 if p.name == "a100" else 4.0),
                    ("queue_gpus", 4.0),
                    ("demand_gpus", 24.0 if p.name == "a100" else 8.0),
                    ("nodes", 3.0),
                )
            )
        )

        def run(*, apply: bool = True, **publish: Any) -> Any:
            settings = load_app_settings(
                root=tmp_path,
                publish={"kubeconfig": str(kubeconfig), "buffers_namespace": BUFFERS, **publish},
                service={"forecast_only": False},
            )
            service = RecommendationService(
                Services(settings, PoolsConfig(pools=POOLS), store, None, clock=lambda: NOW)
            )
            service.start()
            mode: Mode = "apply" if apply else "dry_run"
            return publish_once(settings, store, mode=mode, now=NOW, service=service)

        yield run


def hand_made(state: KubeStub, priorities: str, *, owned: bool = True) -> None:
    labels = {"app.kubernetes.io/managed-by": "foresight"} if owned else {}
    state.objects[CM_KEY] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": CM_KEY[3],
            "namespace": "kube-system",
            "labels": labels,
            "resourceVersion": "7",
        },
        "data": {"priorities": priorities},
    }


def test_a_conflicting_entry_costs_the_configmap_only(
    stub: tuple[KubeStub, str], publish_to_stub: Publish
) -> None:
    state, _ = stub
    hand_made(state, "25:\n  - ^eks-.*\n0:\n  - .*\n")
    before = copy.deepcopy(state.objects[CM_KEY])

    outcome = publish_to_stub()

    cm = "ConfigMap kube-system/cluster-autoscaler-priority-expander"
    assert outcome.objects[cm] == "skipped"
    assert "'^eks-.*' at priority 25" in outcome.problems[cm]
    assert state.objects[CM_KEY] == before
    assert set(state.stored("deployments")) == {
        "foresight-overprovisioning-a100",
        "foresight-overprovisioning-l4",
    }
    assert "foresight-placeholder" in state.stored("priorityclasses")


def test_the_dry_run_shows_what_the_put_carries(
    stub: tuple[KubeStub, str], publish_to_stub: Publish
) -> None:
    state, _ = stub
    hand_made(state, "15:\n  - ^cpu-general$\n0:\n  - .*\n")

    dry = publish_to_stub(apply=False)

    (put,) = [r for r in state.requests if r.method == "PUT" and "configmaps" in r.path]
    assert put.query == {"dryRun": ["All"]}
    shown = yaml.safe_load(dry.configmap.yaml_text)
    assert shown["data"] == put.body["data"]
    assert shown["metadata"]["annotations"] == put.body["metadata"]["annotations"]
    assert yaml.safe_load(shown["data"]["priorities"])[15] == ["^cpu-general$"]


@pytest.mark.parametrize(("version", "result"), [(None, "written"), ("1.34", "skipped")])
def test_a_quoted_key_follows_the_configured_release(
    stub: tuple[KubeStub, str], publish_to_stub: Publish, version: str | None, result: str
) -> None:
    # None: the default, the newest release tested (1.36), which reads quoted keys.
    state, _ = stub
    hand_made(state, '"15":\n  - ^cpu-general$\n0:\n  - .*\n')

    given = {} if version is None else {"cluster_autoscaler_version": version}
    outcome = publish_to_stub(**given)

    cm = "ConfigMap kube-system/cluster-autoscaler-priority-expander"
    assert outcome.objects[cm] == result
    value = state.objects[CM_KEY]["data"]["priorities"]
    if result == "written":
        assert yaml.safe_load(value)[15] == ["^cpu-general$"]
        assert '"15"' not in value
    else:
        assert "gopkg.in/yaml.v2" in outcome.problems[cm]
    assert "foresight-overprovisioning-a100" in state.stored("deployments")


def test_pool_numbers_never_tie_with_a_hand_made_one(
    stub: tuple[KubeStub, str], publish_to_stub: Publish
) -> None:
    state, _ = stub
    # Foresight's second pool would get 10, its first 20: the operator holds 20.
    hand_made(state, "20:\n  - ^cpu-x$\n0:\n  - .*\n")

    publish_to_stub()
    first = yaml.safe_load(state.objects[CM_KEY]["data"]["priorities"])
    publish_to_stub()
    second = yaml.safe_load(state.objects[CM_KEY]["data"]["priorities"])

    assert first[20] == ["^cpu-x$"]
    assert sorted(first) == [0, 10, 20, 21]
    assert second == first
