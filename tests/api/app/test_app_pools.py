"""GET /pools says when a node group id is not in the cloud provider's form."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI
from fastapi.testclient import TestClient

from pipelines.config.pools import PoolsConfig
from tests.api.app.conftest import MakeServices

GCE = (
    "https://www.googleapis.com/compute/v1/projects/acme/zones/us-central1-a/"
    "instanceGroups/gke-ml-beta-grp"
)


def test_pools_show_the_node_group_warning_of_each_pool(
    make_services: MakeServices, make_app: Callable[..., FastAPI], pools: PoolsConfig
) -> None:
    # alpha keeps the bare GKE-style name, beta gets the URL the GCE provider reports.
    configured = PoolsConfig.model_validate(
        {
            "cloud_provider": "gce",
            "pools": [
                {**pools.pools[0].model_dump(mode="json"), "node_group_id": "gke-ml-alpha-grp"},
                {**pools.pools[1].model_dump(mode="json"), "node_group_id": GCE},
            ],
        }
    )
    with TestClient(make_app(make_services(pools=configured))) as client:
        body = client.get("/pools").json()

    assert body["cloud_provider"] == "gce"
    warnings = {pool["name"]: pool["node_group_warning"] for pool in body["pools"]}
    assert warnings["beta"] is None
    assert "instance group URL" in warnings["alpha"]


def test_pools_show_each_pools_safety_margin(
    make_services: MakeServices, make_app: Callable[..., FastAPI], pools: PoolsConfig
) -> None:
    configured = PoolsConfig.model_validate(
        {
            "pools": [
                pools.pools[0].model_dump(mode="json"),
                {**pools.pools[1].model_dump(mode="json"), "safety_margin": 2.5},
            ],
        }
    )
    with TestClient(make_app(make_services(pools=configured))) as client:
        body = client.get("/pools").json()

    margins = {pool["name"]: pool["safety_margin"] for pool in body["pools"]}
    assert margins == {"alpha": 0.0, "beta": 2.5}
