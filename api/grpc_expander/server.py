"""cluster-autoscaler's gRPC expander, served by Foresight over TLS (docs/consumers.md)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import grpc  # type: ignore[import-untyped]

from api.grpc_expander.choice import Choice, ExpanderView, choose
from api.grpc_expander.protos import expander_pb2, expander_pb2_grpc
from api.settings import ExpanderReactive
from forecaster.exceptions import ConfigError

logger = logging.getLogger(__name__)

RankingSource = Callable[[], ExpanderView]
"""Returns Foresight's pools in priority order, from the freshest recommendations, with
the live ConfigMap's hand-made tiers."""

METHOD: Final = "/grpcplugin.Expander/BestOptions"
"""The full method path cluster-autoscaler calls."""

_DEADLINE_MARGIN_S: Final = 0.05
"""Kept back from the caller's deadline, to send the answer in time."""


class BudgetedRanking:
    """A ranking source asked with a time budget; one computation in flight at a time.

    Concurrent callers share the computation in flight. One that outlives the budget
    goes on in the background and its result serves the next call.

    Args:
        source: computes the ranking (may take long: a recomputation fits forecasts).
    """

    def __init__(self, source: RankingSource) -> None:
        self._source = source
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="expander-ranking")
        self._lock = threading.Lock()
        self._pending: Future[ExpanderView] | None = None
        self._last: ExpanderView | None = None

    def _compute(self) -> ExpanderView:
        view = self._source()
        self._last = view
        return view

    def get(self, budget_s: float) -> tuple[ExpanderView | None, str]:
        """Return the ranking (fresh, else the last one, else None) and where it came from."""
        with self._lock:
            if self._pending is None or self._pending.done():
                self._pending = self._executor.submit(self._compute)
            pending = self._pending
        try:
            return pending.result(timeout=max(budget_s, 0.0)), "fresh"
        except FutureTimeout:
            return self._last, f"no fresh ranking within {budget_s:.3f} s"
        # Whatever failed (the store, a bug), cluster-autoscaler must still get an answer.
        except Exception as exc:
            logger.exception("gRPC expander: ranking failed")
            return self._last, f"ranking failed: {type(exc).__name__}: {exc}"

    def close(self) -> None:
        """Stop the worker (a computation in flight finishes in the background)."""
        self._executor.shutdown(wait=False, cancel_futures=True)


class ExpanderServicer:
    """``BestOptions``: the offered options Foresight prefers, or all of them.

    Args:
        budget_s: the most a call waits for a fresh ranking (less when the caller's
            deadline is nearer).
        reactive: what to answer when an offered pool has no trusted forecast.
    """

    def __init__(
        self,
        ranking: BudgetedRanking,
        budget_s: float,
        reactive: ExpanderReactive = "no_opinion",
    ) -> None:
        self._ranking = ranking
        self._budget_s = budget_s
        self._reactive: ExpanderReactive = reactive

    def BestOptions(  # noqa: N802 (the protocol's method name)
        self, request: expander_pb2.BestOptionsRequest, context: Any
    ) -> expander_pb2.BestOptionsResponse:
        """Answer one call; the rule is in docs/consumers.md."""
        started = time.perf_counter()
        options = list(request.options)
        if not options:
            return expander_pb2.BestOptionsResponse()
        for index, option in enumerate(options):
            if not option.nodeGroupId:
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT, f"options[{index}] has no nodeGroupId"
                )
        budget = self._budget_s
        remaining = context.time_remaining()
        if remaining is not None:
            budget = min(budget, remaining - _DEADLINE_MARGIN_S)
        view, source = self._ranking.get(budget)
        offered = [option.nodeGroupId for option in options]
        if view is None:
            choice = Choice(tuple(offered), "no_opinion", f"no ranking yet ({source})")
        else:
            choice = choose(offered, view, self._reactive)
        keep = set(choice.node_group_ids)
        logger.debug(
            "gRPC expander: %s, %s (%s) in %.1f ms",
            choice.basis,
            choice.reason,
            source,
            1000 * (time.perf_counter() - started),
        )
        return expander_pb2.BestOptionsResponse(
            options=[
                expander_pb2.Option(nodeGroupId=o.nodeGroupId, nodeCount=o.nodeCount)
                for o in options
                if o.nodeGroupId in keep
            ]
        )


@dataclass(frozen=True)
class ExpanderTLS:
    """The server's certificate and key, PEM.

    Attributes:
        certificate: the certificate chain; its names must include the host
            cluster-autoscaler dials (``--grpc-expander-url``).
    """

    certificate: bytes
    private_key: bytes

    @classmethod
    def from_files(cls, cert_file: Path | None, key_file: Path | None) -> ExpanderTLS:
        """Read both files.

        Raises:
            ConfigError: one is unset or unreadable (cluster-autoscaler dials TLS only).
        """
        if cert_file is None or key_file is None:
            raise ConfigError(
                "publish.grpc_expander_address is set but publish.grpc_expander_cert or "
                "publish.grpc_expander_key is not: cluster-autoscaler's gRPC expander only "
                "dials TLS; set both (FORESIGHT_PUBLISH__GRPC_EXPANDER_CERT / _KEY)"
            )
        try:
            return cls(cert_file.read_bytes(), key_file.read_bytes())
        except OSError as exc:
            raise ConfigError(f"cannot read the gRPC expander's certificate or key: {exc}") from exc


class RunningExpander:
    """A started gRPC expander server; :meth:`stop` it."""

    def __init__(
        self,
        server: Any,
        port: int,
        ranking: BudgetedRanking,
        cleanup: Callable[[], None] = lambda: None,
    ) -> None:
        self._server = server
        self.port = port
        self._ranking = ranking
        self._cleanup = cleanup

    def stop(self, grace_s: float = 1.0) -> None:
        """Stop accepting calls, let those in progress finish for ``grace_s``."""
        self._server.stop(grace_s).wait()
        self._ranking.close()
        self._cleanup()


def start_expander(
    address: str,
    tls: ExpanderTLS,
    source: RankingSource,
    *,
    budget_s: float = 1.0,
    workers: int = 4,
    reactive: ExpanderReactive = "no_opinion",
    cleanup: Callable[[], None] = lambda: None,
) -> RunningExpander:
    """Serve ``BestOptions`` over TLS on ``address`` (``host:port``; port 0 picks one).

    ``cleanup`` runs when the server stops (it closes what ``source`` uses).

    Raises:
        ConfigError: the address cannot be bound or the certificate and key are unusable.
    """
    ranking = BudgetedRanking(source)
    server = grpc.server(ThreadPoolExecutor(max_workers=workers, thread_name_prefix="expander"))
    servicer = ExpanderServicer(ranking, budget_s, reactive)
    expander_pb2_grpc.add_ExpanderServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
    try:
        credentials = grpc.ssl_server_credentials([(tls.private_key, tls.certificate)])
        port = server.add_secure_port(address, credentials)
    except (RuntimeError, ValueError) as exc:
        ranking.close()
        cleanup()
        raise ConfigError(
            f"cannot serve the gRPC expander on {address}: {exc}; check "
            "publish.grpc_expander_address and the certificate and key"
        ) from exc
    if not port:
        ranking.close()
        cleanup()
        raise ConfigError(
            f"cannot bind the gRPC expander to {address}; check publish.grpc_expander_address"
        )
    server.start()
    logger.info("gRPC expander serving %s on %s (TLS)", METHOD, address)
    return RunningExpander(server, int(port), ranking, cleanup)
