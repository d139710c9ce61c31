"""Call-chain latency as the service's latency source, analysed off the request path.

Details: docs/api.md, "Notes from the code", `api/latency.py`."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from datetime import datetime
from types import MappingProxyType
from typing import NamedTuple

from api.callchain.baseline import BaselineState
from api.callchain.bottleneck import analyse
from api.callchain.bottleneck_settings import BottleneckSettings
from api.callchain.incremental import ChainWindow
from api.callchain.report import LatencyAnalysis
from api.callchain.types import ServiceStats
from api.clock import Clock, system_clock
from api.live import LiveIndex
from api.settings import AppSettings
from pipelines.config.pools import PoolConfig, ServiceConfig
from pipelines.config.signals import GPU_UTIL, NODES
from policy.types import NO_LATENCY, LatencyAdjustment, iso_utc


def bottleneck_settings(settings: AppSettings) -> BottleneckSettings:
    """Return the analysis knobs of the deployment's ``callchain`` settings."""
    chain = settings.callchain
    return BottleneckSettings(
        baseline_factor=chain.baseline_factor, gpu_idle_below=chain.gpu_idle_below
    )


class LatencyTracker:
    """The latest call-chain analysis of a span window, per pool.

    Args:
        pools: the configured pools (their services and SLOs).
        clock: the window's clock, the same the trace routes add spans with (wall
            time: spans settle and expire by their arrival, whatever the decisions'
            clock; it is never served).
        settings: the analysis knobs; the defaults when None.
        services: services on no GPU pool, with their SLOs (the pools file's top-level
            ``services``).
        stamp: the clock that dates an analysis where it is served (``analysed_at``):
            the decision clock, so the chain shows the time the recommendations do;
            default ``clock``.
    """

    def __init__(
        self,
        window: ChainWindow,
        pools: Sequence[PoolConfig],
        *,
        clock: Clock = system_clock,
        settings: BottleneckSettings | None = None,
        services: Sequence[ServiceConfig] = (),
        stamp: Clock | None = None,
    ) -> None:
        self.window = window
        self._stamp = stamp or clock
        self._pools = list(pools)
        self._services = list(services)
        self._clock = clock
        self._settings = settings
        self._baselines = BaselineState()
        self._latest = _Latest(None, MappingProxyType({}), None)
        self._adjustments: Mapping[str, LatencyAdjustment] = MappingProxyType({})
        # Serialises analyses: each continues the baselines of the one before. Readers
        # never take it: they read the latest result, replaced whole by each analysis.
        self._lock = threading.Lock()

    @property
    def analysis(self) -> LatencyAnalysis | None:
        """The latest analysis, None before the first."""
        return self._latest.analysis

    @property
    def stats(self) -> Mapping[str, ServiceStats]:
        """The per-service statistics the latest analysis used (empty before the first)."""
        return self._latest.stats

    def chain(self) -> dict[str, object]:
        """Return the latest analysis as the call chain: services, edges, blame, verdicts.

        Per service: its statistics (span and call counts, p50/p95 of calls, p50/p95 of
        exclusive self time as ``own_p95_ms``, callers, callees, errors) merged with its
        report (threshold, status, blame, verdict, nodes asked, note). ``bottlenecks``
        lists the blamed services; ``pools`` what latency asks of each pool.
        """
        analysis, stats, at = self._latest
        services: list[dict[str, object]] = []
        edges: list[dict[str, str]] = []
        reports = analysis.services if analysis is not None else {}
        for name in sorted(set(stats) | set(reports)):
            entry: dict[str, object] = {"service": name}
            stat = stats.get(name)
            if stat is not None:
                entry.update(stat.to_dict())
                edges += [{"caller": name, "callee": callee} for callee in stat.callees]
            report = reports.get(name)
            if report is not None:
                entry.update(report.to_dict())
            services.append(entry)
        return {
            "analysed_at": iso_utc(at),
            "window_seconds": self.window.max_age.total_seconds(),
            "services": services,
            "edges": edges,
            "bottlenecks": sorted(n for n, r in reports.items() if r.culprit),
            "pools": analysis.to_dict()["pools"] if analysis is not None else {},
        }

    def adjustment(self, pool: PoolConfig, now: datetime) -> LatencyAdjustment:
        """Return the pool's latest adjustment (the ``Services.latency`` hook; no I/O)."""
        return self._adjustments.get(pool.name, NO_LATENCY)

    def update(self, live: LiveIndex) -> set[str]:
        """Analyse the window now and return the pools whose adjustment changed.

        Args:
            live: the live readings, for each pool's ready nodes and GPU utilisation.

        Raises:
            ConfigError: a service is listed by more than one pool.
        """
        current: dict[str, int] = {}
        util: dict[str, float | None] = {}
        for pool in self._pools:
            latest = live.readings(pool.name).latest
            nodes, busy = latest.get(NODES), latest.get(GPU_UTIL)
            current[pool.name] = 0 if nodes is None else max(0, int(nodes.value))
            util[pool.name] = None if busy is None else busy.value
        with self._lock:
            now = self._clock()
            stats = self.window.stats(now)
            cfg = self._settings or BottleneckSettings()
            result = analyse(
                stats,
                self._pools,
                recent=self.window.recent_stats(now, cfg.recent_window),
                current_nodes=current,
                gpu_util=util,
                baselines=self._baselines,
                now=now,
                settings=cfg,
                services=self._services,
            )
            before = self._adjustments
            changed = {
                pool.name
                for pool in self._pools
                if result.adjustments.get(pool.name, NO_LATENCY)
                != before.get(pool.name, NO_LATENCY)
            }
            self._baselines = result.baselines
            self._latest = _Latest(result, stats, self._stamp())
            self._adjustments = result.adjustments
        return changed


class _Latest(NamedTuple):
    """One analysis and what it read, replaced as a whole so readers need no lock."""

    analysis: LatencyAnalysis | None
    stats: Mapping[str, ServiceStats]
    analysed_at: datetime | None
