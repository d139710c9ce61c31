"""The gRPC expander over real TLS, called as cluster-autoscaler calls it.

A throwaway CA signs the server's certificate; the client trusts only that CA (what
``--grpc-expander-cert`` points at) and dials ``localhost``. Requests are sent with the
committed stub and by a client generated from upstream's own ``expander.proto``
(``tests/integration/protos``, release 1.36.1, node and pod bytes included), in a
process of its own, plus 1.33's messages (only the deprecated fields 2 and 4), so the
field numbers and the method path are checked on the wire, not only in our code. The
app reads the hand-made tiers from a priority ConfigMap served by the stub API server
(:mod:`tests.integration.kube_stub`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]
import pandas as pd
import pytest
from fastapi.testclient import TestClient

from api.consumers.priority_expander import RankedPool
from api.grpc_expander.choice import ExpanderView
from api.grpc_expander.protos import expander_pb2, expander_pb2_grpc
from api.grpc_expander.server import METHOD, ExpanderTLS, RunningExpander, start_expander
from api.main import create_app
from api.services import Services
from api.settings import load_app_settings
from forecaster.exceptions import ConfigError
from pipelines.config.pools import PoolsConfig
from pipelines.store.store import open_store
from tests.api.app.conftest import FakeClock, history, make_champion
from tests.integration.grpc_upstream import call_upstream, generate_upstream
from tests.integration.kube_stub import KubeStub, running_stub, write_kubeconfig
from tests.integration.tls_certs import TlsFiles, make_tls

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls(tmp_path_factory.mktemp("tls"))


def channel(tls: TlsFiles, port: int, ca_pem: bytes | None = None) -> Any:
    credentials = grpc.ssl_channel_credentials(root_certificates=ca_pem or tls.ca_pem)
    return grpc.secure_channel(f"localhost:{port}", credentials)


def options(*ids: str, count: int = 1) -> expander_pb2.BestOptionsRequest:
    return expander_pb2.BestOptionsRequest(
        options=[expander_pb2.Option(nodeGroupId=i, nodeCount=count) for i in ids]
    )


def answered(response: expander_pb2.BestOptionsResponse) -> list[tuple[str, int]]:
    return [(o.nodeGroupId, o.nodeCount) for o in response.options]


# -- the app starts it and answers with /recommendation's ranking -------------------

POOLS = PoolsConfig.model_validate(
    {
        "pools": [
            {"name": "alpha", "node_group_id": "ng-alpha", "gpus_per_node": 8, "max_nodes": 40},
            {"name": "beta", "node_group_id": "ng-beta", "gpus_per_node": 4, "max_nodes": 40},
            {
                "name": "gamma",
                "node_group_id": "Auto Scaling group with spaces",
                "gpus_per_node": 4,
                "max_nodes": 40,
            },
        ]
    }
)


HAND_MADE = "50:\n  - ^cpu-critical$\n20:\n  - ^ng-alpha$\n0:\n  - .*\n"
"""The live priority ConfigMap: an operator's tier above Foresight's whole range."""


@pytest.fixture
def kube() -> Iterator[tuple[KubeStub, str]]:
    with running_stub() as served:
        state, _ = served
        state.objects[
            ("v1", "configmaps", "kube-system", "cluster-autoscaler-priority-expander")
        ] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "cluster-autoscaler-priority-expander",
                "namespace": "kube-system",
                "labels": {"app.kubernetes.io/managed-by": "foresight"},
            },
            "data": {"priorities": HAND_MADE},
        }
        yield served


@pytest.fixture(params=["rank"])
def reactive(request: pytest.FixtureRequest) -> str:
    """``publish.grpc_expander_reactive``: the app's pools have no stored forecasts, so
    they decide reactively; ``rank`` lets the expander rank them anyway."""
    value: str = request.param
    return value


@pytest.fixture
def app_client(
    tmp_path: Path, tls: TlsFiles, kube: tuple[KubeStub, str], reactive: str
) -> Iterator[tuple[TestClient, RunningExpander]]:
    settings = load_app_settings(
        root=tmp_path,
        levels=[0.5, 0.8, 0.9],
        horizon=12,
        max_train_days=3,
        max_gap_steps=6,
        publish={
            "grpc_expander_address": "127.0.0.1:0",
            "grpc_expander_cert": str(tls.cert_file),
            "grpc_expander_key": str(tls.key_file),
            "kubeconfig": str(write_kubeconfig(tmp_path / "kubeconfig", kube[1])),
            "grpc_expander_reactive": reactive,
        },
    )
    with open_store(f"sqlite:///{tmp_path / 'store.db'}") as store:
        store.samples.upsert(
            pd.concat(
                [
                    history("alpha"),
                    history("beta", seed=1),
                    history("gamma", seed=2).assign(
                        y=lambda f: f["y"] * 3  # the busiest: the largest shortfall
                    ),
                ]
            )
        )
        services = Services(settings, POOLS, store, make_champion(), clock=FakeClock())
        app = create_app(services=services, refresh_seconds=None, analysis_seconds=None)
        with TestClient(app) as client:
            running = app.state.grpc_expander
            assert isinstance(running, RunningExpander)
            yield client, running


def expected_best(pools: list[dict[str, Any]]) -> list[str]:
    """The ConfigMap's rule, recomputed from /recommendation's JSON and the pools file."""
    by_name = {pool.name: pool for pool in POOLS.pools}

    def key(body: dict[str, Any]) -> tuple[int, float]:
        pool = by_name[body["pool"]]
        shortfall = (body["desired_nodes"] - body["current_nodes"]) * pool.gpus_per_node
        return (-shortfall, pool.cost_per_node_hour / pool.gpus_per_node)

    best = min(key(body) for body in pools)
    return [by_name[body["pool"]].node_group_id for body in pools if key(body) == best]


def test_the_app_serves_the_best_pool_of_recommendation_over_tls(
    app_client: tuple[TestClient, RunningExpander], tls: TlsFiles
) -> None:
    client, running = app_client
    pools = client.get("/recommendation").json()["pools"]
    assert len(pools) == 3
    assert {body["mode"] for body in pools} == {"reactive"}  # ranked: reactive="rank"
    best = expected_best(pools)
    offered = ("ng-other", "ng-beta", "Auto Scaling group with spaces", "ng-alpha")

    with channel(tls, running.port) as chan:
        response = expander_pb2_grpc.ExpanderStub(chan).BestOptions(
            options(*offered, count=3), timeout=5
        )

    assert answered(response) == [(i, 3) for i in offered if i in best]


def test_unknown_node_groups_get_every_option_back(
    app_client: tuple[TestClient, RunningExpander], tls: TlsFiles
) -> None:
    _, running = app_client
    with channel(tls, running.port) as chan:
        stub = expander_pb2_grpc.ExpanderStub(chan)
        response = stub.BestOptions(
            expander_pb2.BestOptionsRequest(
                options=[
                    expander_pb2.Option(nodeGroupId="ng-unknown-1", nodeCount=2),
                    expander_pb2.Option(nodeGroupId="ng-unknown-2", nodeCount=5),
                ]
            ),
            timeout=5,
        )
        alone = stub.BestOptions(options("ng-unknown-1", "ng-beta"), timeout=5)

    # No opinion: all of them (an empty answer would stop the scale-up).
    assert answered(response) == [("ng-unknown-1", 2), ("ng-unknown-2", 5)]
    # A Foresight pool outranks a group it does not manage, as the catch-all does.
    assert answered(alone) == [("ng-beta", 1)]


# -- the protocol on the wire ---------------------------------------------------------


@pytest.fixture(scope="module")
def upstream_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Modules protoc generates from upstream's expander.proto (1.36.1)."""
    return generate_upstream(tmp_path_factory.mktemp("upstream"))


