"""deploy/: every rendered and example manifest against Kubernetes schemas, plus policy.

Built-in kinds are validated with kubernetes-validate (strict: unknown fields fail) at
a pinned Kubernetes version; custom resources with the schemas in ``crd_schemas.py``
or, for CapacityBuffers, the project's own validator. On top: least-privilege RBAC,
probes on routes the app really serves, non-root containers, settings the app
accepts, and alert rules over metric names /metrics really exposes.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from api.consumers.capacity_buffers import (
    CAPACITY_BUFFER_API,
    PLACEHOLDER_LABEL,
    validate_capacity_buffer,
)
from api.consumers.priority_expander import CONFIGMAP_NAME, validate_value_text
from api.main import create_app
from api.schemas import PoolRecommendation
from api.settings import load_app_settings
from pipelines.config.pools_file import load_pools
from tests.deploy.crd_schemas import SCHEMAS
from tests.deploy.kustomize_lite import Manifest, load_documents, render

KUBERNETES_VERSION = "1.34.0"
"""The Kubernetes API version the manifests are validated against (pinned)."""

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
KUSTOMIZATIONS = [
    "base",
    "overlays/production",
    "overlays/split-scheduler",
    "overlays/grpc-expander",
]
EXAMPLES = sorted((DEPLOY / "examples").glob("*.yaml"))
HELM_VALUES = DEPLOY / "examples" / "cluster-autoscaler-values.yaml"
GRPC_HELM_VALUES = DEPLOY / "examples" / "cluster-autoscaler-grpc-values.yaml"


def rendered(name: str) -> list[Manifest]:
    return render(DEPLOY / name)


def all_objects() -> list[tuple[str, Manifest]]:
    found = [(name, obj) for name in KUSTOMIZATIONS for obj in rendered(name)]
    found += [
        (path.name, obj)
        for path in EXAMPLES
        if path not in (HELM_VALUES, GRPC_HELM_VALUES)
        for obj in load_documents(path)
    ]
    return found


def validate(obj: Manifest) -> None:
    """Validate one object with the validator of its kind; raise on any problem."""
    api, kind = obj["apiVersion"], obj["kind"]
    if (api, kind) == (CAPACITY_BUFFER_API, "CapacityBuffer"):
        validate_capacity_buffer(obj)
    elif (api, kind) in SCHEMAS:
        jsonschema.validate(obj, SCHEMAS[(api, kind)], cls=jsonschema.Draft202012Validator)
    else:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize(
    ("source", "obj"),
    all_objects(),
    ids=lambda value: (
        value if isinstance(value, str) else f"{value['kind']}/{value['metadata']['name']}"
    ),
)
def test_every_manifest_is_schema_valid(source: str, obj: Manifest) -> None:
    validate(obj)


def test_the_validators_reject_a_misspelt_field() -> None:
    """Without this, a validator that accepts anything would pass every check above."""
    deployment = next(o for o in rendered("base") if o["kind"] == "Deployment")
    broken = json.loads(json.dumps(deployment))
    broken["spec"]["template"]["spec"]["containers"][0]["livenessprobe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(broken)
    monitor = next(o for o in rendered("base") if o["kind"] == "ServiceMonitor")
    broken = json.loads(json.dumps(monitor))
    broken["spec"]["endpoints"][0]["intervall"] = "30s"
    with pytest.raises(jsonschema.ValidationError):
        validate(broken)


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_kubectl_kustomize_renders_the_same_objects(name: str) -> None:
    """An extra check where kubectl is installed: the lite renderer matches kustomize."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed: the lite renderer alone is checked")
    out = subprocess.run(
        [kubectl, "kustomize", str(DEPLOY / name)], capture_output=True, text=True, check=True
    ).stdout
    theirs = [doc for doc in yaml.safe_load_all(out) if doc]

    def strip_hash(text: str) -> str:
        return re.sub(r"^(foresight-pools)-[a-z0-9]{10}$", r"\1", text)

    def normal(obj: Manifest) -> str:
        text = json.dumps(obj, sort_keys=True)
        return re.sub(r'"(foresight-pools)-[a-z0-9]{10}"', r'"\1"', text)

    mine = {normal(obj) for obj in rendered(name)}
    assert {normal(obj) for obj in theirs} == mine
    assert all(strip_hash(o["metadata"]["name"]) for o in theirs)


