"""KubeWriter offline: where credentials come from, and validation before any request."""

from __future__ import annotations

import copy
import socket
from pathlib import Path

import pytest
import yaml
from kubernetes import config as kube_config  # type: ignore[import-untyped]
from kubernetes.client import ApiClient, Configuration  # type: ignore[import-untyped]

from api.consumers.k8s import Manifest
from api.consumers.kube_credentials import load_configuration
from api.consumers.kube_writer import (
    ClusterUnreachableError,
    KubeWriter,
    validate_manifest,
)
from api.consumers.priority_expander import priority_expander_configmap
from api.settings import PublishSettings
from forecaster.exceptions import ConfigError
from pipelines.config.pools import PoolConfig
from pipelines.errors import PublishError


def kubeconfig(path: Path) -> Path:
    """Write a kubeconfig with two contexts pointing at two servers."""
    clusters = [
        {"name": name, "cluster": {"server": f"https://{name}.test:6443"}}
        for name in ("one", "two")
    ]
    contexts = [
        {"name": f"ctx-{name}", "context": {"cluster": name, "user": "me"}}
        for name in ("one", "two")
    ]
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": clusters,
        "contexts": contexts,
        "current-context": "ctx-one",
        "users": [{"name": "me", "user": {"token": "t0ken"}}],
    }
    path.write_text(yaml.safe_dump(document))
    return path


def test_an_explicit_kubeconfig_and_context_are_used(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "kubeconfig")

    default, source = load_configuration(PublishSettings(kubeconfig=path))
    chosen, chosen_source = load_configuration(
        PublishSettings(kubeconfig=path, kube_context="ctx-two")
    )

    assert default.host == "https://one.test:6443"
    assert chosen.host == "https://two.test:6443"
    assert source == f"kubeconfig {path}"
    assert chosen_source == f"kubeconfig {path} (context ctx-two)"


def test_a_missing_kubeconfig_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope"

    with pytest.raises(ConfigError, match=f"publish.kubeconfig {missing} does not exist"):
        load_configuration(PublishSettings(kubeconfig=missing))


def test_an_unknown_context_is_named(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "kubeconfig")

    with pytest.raises(ConfigError, match="context 'ctx-three'"):
        load_configuration(PublishSettings(kubeconfig=path, kube_context="ctx-three"))


def test_without_any_credentials_the_error_names_every_place_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(tmp_path / "absent"))

    with pytest.raises(ConfigError) as caught:
        load_configuration(PublishSettings())

    message = str(caught.value)
    assert "publish.kubeconfig is unset" in message
    assert "service account" in message
    assert str(tmp_path / "absent") in message
    assert "FORESIGHT_PUBLISH__KUBECONFIG" in message


def test_the_default_kubeconfig_is_the_fallback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    path = kubeconfig(tmp_path / "config")
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(path))

    configuration, source = load_configuration(PublishSettings(kube_context="ctx-two"))

    assert configuration.host == "https://two.test:6443"
    assert source.startswith(f"kubeconfig {path}")


def valid_configmap() -> Manifest:
    pools = [PoolConfig(name="a", node_group_id="ng-a"), PoolConfig(name="b", node_group_id="ng-b")]
    return copy.deepcopy(priority_expander_configmap(pools, [], namespace="kube-system").manifest)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ('"10":\n  - ^a$\n0:\n  - .*\n', "plain unquoted integer"),
        ("10.5:\n  - ^a$\n0:\n  - .*\n", "plain unquoted integer"),
        ("10:\n  - ^(?=a)$\n0:\n  - .*\n", "look-arounds"),
        ("10:\n  - ^a$\n", "catch-all"),
        ("10:\n  - ^(a$\n0:\n  - .*\n", "RE2"),
    ],
)
def test_an_invalid_priorities_value_is_refused_at_the_write_boundary(
    value: str, problem: str
) -> None:
    manifest = valid_configmap()
    manifest["data"]["priorities"] = value

    with pytest.raises(PublishError, match=problem):
        validate_manifest(manifest)


def test_unlabelled_or_unknown_objects_are_refused() -> None:
    unlabelled = valid_configmap()
    del unlabelled["metadata"]["labels"]
    secret: Manifest = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}

    with pytest.raises(PublishError, match="managed-by=foresight"):
        validate_manifest(unlabelled)
    with pytest.raises(PublishError, match="does not write 'Secret'"):
        validate_manifest(secret)


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def writer_to_nowhere(port: int) -> KubeWriter:
    """A writer whose API server does not exist: any request would fail as unreachable."""
    configuration = Configuration(host=f"http://127.0.0.1:{port}")
    configuration.retries = 0
    return KubeWriter(ApiClient(configuration))


def test_an_invalid_configmap_is_refused_before_any_request(closed_port: int) -> None:
    bad = valid_configmap()
    bad["data"]["priorities"] = "10:\n  - ^(?!a)$\n0:\n  - .*\n"
    writer = writer_to_nowhere(closed_port)

    # A request would have raised ClusterUnreachableError; the validation comes first.
    with pytest.raises(PublishError, match="look-arounds") as caught:
        writer.apply(bad, dry_run=False)
    assert not isinstance(caught.value, ClusterUnreachableError)
    # In a sync the invalid object is reported failed, and no request is sent for it.
    (change,) = writer.sync([bad], dry_run=True)
    assert change.action == "failed"
    assert "look-arounds" in change.reason


def test_an_unreachable_server_is_a_clear_error(closed_port: int) -> None:
    where = rf"127\.0\.0\.1:{closed_port} is unreachable"
    with pytest.raises(ClusterUnreachableError, match=where):
        writer_to_nowhere(closed_port).apply(valid_configmap(), dry_run=True)
