"""KubeWriter and publish_once against an API-shaped stub of the Kubernetes REST API.

NOT a cluster: no kind, k3s or Docker engine is available here, so the test runs a
small local HTTP server that implements only the endpoints Foresight uses (GET, list
by label, POST, PUT, DELETE of ConfigMaps, PodTemplates, Deployments, PriorityClasses
and CapacityBuffer custom objects), keeps objects in memory, adds what a real server
adds (uid, resourceVersion, a defaulted field) and honours ``dryRun=All``. It records
every request, so the tests pin the exact paths, query parameters and bodies the
official client sends. Admission, schema validation and RBAC of a real API server
are not exercised.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from kubernetes.client import ApiClient, Configuration  # type: ignore[import-untyped]

from api.consumers.capacity_buffers import BufferSettings, capacity_buffers
from api.consumers.k8s import Manifest
from api.consumers.kube_writer import KubeWriter, PruneScope
from api.consumers.priority_expander import priority_expander_configmap
from api.publish_cluster import Mode, prune_scopes
from api.publishing import publish_once
from api.service import RecommendationService
from api.services import Services
from api.settings import load_app_settings
from pipelines.config.pools import PoolConfig, PoolsConfig
from pipelines.store.store import open_store
from policy.decide import decide
from policy.recommendation import Recommendation
from policy.state import StabilisationState
from policy.types import NO_LATENCY, ForecastHealth, LiveSignals, Sample
from tests.integration.kube_stub import Key, KubeStub, running_stub, write_kubeconfig

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

NOW = datetime(2025, 3, 30, 12, 0, tzinfo=UTC)
OWNED = "app.kubernetes.io/managed-by=foresight"
BUFFERS = "gpu-buffers"
POOLS = [
    PoolConfig(name="a100", node_group_id="eks-a100", gpus_per_node=8),
    PoolConfig(name="l4", node_group_id="eks-l4", gpus_per_node=4),
]


@pytest.fixture
def stub() -> Iterator[tuple[KubeStub, str]]:
    with running_stub() as served:
        yield served


@pytest.fixture
def writer(stub: tuple[KubeStub, str]) -> Iterator[KubeWriter]:
    configuration = Configuration(host=stub[1])
    client = KubeWriter(ApiClient(configuration), source="the stub")
    yield client
    client.close()


def recommendation(pool: PoolConfig, headroom_pods: int) -> Recommendation:
    """A real decision, then ``headroom_pods`` nodes short: that many more nodes desired."""
    live = LiveSignals(Sample(8.0, NOW), Sample(2, NOW))
    health = ForecastHealth(None, 1.5, timedelta(hours=1), timedelta(hours=1))
    rec = decide(pool, None, live, health, NO_LATENCY, StabilisationState(), NOW)
    return replace(
        rec,
        current_nodes=2,
        desired_nodes=2 + headroom_pods,
        delta=headroom_pods,
        headroom_nodes=headroom_pods,
        headroom_pods=headroom_pods,
    )


def desired(headroom: dict[str, int], shape: str = "overprovisioning") -> list[Manifest]:
    pools = [p for p in POOLS if p.name in headroom]
    recs = [recommendation(pool, headroom[pool.name]) for pool in pools]
    configmap = priority_expander_configmap(POOLS, recs, namespace="kube-system")
    buffers = capacity_buffers(recs, BufferSettings(namespace=BUFFERS))
    objects = buffers.objects(
        "capacity_buffer" if shape == "capacity_buffer" else "overprovisioning"
    )
    return [configmap.manifest, *objects]


SCOPES: list[PruneScope] = prune_scopes(BUFFERS)
CM = "/api/v1/namespaces/kube-system/configmaps"
PC = "/apis/scheduling.k8s.io/v1/priorityclasses"
DEP = f"/apis/apps/v1/namespaces/{BUFFERS}/deployments"
PT = f"/api/v1/namespaces/{BUFFERS}/podtemplates"
CB = f"/apis/autoscaling.x-k8s.io/v1beta1/namespaces/{BUFFERS}/capacitybuffers"
LISTS = [PT, CB, DEP, PC]


def test_first_apply_creates_each_object_at_its_exact_path(
    stub: tuple[KubeStub, str], writer: KubeWriter
) -> None:
    state, _ = stub
    objects = desired({"a100": 2, "l4": 1})

    changes = writer.sync(objects, prune=SCOPES, dry_run=False)

    assert [(c.action, c.target) for c in changes] == [
        ("create", "ConfigMap kube-system/cluster-autoscaler-priority-expander"),
        ("create", "PriorityClass foresight-placeholder"),
        ("create", f"Deployment {BUFFERS}/foresight-overprovisioning-a100"),
        ("create", f"Deployment {BUFFERS}/foresight-overprovisioning-l4"),
    ]
    assert [(r.method, r.path) for r in state.requests] == [
        ("GET", f"{CM}/cluster-autoscaler-priority-expander"),
        ("POST", CM),
        ("GET", f"{PC}/foresight-placeholder"),
        ("POST", PC),
        ("GET", f"{DEP}/foresight-overprovisioning-a100"),
        ("POST", DEP),
        ("GET", f"{DEP}/foresight-overprovisioning-l4"),
        ("POST", DEP),
        *(("GET", path) for path in LISTS),
    ]
    posts = [r for r in state.requests if r.method == "POST"]
    assert [r.body for r in posts] == objects
    assert all(r.query == {} for r in posts)
    assert all(r.query["labelSelector"] == [OWNED] for r in state.requests[-4:])
    stored = state.stored("configmaps")["cluster-autoscaler-priority-expander"]
    assert yaml.safe_load(stored["data"]["priorities"]) == {
        20: ["^eks-a100$"],
        10: ["^eks-l4$"],
        0: [".*"],
    }


def test_dry_run_sends_every_write_with_dry_run_all_and_persists_nothing(
    stub: tuple[KubeStub, str], writer: KubeWriter
) -> None:
    state, _ = stub
    writer.sync(desired({"a100": 2, "l4": 1}), prune=SCOPES, dry_run=False)
    state.requests.clear()
    before = copy.deepcopy(state.objects)

    changes = writer.sync(desired({"l4": 5}), prune=SCOPES, dry_run=True)

    assert [(c.action, c.target) for c in changes] == [
        ("replace", "ConfigMap kube-system/cluster-autoscaler-priority-expander"),
        ("unchanged", "PriorityClass foresight-placeholder"),
        ("replace", f"Deployment {BUFFERS}/foresight-overprovisioning-l4"),
        ("delete", f"Deployment {BUFFERS}/foresight-overprovisioning-a100"),
    ]
    assert changes[0].detail == (
        ".data.priorities:",
        "  @@ -1,5 +1,5 @@",
        "   20:",
        "  +  - ^eks-l4$",
        "  +10:",
        "     - ^eks-a100$",
        "  -10:",
        "  -  - ^eks-l4$",
        "   0:",
    )
    assert changes[2].detail == (".spec.replicas: 1 -> 5",)
    assert state.writes() == [
        ("PUT", f"{CM}/cluster-autoscaler-priority-expander", {"dryRun": ["All"]}),
        ("PUT", f"{DEP}/foresight-overprovisioning-l4", {"dryRun": ["All"]}),
        (
            "DELETE",
            f"{DEP}/foresight-overprovisioning-a100",
            {"dryRun": ["All"], "propagationPolicy": ["Background"]},
        ),
    ]
    assert state.objects == before


def test_reapplying_the_same_objects_changes_nothing(
    stub: tuple[KubeStub, str], writer: KubeWriter
) -> None:
    state, _ = stub
    writer.sync(desired({"a100": 2, "l4": 1}), prune=SCOPES, dry_run=False)
    state.requests.clear()

    changes = writer.sync(desired({"a100": 2, "l4": 1}), prune=SCOPES, dry_run=False)

    assert {c.action for c in changes} == {"unchanged"}
    assert state.writes() == []


def test_replace_carries_the_resource_version_and_prune_deletes_unwanted(
    stub: tuple[KubeStub, str], writer: KubeWriter
) -> None:
    state, _ = stub
    writer.sync(desired({"a100": 2, "l4": 1}), prune=SCOPES, dry_run=False)
    version = state.stored("deployments")["foresight-overprovisioning-a100"]["metadata"][
        "resourceVersion"
    ]
    state.requests.clear()

    writer.sync(desired({"a100": 3}), prune=SCOPES, dry_run=False)

    (put,) = [r for r in state.requests if r.method == "PUT" and "deployments" in r.path]
    assert put.body["metadata"]["resourceVersion"] == version
    assert put.body["spec"]["replicas"] == 3
    assert set(state.stored("deployments")) == {"foresight-overprovisioning-a100"}


def test_a_pool_to_keep_is_not_pruned(stub: tuple[KubeStub, str], writer: KubeWriter) -> None:
    state, _ = stub
    writer.sync(desired({"a100": 2, "l4": 1}), prune=SCOPES, dry_run=False)

    writer.sync(desired({"a100": 2}), prune=SCOPES, keep_pools={"l4"}, dry_run=False)

    assert set(state.stored("deployments")) == {
        "foresight-overprovisioning-a100",
        "foresight-overprovisioning-l4",
    }


def test_a_configmap_foresight_does_not_own_is_never_replaced(
    stub: tuple[KubeStub, str], writer: KubeWriter
) -> None:
    state, _ = stub
    hand_made: Manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "cluster-autoscaler-priority-expander",
            "namespace": "kube-system",
            "resourceVersion": "1",
        },
        "data": {"priorities": "10:\n  - .*gpu.*\n"},
    }
    state.objects[("v1", "configmaps", "kube-system", "cluster-autoscaler-priority-expander")] = (
        hand_made
    )

    changes = writer.sync(desired({"a100": 1}), prune=SCOPES, dry_run=False)

    assert changes[0].action == "skipped"
    assert "not managed by Foresight" in changes[0].reason
    # The ConfigMap is left alone; the buffers still go out.
    assert [w[0] for w in state.writes() if "configmaps" in w[1]] == []
    assert "foresight-overprovisioning-a100" in state.stored("deployments")


CM_KEY: Key = ("v1", "configmaps", "kube-system", "cluster-autoscaler-priority-expander")


def test_entries_an_operator_added_survive_the_next_publish(
    stub: tuple[KubeStub, str], writer: KubeWriter
) -> None:
    state, _ = stub
    writer.sync(desired({"a100": 2, "l4": 1}), prune=SCOPES, dry_run=False)
    # The operator edits the live object: a CPU group between the two pools.
    live = state.objects[CM_KEY]
    live["data"]["priorities"] = live["data"]["priorities"].replace(
        "10:\n", "15:\n  - ^cpu-general$\n10:\n"
    )
    state.requests.clear()

    changes = writer.sync(desired({"l4": 5, "a100": 1}), prune=SCOPES, dry_run=False)

    assert changes[0].action == "replace"
    (put,) = [r for r in state.requests if r.method == "PUT" and "configmaps" in r.path]
    assert yaml.safe_load(put.body["data"]["priorities"]) == {
        20: ["^eks-l4$"],
        15: ["^cpu-general$"],
        10: ["^eks-a100$"],
        0: [".*"],
    }
    assert put.body["metadata"]["resourceVersion"] == live["metadata"]["resourceVersion"]
    # Publishing the same set again keeps the operator's entry and writes nothing.
    state.requests.clear()
    again = writer.sync(desired({"l4": 5, "a100": 1}), prune=SCOPES, dry_run=False)
    assert again[0].action == "unchanged"
    assert state.writes() == []


def test_an_operator_entry_over_a_managed_node_group_skips_the_configmap_only(
    stub: tuple[KubeStub, str], writer: KubeWriter
) -> None:
    # Issue #36 item 2: this used to abort the whole run, buffers included.
    state, _ = stub
    writer.sync(desired({"a100": 2, "l4": 1}), prune=SCOPES, dry_run=False)
    live = state.objects[CM_KEY]
    live["data"]["priorities"] = "90:\n  - ^eks-l\n" + live["data"]["priorities"]
    before = copy.deepcopy(live)
    state.requests.clear()

    changes = writer.sync(desired({"a100": 3, "l4": 1}), prune=SCOPES, dry_run=False)

    assert changes[0].action == "skipped"
    assert re.search(r"'\^eks-l' at priority 90 .* 'eks-l4'", changes[0].reason)
    assert state.objects[CM_KEY] == before
    deployment = state.stored("deployments")["foresight-overprovisioning-a100"]
    assert deployment["spec"]["replicas"] == 3


def test_capacity_buffers_go_through_the_custom_objects_api(
    stub: tuple[KubeStub, str], writer: KubeWriter
) -> None:
    state, _ = stub
    writer.sync(desired({"a100": 2, "l4": 1}), prune=SCOPES, dry_run=False)
    state.requests.clear()

    changes = writer.sync(
        desired({"a100": 2, "l4": 1}, "capacity_buffer"), prune=SCOPES, dry_run=False
    )

    posts = [(r.path, r.body["kind"]) for r in state.requests if r.method == "POST"]
    assert posts == [(PT, "PodTemplate"), (CB, "CapacityBuffer")] * 2
    deleted = {c.target for c in changes if c.action == "delete"}
    assert deleted == {
        "PriorityClass foresight-placeholder",
        f"Deployment {BUFFERS}/foresight-overprovisioning-a100",
        f"Deployment {BUFFERS}/foresight-overprovisioning-l4",
    }
    assert state.stored("capacitybuffers")["foresight-buffer-a100"]["spec"]["replicas"] == 2


def test_a_missing_capacity_buffer_crd_is_a_clear_error_and_not_a_prune_failure(
    stub: tuple[KubeStub, str], writer: KubeWriter
) -> None:
    state, _ = stub
    state.serve_capacity_buffers = False

    writer.sync(desired({"a100": 1}), prune=SCOPES, dry_run=False)
    changes = writer.sync(desired({"a100": 1}, "capacity_buffer"), prune=SCOPES, dry_run=False)

    (failed,) = [c for c in changes if c.kind == "CapacityBuffer"]
    assert failed.action == "failed"
    assert "CapacityBuffer CRD" in failed.reason


def test_forbidden_writes_name_the_permission_needed(
    stub: tuple[KubeStub, str], writer: KubeWriter
) -> None:
    state, _ = stub
    state.forbid = True

    changes = writer.sync(desired({"a100": 1}), prune=SCOPES, dry_run=True)

    assert {c.action for c in changes} == {"failed"}
    assert all(re.search(r"403 .*grant Foresight's account", c.reason) for c in changes)


def test_publish_once_uses_the_kubeconfig_and_dry_runs_server_side(
    stub: tuple[KubeStub, str], tmp_path: Path
) -> None:
    state, url = stub
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", url)
    publish = {"kubeconfig": str(kubeconfig), "buffers_namespace": BUFFERS}
    pools = PoolsConfig(pools=POOLS)
    with open_store(f"sqlite:///{tmp_path / 'store.db'}") as store:
        ds = pd.date_range(end=NOW, periods=2, freq="5min", tz="UTC")
        store.samples.upsert(
            pd.concat(
                pd.DataFrame({"unique_id": f"{p.name}/{s}", "ds": ds, "y": y})
                for p in POOLS
                for s, y in (
                    ("allocated_gpus", 20.0),
                    ("queue_gpus", 4.0),
                    ("demand_gpus", 24.0),
                    ("nodes", 3.0),
                )
            )
        )

        def run(forecast_only: bool, apply: bool) -> Any:
            settings = load_app_settings(
                root=tmp_path, publish=publish, service={"forecast_only": forecast_only}
            )
            service = RecommendationService(
                Services(settings, pools, store, None, clock=lambda: NOW)
            )
            service.start()
            mode: Mode = "apply" if apply else "dry_run"
            return publish_once(settings, store, mode=mode, now=NOW, service=service)

        dry = run(forecast_only=True, apply=True)
        assert dry.mode == "dry_run"
        assert dry.cluster == url
        assert {c.action for c in dry.changes} == {"create"}
        assert all(q == {"dryRun": ["All"]} for m, _, q in state.writes())
        assert state.objects == {}

        applied = run(forecast_only=False, apply=True)
        assert applied.applied
        assert "cluster-autoscaler-priority-expander" in state.stored("configmaps")
        assert set(state.stored("deployments")) == {
            "foresight-overprovisioning-a100",
            "foresight-overprovisioning-l4",
        }
