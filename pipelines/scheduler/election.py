"""The leader election loop: poll a :class:`LeaderLock`, lead while it is held.

Details: docs/scheduler.md, "Notes from the code", `pipelines/scheduler/election.py`."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from pipelines.scheduler.leader import LeaderLock

logger = logging.getLogger(__name__)


class LeaderElector:
    """Runs ``on_elected`` when this process becomes leader and ``on_demoted`` when not.

    Args:
        on_elected: starts leading (the scheduler); if it raises, the lock is let go
            and the election tried again at the next poll.
        on_demoted: stops leading; called before the lock is released.
        poll_seconds: how often followers try the lock and the leader checks it.
    """

    def __init__(
        self,
        lock: LeaderLock,
        on_elected: Callable[[], None],
        on_demoted: Callable[[], None],
        *,
        poll_seconds: float = 5.0,
    ) -> None:
        if poll_seconds <= 0:
            raise ValueError(f"poll_seconds must be positive, got {poll_seconds}")
        self._lock = lock
        self._on_elected = on_elected
        self._on_demoted = on_demoted
        self._poll = poll_seconds
        self._stop = threading.Event()
        self._leading = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def is_leader(self) -> bool:
        """Whether this process leads right now."""
        return self._leading.is_set()

    def wait_until_leader(self, timeout: float | None = None) -> bool:
        """Block until this process leads (or the timeout passes); True if it leads."""
        return self._leading.wait(timeout)

    def start(self) -> None:
        """Start polling in a daemon thread; the first attempt happens at once."""
        if self._thread is not None:
            raise RuntimeError("the leader election is already running")
        self._thread = threading.Thread(
            target=self._run, name="foresight-leader-election", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stop polling and step down if leading (waits for ``on_demoted``)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def poll_once(self) -> None:
        """One round of the loop: try to lead, or check that leading is still safe."""
        if self._leading.is_set():
            if not self._lock.still_held():
                logger.warning("lost the %s: stepping down", self._lock.description)
                self._step_down()
            return
        if not self._lock.try_acquire():
            return
        logger.info("took the %s: leading the scheduler", self._lock.description)
        try:
            self._on_elected()
        except Exception:
            logger.exception("could not start leading; releasing the lock and retrying")
            self._lock.release()
            return
        self._leading.set()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    self.poll_once()
                except Exception:  # a bug in a callback must not end the election
                    logger.exception("leader election round failed")
                self._stop.wait(self._poll)
        finally:
            if self._leading.is_set():
                logger.info("stopping: stepping down as scheduler leader")
                self._step_down()
            self._lock.release()

    def _step_down(self) -> None:
        self._leading.clear()
        try:
            self._on_demoted()
        except Exception:
            logger.exception("stepping down failed; releasing the lock anyway")
        finally:
            self._lock.release()
