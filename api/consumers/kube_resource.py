"""One kind of Kubernetes object through the official client, as plain dicts (docs/consumers.md)."""

from __future__ import annotations

import json
from typing import Any, Final

from kubernetes.client import (  # type: ignore[import-untyped]
    ApiClient,
    AppsV1Api,
    CoreV1Api,
    CustomObjectsApi,
    SchedulingV1Api,
)
from kubernetes.client.exceptions import ApiException  # type: ignore[import-untyped]

from api.consumers.capacity_buffers import CAPACITY_BUFFER_API
from api.consumers.k8s import MANAGED_BY, Manifest
from pipelines.errors import PublishError

CAPACITY_BUFFER_GROUP, _, CAPACITY_BUFFER_VERSION = CAPACITY_BUFFER_API.partition("/")
OWNED_SELECTOR: Final = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())


class KubeResource:
    """get / list / create / replace / delete of one kind, returning plain dicts.

    Reads ask for the raw response (``_preload_content=False``): the server's JSON is
    compared with the desired dict as is, without a round trip through the models.
    """

    _TYPED: Final[dict[str, tuple[Any, str]]] = {
        "ConfigMap": (CoreV1Api, "namespaced_config_map"),
        "PodTemplate": (CoreV1Api, "namespaced_pod_template"),
        "Deployment": (AppsV1Api, "namespaced_deployment"),
        "PriorityClass": (SchedulingV1Api, "priority_class"),
    }

    def __init__(self, client: ApiClient, kind: str) -> None:
        self.kind = kind
        self._custom = kind == "CapacityBuffer"
        if self._custom:
            self._api: Any = CustomObjectsApi(client)
            self._suffix = "namespaced_custom_object"
        elif kind in self._TYPED:
            api_class, self._suffix = self._TYPED[kind]
            self._api = api_class(client)
        else:
            raise PublishError(f"Foresight does not write {kind} objects")
        self.namespaced = kind != "PriorityClass"

    def _method(self, verb: str) -> Any:
        if self._custom and verb == "read":
            verb = "get"
        return getattr(self._api, f"{verb}_{self._suffix}")

    def _scope(self, namespace: str | None) -> tuple[str | None, ...]:
        """The positional arguments before the name: CRD coordinates and namespace."""
        if self._custom:
            return (CAPACITY_BUFFER_GROUP, CAPACITY_BUFFER_VERSION, namespace, "capacitybuffers")
        return (namespace,) if self.namespaced else ()

    def get(
        self, name: str, namespace: str | None, *, timeout_s: float | None = None
    ) -> Manifest | None:
        # Typed reads take the name first; custom objects take it last.
        args = (*self._scope(namespace), name) if self._custom else (name, *self._scope(namespace))
        try:
            return _json(
                self._method("read")(*args, _preload_content=False, _request_timeout=timeout_s)
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def list_owned(self, namespace: str | None) -> list[Manifest]:
        try:
            found = _json(
                self._method("list")(
                    *self._scope(namespace), label_selector=OWNED_SELECTOR, _preload_content=False
                )
            )
        except ApiException as exc:
            # A kind the cluster does not serve (the CapacityBuffer CRD not installed)
            # has nothing of ours to prune.
            if exc.status == 404:
                return []
            raise
        return [item for item in found.get("items") or [] if isinstance(item, dict)]

    def create(self, body: Manifest, namespace: str | None, dry_run: str | None) -> None:
        self._method("create")(
            *self._scope(namespace), body, dry_run=dry_run, _preload_content=False
        )

    def replace(
        self, name: str, body: Manifest, namespace: str | None, dry_run: str | None
    ) -> None:
        args = (
            (*self._scope(namespace), name, body)
            if self._custom
            else (name, *self._scope(namespace), body)
        )
        self._method("replace")(*args, dry_run=dry_run, _preload_content=False)

    def delete(self, name: str, namespace: str | None, dry_run: str | None) -> None:
        args = (*self._scope(namespace), name) if self._custom else (name, *self._scope(namespace))
        # Background: the placeholder pods of a pruned Deployment go with it.
        self._method("delete")(
            *args, dry_run=dry_run, propagation_policy="Background", _preload_content=False
        )


def _json(response: Any) -> Manifest:
    data = json.loads(response.data or b"{}")
    if not isinstance(data, dict):
        raise PublishError("the Kubernetes API answered with something that is not an object")
    return data
