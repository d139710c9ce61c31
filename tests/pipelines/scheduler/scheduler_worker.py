"""A scheduler replica for the multi-process tests: run as a script, not collected.

``python scheduler_worker.py STORE_URL ROOT`` joins the leader election on the store
and, while it leads, runs one job every 0.5 s that records its own pid in the table
``worker_runs``; SIGTERM stops it cleanly (exit code 0). Leadership changes are
printed (``LEADER <pid>``) so a test can wait for them. Tests import this file (by
path) for :func:`prepare`, :class:`Replica` and :func:`runs_by_pid`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import Any

from sqlalchemy import (
    URL,
    Column,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    create_engine,
    inspect,
    select,
)

from pipelines.config.settings import Settings, load_settings
from pipelines.scheduler.plan import ScheduledJob, every
from pipelines.scheduler.service import start_scheduler
from pipelines.store.store import open_store

RUNS = Table(
    "worker_runs",
    MetaData(),
    Column("pid", Integer, nullable=False),
    Column("job", String(50), nullable=False),
    Column("at", Float, nullable=False),
)
INTERVAL = timedelta(seconds=0.5)
POLL_SECONDS = 0.5


@dataclass(frozen=True)
class Report:
    """What the scheduler reads of a ``JobReport``; importing ``pipelines.jobs`` (MLflow,
    models) would make every replica start seconds slower."""

    job: str
    outcome: str
    summary: str
    started_at: datetime
    finished_at: datetime
    problems: dict[str, str] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)


def main(store_url: str, root: str) -> int:
    settings = load_settings(root=Path(root), store_url=store_url)
    store = open_store(settings.store_url)
    engine = create_engine(store.engine.url)

    def runner(name: str, _settings: Settings) -> Any:
        started = datetime.now(UTC)
        with engine.begin() as connection:
            connection.execute(RUNS.insert().values(pid=os.getpid(), job=name, at=time.time()))
        return Report(name, "ok", f"pid {os.getpid()}", started, datetime.now(UTC))

    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    plan = [ScheduledJob("ingest", every(INTERVAL))]
    running = start_scheduler(settings, store, plan=plan, runner=runner, poll_seconds=POLL_SECONDS)
    print(f"STARTED {os.getpid()}", flush=True)
    announced = False
    while not stop.wait(0.1):
        if running.is_leader and not announced:
            print(f"LEADER {os.getpid()}", flush=True)
            announced = True
    running.stop()
    store.close()
    engine.dispose()
    print(f"STOPPED {os.getpid()}", flush=True)
    return 0


class Replica:
    """One worker process; its output goes to a log file the test can show."""

    def __init__(self, store_url: str | URL, root: Path, log: Path) -> None:
        url = store_url if isinstance(store_url, str) else store_url.render_as_string(False)
        self.log = log
        self._output = log.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), url, str(root)],
            stdout=self._output,
            stderr=subprocess.STDOUT,
            cwd=Path(__file__).resolve().parents[3],
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, line: str, timeout: float) -> bool:
        """Wait until the worker printed ``line`` (or died, or the timeout passed)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if line in self.output():
                return True
            if self.process.poll() is not None:
                return line in self.output()
            time.sleep(0.05)
        return False

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(10)

    def terminate(self, timeout: float = 15.0) -> int:
        """SIGTERM and wait; return the exit code."""
        if self.process.poll() is None:
            self.process.terminate()
        try:
            return self.process.wait(timeout)
        finally:
            self._output.close()

    def close(self) -> None:
        if self.process.poll() is None:
            self.kill()
        self._output.close()


def prepare(store_url: str | URL) -> None:
    """Migrate the store and create ``worker_runs`` once, before replicas start.

    Two replicas creating either at once race (PostgreSQL's catalogue rejects the
    second ``CREATE TABLE`` even with ``checkfirst``), so the test does it first.
    """
    open_store(store_url).close()
    engine = create_engine(store_url)
    try:
        RUNS.create(engine, checkfirst=True)
    finally:
        engine.dispose()


def runs_by_pid(store_url: str | URL) -> dict[int, list[float]]:
    """The times each worker pid ran its job, from ``worker_runs``."""
    engine = create_engine(store_url)
    try:
        with engine.connect() as connection:
            if not inspect(connection).has_table(RUNS.name):
                return {}
            rows = connection.execute(select(RUNS.c.pid, RUNS.c.at).order_by(RUNS.c.at)).all()
    finally:
        engine.dispose()
    runs: dict[int, list[float]] = {}
    for pid, at in rows:
        runs.setdefault(int(pid), []).append(float(at))
    return runs


def check_takeover(store_url: str | URL, replicas: list[Replica]) -> None:
    """Assert that of two replicas only one runs jobs, and the other takes over its death.

    Both are started together (their start-up is the slow part); the test then waits
    for one to lead, checks that the follower never runs a job, SIGKILLs the leader and
    checks that the follower leads and runs the job within a few seconds.
    """
    first, second = replicas
    assert first.wait_for("STARTED", 60), first.output()
    assert second.wait_for("STARTED", 60), second.output()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any("LEADER" in r.output() for r in replicas):
        time.sleep(0.05)
    leaders = [replica for replica in replicas if "LEADER" in replica.output()]
    assert len(leaders) == 1, [replica.output() for replica in replicas]
    [leader] = leaders
    follower = second if leader is first else first
    time.sleep(2.0)  # four polls of the follower and four job intervals
    runs = runs_by_pid(store_url)
    assert set(runs) == {leader.pid}, (leader.output(), follower.output())
    assert len(runs[leader.pid]) >= 3
    assert "LEADER" not in follower.output()

    leader.kill()
    killed_at = time.time()
    assert follower.wait_for("LEADER", 15), follower.output()
    deadline = time.monotonic() + 10
    while follower.pid not in runs_by_pid(store_url) and time.monotonic() < deadline:
        time.sleep(0.1)
    runs = runs_by_pid(store_url)
    assert follower.pid in runs, follower.output()
    assert runs[follower.pid][0] - killed_at < 5.0
    assert max(runs[leader.pid]) <= killed_at
    assert follower.terminate() == 0, follower.output()
    assert "STOPPED" in follower.output()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
