"""Every YAML example in docs/ parses, and the ones that are manifests validate.

A fenced block marked ``yaml`` in ``docs/*.md`` or ``README.md`` is parsed as a YAML
stream; each document with ``apiVersion`` and ``kind`` goes through the validator of
:mod:`tests.deploy.test_deploy_manifests` (Kubernetes schemas, CRD schemas, the
priority-expander value as cluster-autoscaler reads it), and a pools file through the
pools model. The KEDA wiring, in the docs and in ``deploy/examples``, is checked
against the rendered Service and namespaces: a ScaledObject scales only in its own
namespace, and its URL must reach a port the Service exposes.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from api.consumers.priority_expander import CONFIGMAP_KEY, CONFIGMAP_NAME, validate_value_text
from pipelines.config.pools import PoolsConfig
from tests.deploy.kustomize_lite import load_documents
from tests.deploy.test_deploy_manifests import DEPLOY, env_of, rendered, validate

ROOT = DEPLOY.parent
SOURCES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
_FENCE = re.compile(r"^```yaml[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def yaml_blocks() -> list[tuple[str, str]]:
    """Return ``(file:line, text)`` of every fenced YAML block."""
    found = []
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{path.relative_to(ROOT)}:{line}", match.group(1)))
    return found


BLOCKS = yaml_blocks()


def documents(text: str) -> list[Any]:
    return [doc for doc in yaml.safe_load_all(text) if doc is not None]


def test_the_docs_have_yaml_examples_to_check() -> None:
    # A fence pattern that matched nothing would make every check below vacuous.
    assert len(BLOCKS) >= 3
    # And the parser does catch the mistake issue #15 found in the KEDA docs.
    with pytest.raises(yaml.YAMLError, match="unknown escape character"):
        yaml.safe_load('valueLocation: "pools.0.forecast_quantiles.q0\\.9"')


@pytest.mark.parametrize(("where", "text"), BLOCKS, ids=[where for where, _ in BLOCKS])
def test_every_yaml_example_parses_and_validates(where: str, text: str) -> None:
    for doc in documents(text):
        if isinstance(doc, dict) and "apiVersion" in doc and "kind" in doc:
            validate(doc)
            if doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == CONFIGMAP_NAME:
                validate_value_text(doc["data"][CONFIGMAP_KEY])
        elif isinstance(doc, dict) and "pools" in doc:
            PoolsConfig.model_validate(doc)


def keda_sets() -> list[tuple[str, list[dict[str, Any]]]]:
    sets = [
        (where, [d for d in documents(text) if isinstance(d, dict) and "kind" in d])
        for where, text in BLOCKS
    ]
    sets.append(("deploy/examples", load_documents(DEPLOY / "examples" / "keda-scaledobject.yaml")))
    return [(where, docs) for where, docs in sets if any(d["kind"] == "ScaledObject" for d in docs)]


KEDA = keda_sets()


@pytest.mark.parametrize(("where", "docs"), KEDA, ids=[where for where, _ in KEDA])
def test_keda_examples_reach_the_service_and_scale_the_buffers(
    where: str, docs: list[dict[str, Any]]
) -> None:
    (scaled,) = [d for d in docs if d["kind"] == "ScaledObject"]
    namespace = scaled["metadata"]["namespace"]
    # The target is a placeholder Deployment, in the buffers' namespace.
    assert namespace == env_of("base")["FORESIGHT_PUBLISH__BUFFERS_NAMESPACE"]
    assert scaled["spec"]["scaleTargetRef"]["name"].startswith("foresight-overprovisioning-")
    # Its TriggerAuthentication and the Secret that one reads sit beside it.
    for trigger in scaled["spec"]["triggers"]:
        auth = trigger.get("authenticationRef")
        if auth is None:
            continue
        (trigger_auth,) = [
            d
            for d in docs
            if d["kind"] == "TriggerAuthentication" and d["metadata"]["name"] == auth["name"]
        ]
        assert trigger_auth["metadata"]["namespace"] == namespace
        for ref in trigger_auth["spec"]["secretTargetRef"]:
            (secret,) = [
                d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == ref["name"]
            ]
            assert secret["metadata"]["namespace"] == namespace
            assert ref["key"] in secret.get("stringData", secret.get("data", {}))
        # The URL reaches a port of the rendered Service.
        url = urlsplit(trigger["metadata"]["url"])
        (service,) = [o for o in rendered("base") if o["kind"] == "Service"]
        meta = service["metadata"]
        allowed = {
            f"{meta['name']}.{meta['namespace']}.svc",
            f"{meta['name']}.{meta['namespace']}.svc.cluster.local",
        }
        assert url.hostname in allowed
        port = url.port or (443 if url.scheme == "https" else 80)
        assert port in {p["port"] for p in service["spec"]["ports"]}