def test_upstreams_client_gets_the_hand_made_tier_above_foresights_pools(
    app_client: tuple[TestClient, RunningExpander], tls: TlsFiles, upstream_client: Path
) -> None:
    # Issue #36 item 1: offered [a Foresight pool, cpu-critical] it answered the pool
    # while the ConfigMap ranks cpu-critical at 50.
    _, running = app_client
    request = {
        "options": [
            {"nodeGroupId": "ng-alpha", "nodeCount": 2, "debug": "a", "pods": ["p"]},
            {"nodeGroupId": "cpu-critical", "nodeCount": 1, "debug": "c", "pods": ["p"]},
        ],
        "nodes": {"node-1": "n"},
    }

    answer = call_upstream(running.port, tls, request, generated=upstream_client)

    assert answer == {"options": [["cpu-critical", 1]]}


@pytest.mark.parametrize("reactive", ["no_opinion"])
def test_by_default_reactive_pools_get_no_opinion_every_option_back(
    app_client: tuple[TestClient, RunningExpander], tls: TlsFiles, reactive: str
) -> None:
    # Issue #36 item 3: without a forecast it ranked pools by cost per GPU.
    _, running = app_client
    offered = ("ng-beta", "Auto Scaling group with spaces", "ng-alpha")

    with channel(tls, running.port) as chan:
        response = expander_pb2_grpc.ExpanderStub(chan).BestOptions(options(*offered), timeout=5)

    assert answered(response) == [(i, 1) for i in offered]


