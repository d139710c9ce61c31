"""``GET /pools``: the configured pools (the config holds no secrets)."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import ServiceDep
from api.schemas import PoolOut, PoolsOut, ScaleDownOut, ServiceOut, SignalOut
from pipelines.config.pools import PoolConfig

router = APIRouter(tags=["pools"])


def pool_out(pool: PoolConfig, node_group_warning: str | None = None) -> PoolOut:
    """Return the response body of one pool, PromQL placeholders filled in."""
    return PoolOut(
        name=pool.name,
        node_group_id=pool.node_group_id,
        gpus_per_node=pool.gpus_per_node,
        min_nodes=pool.min_nodes,
        max_nodes=pool.max_nodes,
        lead_time_seconds=pool.lead_time.total_seconds(),
        cost_per_node_hour=pool.cost_per_node_hour,
        target_utilisation=pool.target_utilisation,
        quantile=pool.quantile,
        safety_margin=pool.safety_margin,
        signals={
            name: SignalOut(promql=pool.promql(name), column=source.column)
            for name, source in pool.signals.items()
        },
        services=[ServiceOut(name=s.name, slo_p95_ms=s.slo_p95_ms) for s in pool.services],
        scale_down=ScaleDownOut(
            window_seconds=pool.scale_down.window.total_seconds(),
            max_step_nodes=pool.scale_down.max_step_nodes,
            max_step_percent=pool.scale_down.max_step_percent,
        ),
        node_group_warning=node_group_warning,
    )


@router.get("/pools", response_model=PoolsOut, summary="The configured pools")
def list_pools(service: ServiceDep) -> PoolsOut:
    """Return every configured pool with its sizes, bounds, lead time and signals.

    ``node_group_warning`` says when a pool's node group id is not in the form the
    cloud provider reports (see the pools file's ``cloud_provider``).
    """
    config = service.services.pools
    warnings = config.node_group_warnings()
    return PoolsOut(
        cloud_provider=config.cloud_provider,
        pools=[pool_out(pool, warnings.get(pool.name)) for pool in service.select(None)],
    )
