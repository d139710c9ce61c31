"""Readiness of the store for writes: a small heartbeat write, bounded in time (docs/api.md)."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from pipelines.errors import StoreError
from pipelines.store.store import Store

PROBE_KEY: Final = "__readyz_write_probe__"
"""The state key the probe writes; never a pool name."""


@dataclass(frozen=True)
class WriteCheck:
    """Whether the store took a write, and why not."""

    ok: bool
    problem: str = ""


class StoreWriteProbe:
    """Commits a heartbeat row on demand; at most one write in flight.

    Args:
        timeout_s: how long a check waits for the write.
    """

    def __init__(self, store: Store, timeout_s: float = 2.0) -> None:
        self._store = store
        self._timeout = timeout_s
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="store-probe")
        self._pending: Future[None] | None = None
        self._lock = threading.Lock()

    def check(self) -> WriteCheck:
        """Write the heartbeat and report; a write still stuck from before counts as failed."""
        with self._lock:
            if self._pending is not None and not self._pending.done():
                return WriteCheck(False, "an earlier write to the store has not finished yet")
            self._pending = self._executor.submit(self._write)
            pending = self._pending
        try:
            pending.result(timeout=self._timeout)
        except FutureTimeout:
            return WriteCheck(
                False,
                f"a write to the store did not finish within {self._timeout:g} s "
                "(locked by another writer, or the database is stalled)",
            )
        except StoreError as exc:
            return WriteCheck(False, f"the store refused a write: {exc}")
        return WriteCheck(True)

    def close(self) -> None:
        """Stop the worker thread (a write in flight is not waited for)."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _write(self) -> None:
        now = datetime.now(UTC)
        self._store.state.put(PROBE_KEY, {"at": now.isoformat()}, updated_at=now)
