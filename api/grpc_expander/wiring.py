"""The gRPC expander over the running recommendation service, as the app starts it."""

from __future__ import annotations

from api.consumers.priority_expander import RankedPool, rank_pools
from api.grpc_expander.server import ExpanderTLS, RankingSource, RunningExpander, start_expander
from api.service import RecommendationService
from pipelines.config.sections import PublishSettings


def service_ranking(service: RecommendationService) -> RankingSource:
    """Rank the service's pools by its current recommendations (recomputed when due).

    The same recommendations ``GET /recommendation`` serves, call-chain adjustment
    included, and the same rule the priority-expander ConfigMap is built with.
    """

    def ranking() -> tuple[RankedPool, ...]:
        pools = service.select(None)
        entries, _ = service.recommendations(pools)
        return rank_pools(pools, [entry.recommendation for entry in entries])

    return ranking


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
    return start_expander(
        publish.grpc_expander_address,
        tls,
        service_ranking(service),
        budget_s=publish.grpc_expander_budget_s,
    )
