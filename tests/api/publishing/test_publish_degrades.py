"""Issue #36: a publication degrades per object and shows exactly what it writes.

Items 2 (a ConfigMap conflict skips the ConfigMap only), 3 (the mode is in the
outcome and the output) and 4 (the dry run shows the merged ConfigMap, unwrapped).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import yaml
from rich.console import Console

from api.consumers.k8s import Manifest
from api.consumers.kube_writer import Change
from api.consumers.priority_expander import MANAGED_NODE_GROUPS
from api.publishing import publish_once
from api.service import RecommendationService
from api.settings import AppSettings
from cli import publish as publish_cli
from pipelines.jobs.publish import PublishMode, run_publish
from pipelines.store.store import Store

NOW = datetime(2025, 3, 30, 12, 0, tzinfo=UTC)
CM = ("ConfigMap", "cluster-autoscaler-priority-expander")
CM_TARGET = "ConfigMap kube-system/cluster-autoscaler-priority-expander"
MakeService = Callable[..., RecommendationService]


def live_configmap(priorities: str, *, owned: bool = True) -> Manifest:
    metadata: dict[str, Any] = {
        "name": CM[1],
        "namespace": "kube-system",
        "annotations": {MANAGED_NODE_GROUPS: json.dumps(["ng-alpha", "ng-beta"])},
    }
    if owned:
        metadata["labels"] = {"app.kubernetes.io/managed-by": "foresight"}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {
        "priorities": priorities}}  # fmt: skip


def receiver() -> tuple[httpx.Client, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(204)

    return httpx.Client(transport=httpx.MockTransport(handle)), seen


def test_a_conflicting_hand_made_entry_skips_the_configmap_only(
    settings: AppSettings, store: Store, make_service: MakeService, cluster: Any
) -> None:
    # Issue #36 item 2: '25: ^ng-.*' matches both managed groups.
    cluster.live[CM] = live_configmap("25:\n  - ^ng-.*\n20:\n  - ^ng-alpha$\n0:\n  - .*\n")
    http, seen = receiver()

    outcome = publish_once(
        settings, store, mode="apply", now=NOW, kube=cluster, http=http, service=make_service()
    )

    (call,) = cluster.calls
    assert [m["kind"] for m in call["desired"]] == ["PriorityClass", "Deployment", "Deployment"]
    assert outcome.objects[CM_TARGET] == "skipped"
    assert "'^ng-.*' at priority 25" in outcome.problems[CM_TARGET]
    assert outcome.changes[0].action == "skipped"
    assert {r for t, r in outcome.objects.items() if t != CM_TARGET} == {"written"}
    assert len(seen) == 1  # the webhook still went out


def test_the_job_report_names_each_object_and_is_partial_on_a_skip(
    settings: AppSettings, store: Store, make_service: MakeService, cluster: Any
) -> None:
    cluster.live[CM] = live_configmap("25:\n  - ^ng-.*\n0:\n  - .*\n")
    service = make_service()
    http, _ = receiver()

    def publisher(store: Store, *, mode: PublishMode, now: datetime | None) -> object:
        return publish_once(
            settings,
            store,
            mode=mode,
            now=now,
            kube=cluster,
            http=http,
            service=service,
        )

    # Not forecast_only: the CLI's runner publishes in apply mode.
    report = run_publish(settings, publish=publisher, store=store, now=NOW, mode="apply")

    assert report.outcome == "partial"
    assert set(report.problems) == {CM_TARGET}
    assert ": 1 skipped, 3 written (" in report.summary
    assert f"{CM_TARGET} skipped: the entry '^ng-.*'" in report.summary
    assert report.details["objects"][CM_TARGET] == "skipped"


def test_a_failed_object_does_not_stop_the_others_and_is_named(
    settings: AppSettings, store: Store, make_service: MakeService, cluster: Any
) -> None:
    cluster.results["PriorityClass"] = Change(
        "failed", "PriorityClass", "foresight-placeholder", None, False, reason="403 Forbidden"
    )

    outcome = publish_once(
        settings, store, mode="apply", now=NOW, kube=cluster, service=make_service()
    )

    assert outcome.objects["PriorityClass foresight-placeholder"] == "failed"
    assert outcome.problems == {"PriorityClass foresight-placeholder": "403 Forbidden"}
    assert outcome.objects[CM_TARGET] == "written"
    assert publish_cli.exit_code(outcome) == 1


def test_a_skipped_configmap_alone_exits_zero(
    settings: AppSettings, store: Store, make_service: MakeService, cluster: Any
) -> None:
    # The documented contract: a skip is a deliberate refusal, named but not an error.
    cluster.live[CM] = live_configmap("25:\n  - ^ng-.*\n0:\n  - .*\n")

    outcome = publish_once(
        settings, store, mode="apply", now=NOW, kube=cluster, service=make_service()
    )

    assert outcome.objects[CM_TARGET] == "skipped"
    assert publish_cli.exit_code(outcome) == 0


def test_the_dry_run_shows_the_configmap_merged_with_the_live_one(
    settings: AppSettings, store: Store, make_service: MakeService, cluster: Any
) -> None:
    # Issue #36 item 4: the dry run printed the unmerged object.
    cluster.live[CM] = live_configmap("15:\n  - ^cpu-general$\n0:\n  - .*\n")

    outcome = publish_once(
        settings, store, mode="dry_run", now=NOW, kube=cluster, service=make_service()
    )

    assert outcome.configmap.basis == "merged"
    shown = yaml.safe_load(outcome.configmap.yaml_text)
    (sent,) = [m for m in cluster.calls[0]["desired"] if m["kind"] == "ConfigMap"]
    assert shown == sent
    assert yaml.safe_load(shown["data"]["priorities"])[15] == ["^cpu-general$"]


def test_the_dry_run_says_when_the_live_configmap_cannot_be_read(
    settings: AppSettings, store: Store, make_service: MakeService, cluster: Any
) -> None:
    cluster.unreadable = "403 Forbidden: get configmaps"

    outcome = publish_once(
        settings, store, mode="dry_run", now=NOW, kube=cluster, service=make_service()
    )

    assert outcome.configmap.basis == "unreadable"
    assert "NOT merged" in outcome.configmap.note
    assert "403 Forbidden" in outcome.configmap.note


@pytest.mark.parametrize("width", [60, 80])
def test_the_printed_configmap_is_valid_yaml_at_any_terminal_width(
    settings: AppSettings,
    store: Store,
    make_service: MakeService,
    cluster: Any,
    monkeypatch: pytest.MonkeyPatch,
    width: int,
) -> None:
    cluster.live[CM] = live_configmap("15:\n  - ^cpu-general$\n0:\n  - .*\n")
    outcome = publish_once(
        settings, store, mode="dry_run", now=NOW, kube=cluster, service=make_service()
    )
    console = Console(width=width, record=True, color_system=None)
    monkeypatch.setattr(publish_cli, "console", console)

    publish_cli.print_outcome(outcome)

    text = console.export_text()
    printed = text.split("ConfigMap it would write:\n", 1)[1].split("\nwebhook ", 1)[0]
    assert yaml.safe_load(printed) == outcome.configmap.manifest
    assert "Priority ConfigMap: merged with the live ConfigMap" in text


def test_the_outcome_and_the_table_show_each_pools_mode(
    settings: AppSettings,
    store: Store,
    make_service: MakeService,
    cluster: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Issue #36 item 3: without a model every pool decides reactively; say so.
    outcome = publish_once(
        settings, store, mode="dry_run", now=NOW, kube=cluster, service=make_service()
    )
    console = Console(width=200, record=True, color_system=None)
    monkeypatch.setattr(publish_cli, "console", console)

    publish_cli.print_outcome(outcome)

    assert outcome.modes == {"alpha": "reactive", "beta": "reactive"}
    text = console.export_text()
    assert "reactive (no trusted forecast): alpha, beta" in text
    assert "cost per GPU" in text
