"""Writing Foresight's objects to a cluster with the official Kubernetes client.

Details: docs/consumers.md, "Notes from the code", `api/consumers/kube_writer.py`."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Final, Literal

from kubernetes.client import ApiClient  # type: ignore[import-untyped]
from kubernetes.client.exceptions import ApiException  # type: ignore[import-untyped]
from urllib3.exceptions import HTTPError as Urllib3Error

from api.consumers.capacity_buffers import PLACEHOLDER_LABEL, validate_capacity_buffer
from api.consumers.k8s import MANAGED_BY, Manifest, check_typed
from api.consumers.kube_credentials import load_configuration
from api.consumers.kube_diff import differences
from api.consumers.kube_resource import OWNED_SELECTOR, KubeResource
from api.consumers.priority_expander import CONFIGMAP_KEY, CONFIGMAP_NAME, validate_value_text
from api.consumers.priority_merge import (
    NEWEST_VERSION,
    PriorityConflictError,
    is_priority_configmap,
    merge_priorities,
)
from api.settings import ClusterAutoscalerVersion, PublishSettings
from pipelines.errors import PublishError

ChangeAction = Literal["create", "replace", "unchanged", "delete", "planned", "skipped", "failed"]
"""What a write did (or, dry-run, would do); ``planned``: no cluster to compare with;
``skipped``: deliberately not written (the reason says why and what to do); ``failed``:
the write was tried and refused."""

_TYPED_MODELS: Final = {
    "ConfigMap": "V1ConfigMap",
    "PodTemplate": "V1PodTemplate",
    "Deployment": "V1Deployment",
    "PriorityClass": "V1PriorityClass",
}


class ClusterUnreachableError(PublishError):
    """The Kubernetes API server could not be reached (nothing was written)."""


class NotOwnedError(PublishError):
    """The object exists and is not Foresight's: it is left as it is."""