def test_a_133_request_with_only_the_deprecated_fields_is_answered(
    app_client: tuple[TestClient, RunningExpander], tls: TlsFiles
) -> None:
    client, running = app_client
    best = expected_best(client.get("/recommendation").json()["pools"])
    offered = ["ng-beta", "Auto Scaling group with spaces"]
    request = {
        "options": [{"nodeGroupId": i, "nodeCount": 3, "pods": ["p"]} for i in offered],
        "nodes": {"node-1": "n"},
    }

    answer = call_upstream(running.port, tls, request, generated=None, release="1.33")

    wanted = [i for i in offered if i in best] or offered
    assert answer == {"options": [[i, 3] for i in wanted]}


@dataclass
class Ranking:
    """A ranking source that can be held back to simulate a slow recomputation."""

    ranking: tuple[RankedPool, ...]
    release: threading.Event
    calls: int = 0

    def __call__(self) -> ExpanderView:
        self.calls += 1
        self.release.wait(30)
        return ExpanderView.of(self.ranking, {})


def ranked(pool: str, node_group: str, priority: int) -> RankedPool:
    return RankedPool(pool, node_group, f"^{node_group}$", 8, 1.0, priority, "predictive")


@pytest.fixture
def ready_ranking() -> Ranking:
    event = threading.Event()
    event.set()
    return Ranking((ranked("a", "ng-a", 20), ranked("b", "ng-b", 10)), event)


@pytest.fixture
def server(tls: TlsFiles, ready_ranking: Ranking) -> Iterator[RunningExpander]:
    running = start_expander(
        "127.0.0.1:0", ExpanderTLS(tls.cert_pem, tls.key_pem), ready_ranking, budget_s=0.2
    )
    yield running
    running.stop()


def test_a_request_as_cluster_autoscaler_sends_it_is_read_and_answered(
    server: RunningExpander, tls: TlsFiles, upstream_client: Path
) -> None:
    request = {
        "options": [
            {"nodeGroupId": "ng-b", "nodeCount": 2, "debug": "b", "pods": ["\x0a\x03pod"]},
            {"nodeGroupId": "ng-a", "nodeCount": 4, "debug": "a", "pods": ["\x0a\x03pod"]},
        ],
        "nodes": {"node-1": "\x0a\x06node-1"},
    }

    answer = call_upstream(server.port, tls, request, generated=upstream_client)

    assert answer == {"options": [["ng-a", 4]]}