# -- RBAC ------------------------------------------------------------------------


def rbac(name: str) -> tuple[list[Manifest], list[Manifest]]:
    objects = rendered(name)
    roles = [o for o in objects if o["kind"] in {"Role", "ClusterRole"}]
    bindings = [o for o in objects if o["kind"] in {"RoleBinding", "ClusterRoleBinding"}]
    return roles, bindings


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_rbac_has_no_wildcards_and_names_what_it_can(name: str) -> None:
    roles, bindings = rbac(name)
    assert roles
    for role in roles:
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert "*" not in rule.get(field, []), (role["metadata"]["name"], field)
            assert not {"secrets", "pods/exec", "clusterroles", "roles"} & set(rule["resources"])
            assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"])
            # Cluster-wide grants are only ever for one named object each.
            if role["kind"] == "ClusterRole":
                assert rule.get("resourceNames"), role["metadata"]["name"]
            # `create` (and list/watch) cannot be limited by name: rules that name
            # their objects must not carry them, or the names would be a false promise.
            if rule.get("resourceNames"):
                assert not {"create", "list", "watch", "deletecollection"} & set(rule["verbs"])
    by_name = {(r["kind"], r["metadata"]["name"]) for r in roles}
    for binding in bindings:
        assert (binding["roleRef"]["kind"], binding["roleRef"]["name"]) in by_name
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "foresight", "namespace": "foresight"}
        ]


