"""The cluster side of a publication: which cluster, and writing to it or planning offline.

Details: docs/consumers.md, "Notes from the code", `api/publish_cluster.py`."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from api.consumers.k8s import Manifest
from api.consumers.kube_writer import (
    Change,
    ClusterUnreachableError,
    KubeWriter,
    PruneScope,
    summarize,
    validate_manifest,
)
from api.consumers.priority_live import READ_TIMEOUT_S
from api.settings import AppSettings
from forecaster.exceptions import ConfigError
from pipelines.jobs.publish import PublishMode

logger = logging.getLogger(__name__)


Mode = PublishMode
"""``apply``: objects written; ``dry_run``: nothing persisted in the cluster (one
definition, the publish job's)."""


class ClusterWriter(Protocol):
    """What publishing needs from a cluster (:class:`KubeWriter`, or a fake in tests)."""

    @property
    def host(self) -> str:
        """The API server, for messages."""
        ...

    def read(
        self, kind: str, name: str, namespace: str | None, *, timeout_s: float = READ_TIMEOUT_S
    ) -> Manifest | None:
        """Return the live object, None when there is none (PublishError: unreadable)."""
        ...

    def sync(
        self,
        desired: list[Manifest],
        *,
        prune: list[PruneScope],
        keep_pools: set[str],
        dry_run: bool,
    ) -> list[Change]:
        """Write ``desired`` (``dryRun=All`` when ``dry_run``), then prune."""
        ...


def prune_scopes(buffers_namespace: str) -> list[PruneScope]:
    """Return where Foresight's buffer objects live, whatever the shape now written.

    Switching the shape therefore removes the other shape's objects.
    """
    return [
        PruneScope("PodTemplate", buffers_namespace),
        PruneScope("CapacityBuffer", buffers_namespace),
        PruneScope("Deployment", buffers_namespace),
        PruneScope("PriorityClass", None),
    ]


@contextmanager
def cluster_for(
    settings: AppSettings, kube: ClusterWriter | None, *, mode: Mode
) -> Iterator[tuple[ClusterWriter | None, str]]:
    """Yield the cluster to use (None offline) and why there is none.

    Raises:
        ConfigError: writing without usable credentials.
    """
    if kube is not None:
        yield kube, ""
        return
    try:
        owned = KubeWriter.from_settings(settings.publish)
    except ConfigError as exc:
        if mode == "apply":
            raise
        yield None, f"no cluster: {exc}"
        return
    try:
        yield owned, ""
    finally:
        owned.close()


def sync_objects(
    settings: AppSettings,
    kube: ClusterWriter | None,
    offline: str,
    desired: list[Manifest],
    keep_pools: set[str],
    *,
    mode: Mode,
) -> tuple[list[Change], str]:
    """Write (or dry-run) ``desired``; offline ``planned`` changes when no cluster answers."""
    if kube is None:
        return planned_changes(desired), f"offline ({offline})"
    scopes = prune_scopes(settings.publish.buffers_namespace)
    try:
        dry_run = mode == "dry_run"
        changes = kube.sync(desired, prune=scopes, keep_pools=keep_pools, dry_run=dry_run)
    except ClusterUnreachableError as exc:
        if mode == "apply":
            raise
        logger.warning("dry run offline: %s", exc)
        return planned_changes(desired), f"offline ({exc})"
    return changes, kube.host


def planned_changes(desired: list[Manifest]) -> list[Change]:
    for manifest in desired:
        validate_manifest(manifest)
    return [
        Change(
            "planned",
            m["kind"],
            m["metadata"]["name"],
            m["metadata"].get("namespace"),
            dry_run=True,
            detail=summarize(m),
        )
        for m in desired
    ]