def test_a_malformed_request_is_an_error_and_the_server_keeps_answering(
    server: RunningExpander, tls: TlsFiles
) -> None:
    with channel(tls, server.port) as chan:
        raw = chan.unary_unary(METHOD, request_serializer=None, response_deserializer=None)
        with pytest.raises(grpc.RpcError) as garbage:
            # Field 1 as a length-delimited value 127 bytes long, with 2 bytes present.
            raw(b"\x0a\x7f\x01\x02", timeout=5)
        stub = expander_pb2_grpc.ExpanderStub(chan)
        with pytest.raises(grpc.RpcError) as no_id:
            stub.BestOptions(options("ng-a", ""), timeout=5)
        after = stub.BestOptions(options("ng-b", "ng-a"), timeout=5)

    # cluster-autoscaler keeps every option on an error: the safe side.
    assert garbage.value.code() == grpc.StatusCode.INTERNAL
    assert no_id.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "options[1] has no nodeGroupId" in no_id.value.details()
    assert answered(after) == [("ng-a", 1)]


def test_tls_is_required_and_the_certificate_checked(
    server: RunningExpander, tls: TlsFiles, tmp_path: Path
) -> None:
    other = make_tls(tmp_path)
    with (
        grpc.insecure_channel(f"localhost:{server.port}") as plain,
        pytest.raises(grpc.RpcError) as insecure,
    ):
        expander_pb2_grpc.ExpanderStub(plain).BestOptions(options("ng-a"), timeout=2)
    with (
        channel(tls, server.port, ca_pem=other.ca_pem) as untrusted,
        pytest.raises(grpc.RpcError) as wrong_ca,
    ):
        expander_pb2_grpc.ExpanderStub(untrusted).BestOptions(options("ng-a"), timeout=2)

    assert insecure.value.code() == grpc.StatusCode.UNAVAILABLE
    assert wrong_ca.value.code() == grpc.StatusCode.UNAVAILABLE


def test_a_slow_ranking_is_answered_within_the_budget_then_used_when_ready(
    tls: TlsFiles,
) -> None:
    slow = Ranking((ranked("a", "ng-a", 20), ranked("b", "ng-b", 10)), threading.Event())
    running = start_expander(
        "127.0.0.1:0", ExpanderTLS(tls.cert_pem, tls.key_pem), slow, budget_s=0.2
    )
    try:
        with channel(tls, running.port) as chan:
            stub = expander_pb2_grpc.ExpanderStub(chan)
            stub.BestOptions(options("warm-up"), timeout=5)  # the TLS handshake
            started = time.perf_counter()
            first = stub.BestOptions(options("ng-b", "ng-a"), timeout=5)
            first_s = time.perf_counter() - started
            # The caller's own deadline, shorter than the budget, is respected too.
            started = time.perf_counter()
            tight = stub.BestOptions(options("ng-b", "ng-a"), timeout=0.15)
            tight_s = time.perf_counter() - started
            held_calls = slow.calls
            slow.release.set()
            deadline = time.monotonic() + 5
            ready = first
            while answered(ready) != [("ng-a", 1)] and time.monotonic() < deadline:
                ready = stub.BestOptions(options("ng-b", "ng-a"), timeout=5)
    finally:
        running.stop()

    # No ranking in time and none before: no opinion, every option, within the budget.
    assert answered(first) == [("ng-b", 1), ("ng-a", 1)]
    assert 0.2 <= first_s < 1.0
    assert answered(tight) == [("ng-b", 1), ("ng-a", 1)]
    assert tight_s < 0.15
    # One computation in flight at a time, however many calls waited on it.
    assert held_calls == 1
    assert answered(ready) == [("ng-a", 1)]


def test_the_address_without_a_certificate_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="only dials TLS"):
        ExpanderTLS.from_files(None, tmp_path / "tls.key")
    with pytest.raises(ConfigError, match="cannot read"):
        ExpanderTLS.from_files(tmp_path / "absent.crt", tmp_path / "absent.key")