@dataclass(frozen=True)
class Change:
    """One object's change.

    Attributes:
        namespace: its namespace, None when cluster-scoped.
        detail: what differs (``path: old -> new`` lines), or a summary.
        reason: why it was skipped or failed (empty otherwise).
    """

    action: ChangeAction
    kind: str
    name: str
    namespace: str | None
    dry_run: bool
    detail: tuple[str, ...] = ()
    reason: str = ""

    @property
    def target(self) -> str:
        """``Kind namespace/name`` (or ``Kind name`` when cluster-scoped)."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"


@dataclass(frozen=True)
class PruneScope:
    """A kind (and namespace) in which Foresight deletes the objects it owns but no longer wants.

    Attributes:
        kind: one of the kinds :class:`KubeWriter` handles.
        namespace: the namespace, None for a cluster-scoped kind.
    """

    kind: str
    namespace: str | None = None


def validate_manifest(manifest: Manifest) -> None:
    """Check one object right before it is written; raise rather than write it invalid.

    Raises:
        PublishError: the object fails its check (for the priority-expander ConfigMap:
            ``priorities`` missing or not what cluster-autoscaler accepts).
    """
    kind = manifest.get("kind")
    if kind == "ConfigMap" and manifest.get("metadata", {}).get("name") == CONFIGMAP_NAME:
        value = manifest.get("data", {}).get(CONFIGMAP_KEY)
        if not isinstance(value, str):
            raise PublishError(f"ConfigMap {CONFIGMAP_NAME} has no {CONFIGMAP_KEY!r} text")
        validate_value_text(value)
    if kind == "CapacityBuffer":
        validate_capacity_buffer(manifest)
    elif isinstance(kind, str) and kind in _TYPED_MODELS:
        check_typed((manifest, _TYPED_MODELS[kind]))
    else:
        raise PublishError(f"Foresight does not write {kind!r} objects")
    labels = manifest.get("metadata", {}).get("labels") or {}
    if any(labels.get(key) != value for key, value in MANAGED_BY.items()):
        raise PublishError(f"{kind} objects Foresight writes must carry the label {OWNED_SELECTOR}")


def _failed(manifest: Manifest, reason: str, dry_run: bool) -> Change:
    metadata = manifest.get("metadata") or {}
    kind, name = str(manifest.get("kind")), str(metadata.get("name"))
    return Change("failed", kind, name, metadata.get("namespace"), dry_run, reason=reason)


def _owned(manifest: Manifest) -> bool:
    labels = manifest.get("metadata", {}).get("labels") or {}
    return all(labels.get(key) == value for key, value in MANAGED_BY.items())


class KubeWriter:
    """Create, replace and prune Foresight's objects through the Kubernetes API.

    Args:
        client: a configured ``kubernetes.client.ApiClient``.
        source: where its credentials came from, for messages.
    """

    def __init__(
        self,
        client: ApiClient,
        *,
        source: str = "the given API client",
        version: ClusterAutoscalerVersion = NEWEST_VERSION,
    ) -> None:
        self._client = client
        self.source = source
        self.version = version
        self._resources: dict[str, KubeResource] = {}

    @classmethod
    def from_settings(cls, publish: PublishSettings) -> KubeWriter:
        """Connect with ``publish.kubeconfig`` / ``kube_context``, else in-cluster, else
        ``~/.kube/config``.

        Raises:
            ConfigError: no credentials were found or they cannot be loaded; the
                message names what is missing and the setting to change.
        """
        configuration, source = load_configuration(publish)
        return cls(
            ApiClient(configuration), source=source, version=publish.cluster_autoscaler_version
        )

    @property
    def host(self) -> str:
        """The API server's URL."""
        return str(self._client.configuration.host)

    def close(self) -> None:
        """Release the client's connections."""
        self._client.close()

    def read(
        self, kind: str, name: str, namespace: str | None, *, timeout_s: float = 5.0
    ) -> Manifest | None:
        """Return the live object, None when there is none.

        Raises:
            ClusterUnreachableError: the API server could not be reached.
            PublishError: the API server refused the read (e.g. 403).
        """
        with self._errors(f"read {kind} {name}"):
            return self._resource(kind).get(name, namespace, timeout_s=timeout_s)

    def _resource(self, kind: str) -> KubeResource:
        if kind not in self._resources:
            self._resources[kind] = KubeResource(self._client, kind)
        return self._resources[kind]

    def sync(
        self,
        desired: Sequence[Manifest],
        *,
        prune: Sequence[PruneScope] = (),
        keep_pools: Collection[str] = (),
        dry_run: bool,
    ) -> list[Change]:
        """Write every desired object, then prune what Foresight owns and no longer wants.

        Args:
            desired: the objects, in the order to write them.
            prune: the kinds and namespaces to prune in.
            keep_pools: pools whose objects must not be pruned (configured, but without
                a recommendation right now: their last buffer stays).
            dry_run: send every write with ``dryRun=All``.

        Returns:
            One change per object written, left alone, skipped, failed or pruned.

        Raises:
            ClusterUnreachableError: the API server could not be reached.
        """
        # Every object is checked before the first request: an invalid one is reported
        # failed without being sent, the valid ones are still written.
        invalid: dict[int, str] = {}
        for index, manifest in enumerate(desired):
            try:
                validate_manifest(manifest)
            except PublishError as exc:
                invalid[index] = str(exc)
        changes = [
            _failed(manifest, invalid[index], dry_run)
            if index in invalid
            else self._apply_one(manifest, dry_run=dry_run)
            for index, manifest in enumerate(desired)
        ]
        wanted = {
            (m["kind"], m["metadata"].get("namespace"), m["metadata"]["name"]) for m in desired
        }
        for scope in prune:
            try:
                changes += self._prune(scope, wanted, set(keep_pools), dry_run=dry_run)
            except ClusterUnreachableError:
                raise
            except PublishError as exc:
                where = scope.namespace or "(cluster)"
                changes.append(Change("failed", scope.kind, "*", where, dry_run, reason=str(exc)))
        return changes

    def _apply_one(self, manifest: Manifest, *, dry_run: bool) -> Change:
        """:meth:`apply`, with a refusal or failure reported as the object's change."""
        try:
            return self.apply(manifest, dry_run=dry_run)
        except ClusterUnreachableError:
            raise
        except (NotOwnedError, PriorityConflictError) as exc:
            return replace(_failed(manifest, str(exc), dry_run), action="skipped")
        except PublishError as exc:
            return _failed(manifest, str(exc), dry_run)

    def apply(self, manifest: Manifest, *, dry_run: bool) -> Change:
        """Create ``manifest`` or replace the existing object of its name.

        Raises:
            NotOwnedError: the object exists without Foresight's label.
            PriorityConflictError: the live priority ConfigMap holds an entry that
                cannot be kept.
            ClusterUnreachableError: the API server could not be reached.
            PublishError: the object is invalid or the API server refused the write.
        """
        validate_manifest(manifest)
        kind, metadata = manifest["kind"], manifest["metadata"]
        name, namespace = metadata["name"], metadata.get("namespace")
        resource = self._resource(kind)
        flag = "All" if dry_run else None
        with self._errors(f"write {kind} {name}"):
            existing = resource.get(name, namespace)
            if existing is None:
                resource.create(manifest, namespace, flag)
                return Change("create", kind, name, namespace, dry_run, summarize(manifest))
            if not _owned(existing):
                raise NotOwnedError(
                    f"{kind} {namespace or ''}/{name} exists and is not managed by Foresight; "
                    f"label it {OWNED_SELECTOR} to hand it over, or delete it"
                )
            if is_priority_configmap(manifest):
                # Keep the operator's entries; refuse those that fight Foresight's.
                manifest = merge_priorities(existing, manifest, version=self.version)
            diff = differences(existing, manifest)
            if not diff:
                return Change("unchanged", kind, name, namespace, dry_run)
            body = json.loads(json.dumps(manifest))
            version = existing.get("metadata", {}).get("resourceVersion")
            if version:
                # Optimistic concurrency: fail rather than overwrite a concurrent change.
                body["metadata"]["resourceVersion"] = version
            resource.replace(name, body, namespace, flag)
            return Change("replace", kind, name, namespace, dry_run, tuple(diff))

    def _prune(
        self,
        scope: PruneScope,
        wanted: set[tuple[str, str | None, str]],
        keep: set[str],
        *,
        dry_run: bool,
    ) -> list[Change]:
        resource = self._resource(scope.kind)
        flag = "All" if dry_run else None
        changes = []
        with self._errors(f"prune {scope.kind} objects"):
            for item in resource.list_owned(scope.namespace):
                metadata = item.get("metadata", {})
                name, namespace = metadata.get("name", ""), metadata.get("namespace")
                pool = (metadata.get("labels") or {}).get(PLACEHOLDER_LABEL)
                if (scope.kind, namespace, name) in wanted or pool in keep or not _owned(item):
                    continue
                resource.delete(name, namespace, flag)
                changes.append(Change("delete", scope.kind, name, namespace, dry_run))
        return changes

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        """Translate the client's errors into :class:`PublishError` naming the action and fix."""
        try:
            yield
        except ApiException as exc:
            raise PublishError(
                f"cannot {action}: the Kubernetes API at {self.host} answered "
                f"{exc.status} {exc.reason}{_hint(exc.status)}: {_message(exc)}"
            ) from exc
        except (Urllib3Error, OSError) as exc:
            raise ClusterUnreachableError(
                f"cannot {action}: the Kubernetes API at {self.host} is unreachable "
                f"({exc}); check publish.kubeconfig / kube_context"
            ) from exc


def _hint(status: int | None) -> str:
    return {
        401: " (the credentials were rejected: refresh the kubeconfig or token)",
        403: " (grant Foresight's account get/list/create/update/delete on these objects)",
        404: " (missing namespace or kind: create the namespace, or install the "
        "CapacityBuffer CRD of cluster-autoscaler >= 1.35, or set publish.buffer_shape)",
        409: " (changed concurrently: publish again)",
    }.get(status or 0, "")


def _message(exc: ApiException) -> str:
    try:
        return str(json.loads(exc.body or "{}").get("message", exc.body))
    except (TypeError, ValueError):
        return str(exc.body)


def summarize(manifest: Manifest) -> tuple[str, ...]:
    """Return what a new object holds, briefly: the priorities, or the replica count."""
    spec = manifest.get("spec")
    if manifest.get("kind") == "ConfigMap":
        return tuple(str(manifest.get("data", {}).get(CONFIGMAP_KEY, "")).splitlines())
    if isinstance(spec, dict) and "replicas" in spec:
        return (f"replicas: {spec['replicas']}",)
    return ()
