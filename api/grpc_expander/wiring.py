"""The gRPC expander over the running recommendation service, as the app starts it.

Details: docs/consumers.md, "Notes from the code", `api/grpc_expander/wiring.py`."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from api.consumers.kube_writer import KubeWriter
from api.consumers.priority_expander import rank_pools
from api.consumers.priority_live import ConfigMapReader, read_live
from api.consumers.priority_merge import PriorityConflictError, operator_entries
from api.grpc_expander.choice import ExpanderView, Tiers
from api.grpc_expander.server import ExpanderTLS, RankingSource, RunningExpander, start_expander
from api.service import RecommendationService
from api.settings import ClusterAutoscalerVersion, PublishSettings
from forecaster.exceptions import ConfigError

logger = logging.getLogger(__name__)

TierSource = Callable[[Sequence[str]], tuple[Tiers | None, str]]
"""Given Foresight's node group ids, returns the hand-made tiers (None: unknown) and why."""


def no_tiers(managed: Sequence[str]) -> tuple[Tiers | None, str]:
    """No hand-made tiers (a cluster without a priority ConfigMap, or a benchmark)."""
    return {}, ""


def unknown_tiers(problem: str) -> TierSource:
    """Tiers that cannot be known (no credentials): the expander has no opinion."""

    def tiers(managed: Sequence[str]) -> tuple[Tiers | None, str]:
        return None, problem

    return tiers


def live_tiers(
    reader: ConfigMapReader, namespace: str, version: ClusterAutoscalerVersion
) -> TierSource:
    """Read the hand-made entries of the live priority ConfigMap at each call."""

    def tiers(managed: Sequence[str]) -> tuple[Tiers | None, str]:
        live = read_live(reader, namespace, "")
        if not live.readable:
            return None, f"cannot read the live priority ConfigMap: {live.problem}"
        if live.manifest is None:
            return {}, ""
        try:
            found = operator_entries(live.manifest, managed, version=version)
        except PriorityConflictError as exc:
            # cluster-autoscaler ignores a ConfigMap it cannot parse: no tiers apply.
            return {}, f"the live ConfigMap is ignored by cluster-autoscaler: {exc}"
        return {priority: tuple(regexes) for priority, regexes in found.items()}, ""

    return tiers


def service_ranking(service: RecommendationService, tiers: TierSource = no_tiers) -> RankingSource:
    """Rank the service's pools by its current recommendations (recomputed when due).

    The same recommendations ``GET /recommendation`` serves, call-chain adjustment
    included, and the same rule (and numbers) the priority-expander ConfigMap is built
    with, beside the hand-made tiers of ``tiers``.
    """

    def view() -> ExpanderView:
        pools = service.select(None)
        entries, _ = service.recommendations(pools)
        found, problem = tiers([pool.node_group_id for pool in pools])
        ranking = rank_pools(
            pools, [entry.recommendation for entry in entries], reserved=set(found or ())
        )
        return ExpanderView.of(ranking, found, problem)

    return view


def _nothing() -> None:
    return None


def start_configured_expander(
    publish: PublishSettings, service: RecommendationService
) -> RunningExpander | None:
    """Start the expander when ``publish.grpc_expander_address`` is set, else return None.

    Raises:
        ConfigError: the address is set without a usable certificate and key, or
            cannot be bound.
    """
    if publish.grpc_expander_address is None:
        return None
    tls = ExpanderTLS.from_files(publish.grpc_expander_cert, publish.grpc_expander_key)
    cleanup: Callable[[], None] = _nothing
    try:
        writer = KubeWriter.from_settings(publish)
    except ConfigError as exc:
        tiers = unknown_tiers(f"no cluster to read them from: {exc}")
        logger.warning(
            "gRPC expander: the hand-made priority tiers cannot be read (%s); it will answer "
            "with every option until they can",
            exc,
        )
    else:
        tiers = live_tiers(writer, publish.namespace, publish.cluster_autoscaler_version)
        cleanup = writer.close
    return start_expander(
        publish.grpc_expander_address,
        tls,
        service_ranking(service, tiers),
        budget_s=publish.grpc_expander_budget_s,
        reactive=publish.grpc_expander_reactive,
        cleanup=cleanup,
    )