def test_the_autoscaler_namespace_grant_is_one_configmap() -> None:
    roles, _ = rbac("base")
    in_kube_system = [r for r in roles if r["metadata"].get("namespace") == "kube-system"]
    assert len(in_kube_system) == 1
    assert in_kube_system[0]["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": [CONFIGMAP_NAME],
            "verbs": ["get", "update", "patch"],
        }
    ]
    # Since create is not granted, the ConfigMap ships with the base, owned by Foresight.
    shipped = [
        o
        for o in rendered("base")
        if o["kind"] == "ConfigMap" and o["metadata"]["name"] == CONFIGMAP_NAME
    ]
    assert len(shipped) == 1
    assert shipped[0]["metadata"]["namespace"] == "kube-system"
    assert shipped[0]["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "foresight"
    assert validate_value_text(shipped[0]["data"]["priorities"]) == {0: [".*"]}


def test_buffer_grants_match_what_foresight_writes() -> None:
    roles, _ = rbac("base")
    buffers = next(r for r in roles if r["metadata"]["name"] == "foresight-buffers")
    settings = next(
        o
        for o in rendered("base")
        if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "foresight-settings"
    )
    # The Role lives where Foresight is told to write its buffers, not beside itself.
    assert (
        buffers["metadata"]["namespace"] == settings["data"]["FORESIGHT_PUBLISH__BUFFERS_NAMESPACE"]
    )
    assert buffers["metadata"]["namespace"] != "foresight"
    group = CAPACITY_BUFFER_API.split("/")[0]
    granted = {
        (g, res)
        for rule in buffers["rules"]
        for g in rule["apiGroups"]
        for res in rule["resources"]
    }
    assert granted == {(group, "capacitybuffers"), ("", "podtemplates"), ("apps", "deployments")}
    priority = next(r for r in roles if r["kind"] == "ClusterRole")
    assert priority["rules"][0]["resourceNames"] == ["foresight-placeholder"]
    shipped = next(o for o in rendered("base") if o["kind"] == "PriorityClass")
    assert shipped["metadata"]["name"] == "foresight-placeholder"
    assert shipped["value"] < 0


# -- workloads -------------------------------------------------------------------


def deployments(name: str) -> list[Manifest]:
    return [o for o in rendered(name) if o["kind"] == "Deployment"]


def served_paths() -> set[str]:
    return set(create_app(refresh_seconds=None).openapi()["paths"])


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_api_probes_hit_routes_the_app_serves(name: str) -> None:
    paths = served_paths()
    api = [
        d
        for d in deployments(name)
        if d["metadata"]["labels"]["app.kubernetes.io/component"] == "api"
    ]
    assert len(api) == 1
    container = api[0]["spec"]["template"]["spec"]["containers"][0]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert {"/healthz", "/readyz", "/metrics", "/"} <= paths
    port = next(p for p in container["ports"] if p["name"] == "http")
    assert port["containerPort"] == 8000
    assert container["args"][:1] == ["serve"]
    assert "0.0.0.0" in container["args"]
    monitor = next(o for o in rendered(name) if o["kind"] == "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"
    service = next(o for o in rendered(name) if o["kind"] == "Service")
    assert service["spec"]["selector"] == api[0]["spec"]["selector"]["matchLabels"]
    # The ServiceMonitor selects the Service by labels the Service carries.
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_containers_run_as_non_root_read_only(name: str) -> None:
    for deployment in deployments(name):
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] > 0
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        assert not pod.get("hostNetwork")
        assert not pod.get("hostPID")
        assert all("hostPath" not in volume for volume in pod.get("volumes", []))
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False
            assert context["readOnlyRootFilesystem"] is True
            assert context["capabilities"]["drop"] == ["ALL"]
            assert container["resources"]["requests"]["memory"]
            assert not container["image"].endswith(":latest")
            assert ":" in container["image"]


def test_production_overlay_pins_the_image_and_writes() -> None:
    (api,) = [d for d in deployments("overlays/production") if d["metadata"]["name"] == "foresight"]
    assert api["spec"]["replicas"] == 3
    assert api["spec"]["template"]["spec"]["containers"][0]["image"].endswith(":0.1.0")
    settings = next(
        o for o in rendered("overlays/production") if o["metadata"]["name"] == "foresight-settings"
    )
    assert settings["data"]["FORESIGHT_SERVICE__FORECAST_ONLY"] == "false"


# -- configuration ---------------------------------------------------------------


def env_of(name: str) -> dict[str, str]:
    objects = {
        o["metadata"]["name"]: o for o in rendered(name) if o["kind"] in {"ConfigMap", "Secret"}
    }
    return {**objects["foresight-settings"]["data"], **objects["foresight-secrets"]["stringData"]}


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_the_app_accepts_the_settings(
    name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env = env_of(name)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("FORESIGHT_ROOT", str(tmp_path))
    settings = load_app_settings()
    assert settings.store_url.startswith("postgresql+psycopg://")
    assert settings.mlflow_tracking_uri.startswith("http://")
    assert len(settings.service.read_tokens) == len(settings.service.write_tokens) == 1
    assert settings.webhook_secret is not None
    assert settings.publish.buffers_namespace == "foresight-buffers"
    assert str(settings.pools_file) == "/etc/foresight/pools/pools.yaml"


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_the_pools_configmap_is_a_valid_pools_file(name: str, tmp_path: Path) -> None:
    (pools,) = [o for o in rendered(name) if o["metadata"]["name"] == "foresight-pools"]
    path = tmp_path / "pools.yaml"
    path.write_text(pools["data"]["pools.yaml"])
    assert len(load_pools(path).names) >= 1
    # The Deployment mounts it where FORESIGHT_POOLS_FILE points.
    volumes = deployments(name)[0]["spec"]["template"]["spec"]["volumes"]
    assert {"name": "pools", "configMap": {"name": "foresight-pools"}} in volumes


# -- examples --------------------------------------------------------------------


def test_cluster_autoscaler_values_leave_the_configmap_to_foresight() -> None:
    (values,) = load_documents(HELM_VALUES)
    assert values["expanderPriorities"] == {}
    assert "priority" in values["extraArgs"]["expander"].split(",")
    # cluster-autoscaler's IsExpendablePod: priority < cutoff. Placeholders must not be
    # expendable (or they trigger no scale-up), so the cut-off must be <= their priority.
    (klass,) = [o for o in rendered("base") if o["kind"] == "PriorityClass"]
    assert values["extraArgs"]["expendable-pods-priority-cutoff"] <= klass["value"]


def test_the_grpc_expander_wiring_meets_in_the_middle(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (values,) = load_documents(GRPC_HELM_VALUES)
    args = values["extraArgs"]
    # grpc first: the priority ConfigMap decides when Foresight has no opinion or fails.
    assert args["expander"].split(",") == ["grpc", "priority"]
    host, port = args["grpc-expander-url"].rsplit(":", 1)
    objects = rendered("overlays/grpc-expander")
    (service,) = [o for o in objects if o["kind"] == "Service"]
    assert host == f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc"
    (grpc_port,) = [p for p in service["spec"]["ports"] if p["name"] == "grpc-expander"]
    assert grpc_port["port"] == int(port)
    (volume,) = values["extraVolumeSecrets"].values()
    assert args["grpc-expander-cert"].startswith(volume["mountPath"] + "/")
    # Foresight's side: the settings name the mounted Secret's files and the port.
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert {"name": "grpc-expander", "containerPort": 8443, "protocol": "TCP"} in container["ports"]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "expander-tls"]
    (secret,) = [v for v in pod["volumes"] if v["name"] == "expander-tls"]
    assert secret["secret"]["secretName"] == "foresight-expander-tls"
    for key, value in env_of("overlays/grpc-expander").items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("FORESIGHT_ROOT", str(tmp_path))
    publish = load_app_settings().publish
    assert publish.grpc_expander_address == "0.0.0.0:8443"
    for path in (publish.grpc_expander_cert, publish.grpc_expander_key):
        assert str(path).startswith(mount["mountPath"] + "/")


def test_keda_reads_a_number_the_recommendation_has() -> None:
    docs = load_documents(DEPLOY / "examples" / "keda-scaledobject.yaml")
    (scaled,) = [d for d in docs if d["kind"] == "ScaledObject"]
    trigger = scaled["spec"]["triggers"][0]
    assert trigger["type"] == "metrics-api"
    meta = trigger["metadata"]
    head, index, field = meta["valueLocation"].split(".")
    assert head == "pools"
    assert index.isdigit()
    assert PoolRecommendation.model_fields[field].annotation is int
    assert meta["url"].startswith("http://foresight.foresight.svc")
    assert "?pool=" in meta["url"]
    auth = next(d for d in docs if d["kind"] == "TriggerAuthentication")
    assert auth["metadata"]["name"] == trigger["authenticationRef"]["name"]
    target = scaled["spec"]["scaleTargetRef"]["name"]
    (placeholders,) = [
        d
        for d in load_documents(DEPLOY / "examples" / "overprovisioning.yaml")
        if d["kind"] == "Deployment"
    ]
    assert placeholders["metadata"]["name"] == target
    assert PLACEHOLDER_LABEL in placeholders["spec"]["template"]["metadata"]["labels"]


def rules() -> list[dict[str, Any]]:
    (rule,) = load_documents(DEPLOY / "examples" / "prometheus-rules.yaml")
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


def test_the_documented_alerts_exist() -> None:
    # Whether their metrics are really scraped (and one fires) is checked against a real
    # Prometheus scraping the service: tests/integration/test_alerts_scrape.py.
    alerts = {r["alert"] for r in rules()}
    assert {
        "ForesightDataStale",
        "ForesightModelDegraded",
        "ForesightRecommendationAtMax",
    } <= alerts


def test_promtool_accepts_the_rules(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package prometheus): schema check only")
    (rule,) = load_documents(DEPLOY / "examples" / "prometheus-rules.yaml")
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    done = subprocess.run(
        [promtool, "check", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _api_args(name: str) -> list[str]:
    api = next(
        o
        for o in rendered(name)
        if o["kind"] == "Deployment" and o["metadata"]["name"] == "foresight"
    )
    container = api["spec"]["template"]["spec"]["containers"][0]
    assert container["image"].startswith("foresight")  # the patch kept the rest
    args: list[str] = container["args"]
    return args


def test_split_scheduler_api_pods_do_not_run_the_scheduler() -> None:
    split = rendered("overlays/split-scheduler")

    assert "--no-scheduler" in _api_args("overlays/split-scheduler")
    assert "--no-scheduler" not in _api_args("base")
    scheduler = next(o for o in split if o["metadata"]["name"] == "foresight-scheduler")
    assert scheduler["spec"]["template"]["spec"]["containers"][0]["args"] == ["scheduler"]
