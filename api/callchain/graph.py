"""The call graph of a window's services: who calls whom, and which pools a chain crosses."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence

from api.callchain.report import ServiceReport
from api.callchain.types import ServiceStats
from forecaster.exceptions import ConfigError
from pipelines.config.pools import PoolConfig


def service_pools(pools: Sequence[PoolConfig]) -> dict[str, str]:
    """Return service name -> pool name from the pools' ``services`` lists.

    Raises:
        ConfigError: a service is listed by more than one pool, so which pool to scale
            for it is ambiguous.
    """
    owner: dict[str, str] = {}
    for pool in pools:
        for service in pool.services:
            if service.name in owner and owner[service.name] != pool.name:
                raise ConfigError(
                    f"service {service.name!r} is listed by pools {owner[service.name]!r} and "
                    f"{pool.name!r}; list each service under the one pool it runs on"
                )
            owner[service.name] = pool.name
    return owner


def flagged(reports: Mapping[str, ServiceReport], stats: Mapping[str, ServiceStats]) -> set[str]:
    """Return the services whose baselines must not learn from this window.

    Those flagged (own-slow, slow or blamed) and the transitive callers of a culprit,
    whose call duration includes its excess.
    """
    found = {n for n, r in reports.items() if r.culprit or r.own_slow or r.status == "slow"}
    callers: dict[str, set[str]] = {}
    for name, stat in stats.items():
        for callee in stat.callees:
            callers.setdefault(callee, set()).add(name)
    queue = deque(n for n, r in reports.items() if r.culprit)
    while queue:
        for caller in callers.get(queue.popleft(), ()):
            if caller not in found:
                found.add(caller)
                queue.append(caller)
    return found


def downstream(service: str, stats: Mapping[str, ServiceStats]) -> list[str]:
    """Return every service reachable through callee edges, breadth first."""
    seen = {service}
    order: list[str] = []
    queue = deque([service])
    while queue:
        stat = stats.get(queue.popleft())
        for neighbour in stat.callees if stat is not None else ():
            if neighbour not in seen:
                seen.add(neighbour)
                order.append(neighbour)
                queue.append(neighbour)
    return order


def pools_on_chain(
    service: str, stats: Mapping[str, ServiceStats], owner: Mapping[str, str]
) -> tuple[str, ...]:
    """Return the pools of the services sharing ``service``'s call chains.

    Those are its transitive callers (their latency includes it) and its transitive
    callees (their traffic waits behind it).
    """
    seen = {service}
    queue = deque([service])
    while queue:
        stat = stats.get(queue.popleft())
        for neighbour in (*stat.callers, *stat.callees) if stat is not None else ():
            if neighbour not in seen:
                seen.add(neighbour)
                queue.append(neighbour)
    return tuple(sorted({owner[name] for name in seen if name in owner}))
