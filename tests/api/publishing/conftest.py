"""Fixtures of the publishing tests: a SQLite store with live readings, two pools, fakes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from api.consumers.k8s import Manifest
from api.consumers.kube_writer import Change, PruneScope
from api.service import RecommendationService
from api.services import Services
from api.settings import AppSettings, load_app_settings
from pipelines.config.pools import PoolsConfig
from pipelines.errors import PublishError
from pipelines.store.store import Store, open_store

NOW = datetime(2025, 3, 30, 12, 0, tzinfo=UTC)
STEP = timedelta(minutes=5)
SECRET = "s3cret-for-tests"
HOOK = "http://receiver.test/hook"


def readings(
    pool: str, *, allocated: float, queued: float, nodes: float, at: datetime = NOW
) -> pd.DataFrame:
    """Three steps of constant live readings of one pool, the last at ``at``."""
    ds = pd.date_range(end=at, periods=3, freq=STEP, tz="UTC")
    values = {
        "allocated_gpus": allocated,
        "queue_gpus": queued,
        "demand_gpus": allocated + queued,
        "nodes": nodes,
        "gpu_util": 70.0,
    }
    return pd.concat(
        [pd.DataFrame({"unique_id": f"{pool}/{s}", "ds": ds, "y": v}) for s, v in values.items()],
        ignore_index=True,
    )


@pytest.fixture
def pools() -> PoolsConfig:
    return PoolsConfig.model_validate(
        {
            "pools": [
                {"name": "alpha", "node_group_id": "ng-alpha", "gpus_per_node": 8, "max_nodes": 40},
                {"name": "beta", "node_group_id": "ng-beta", "gpus_per_node": 4, "max_nodes": 10},
            ]
        }
    )


@pytest.fixture
def make_settings(tmp_path: Path) -> Callable[..., AppSettings]:
    def build(**overrides: object) -> AppSettings:
        fields: dict[str, object] = {
            "root": tmp_path,
            "webhook_secret": SECRET,
            "publish": {"webhook_urls": [HOOK], "buffers_namespace": "gpu-buffers"},
            "service": {"forecast_only": False},
        }
        fields.update(overrides)
        return load_app_settings(**fields)

    return build


@pytest.fixture
def settings(make_settings: Callable[..., AppSettings]) -> AppSettings:
    return make_settings()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(f"sqlite:///{tmp_path / 'store.db'}") as opened:
        opened.samples.upsert(
            pd.concat(
                [
                    readings("alpha", allocated=40, queued=24, nodes=6),
                    readings("beta", allocated=8, queued=0, nodes=2),
                ]
            )
        )
        yield opened


MakeService = Callable[..., RecommendationService]


@pytest.fixture
def make_service(settings: AppSettings, pools: PoolsConfig, store: Store) -> MakeService:
    """A fresh reactive service (no model) deciding at a fixed time, as publish builds one."""

    def build(at: datetime = NOW, **changes: object) -> RecommendationService:
        fields: dict[str, object] = {
            "settings": settings,
            "pools": pools,
            "store": store,
            "model": None,
            "clock": lambda: at,
        }
        fields.update(changes)
        service = RecommendationService(Services(**fields))  # type: ignore[arg-type]
        service.start()
        return service

    return build


@dataclass
class FakeCluster:
    """A :class:`~api.publish_cluster.ClusterWriter` that records what it was asked to write.

    ``live`` holds the objects it answers reads with, by ``(kind, name)``;
    ``unreadable`` makes every read fail; ``results`` overrides the change of a kind.
    """

    host: str = "https://fake-cluster.test"
    calls: list[dict[str, object]] = field(default_factory=list)
    live: dict[tuple[str, str], Manifest] = field(default_factory=dict)
    unreadable: str = ""
    results: dict[str, Change] = field(default_factory=dict)

    def read(
        self, kind: str, name: str, namespace: str | None, *, timeout_s: float = 5.0
    ) -> Manifest | None:
        if self.unreadable:
            raise PublishError(self.unreadable)
        return self.live.get((kind, name))

    def sync(
        self,
        desired: list[Manifest],
        *,
        prune: list[PruneScope],
        keep_pools: set[str],
        dry_run: bool,
    ) -> list[Change]:
        self.calls.append(
            {"desired": desired, "prune": prune, "keep_pools": keep_pools, "dry_run": dry_run}
        )
        return [
            self.results.get(
                m["kind"],
                Change(
                    "create",
                    m["kind"],
                    m["metadata"]["name"],
                    m["metadata"].get("namespace"),
                    dry_run,
                ),
            )
            for m in desired
        ]


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster()


@pytest.fixture
def make_readings() -> Callable[..., pd.DataFrame]:
    """The factory :func:`readings`."""
    return readings
