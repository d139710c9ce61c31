"""Leader election on one host: the file lock, the election loop, two real processes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from pipelines.config.settings import Settings
from pipelines.scheduler.election import LeaderElector
from pipelines.scheduler.leader import FileLock, ProcessLock, lock_for
from pipelines.store.store import Store, open_store

pytestmark = pytest.mark.timeout(90)


def _load_worker() -> ModuleType:
    name = "foresight_scheduler_worker"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, Path(__file__).resolve().parent / "scheduler_worker.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


worker = _load_worker()


def test_only_one_holder_of_a_file_lock_until_it_lets_go(tmp_path: Path) -> None:
    first, second = FileLock(tmp_path / "x.lock"), FileLock(tmp_path / "x.lock")
    assert first.try_acquire()
    assert not second.try_acquire()
    assert first.still_held()
    assert not second.still_held()
    first.release()
    assert not first.still_held()
    assert second.try_acquire()
    second.release()


def test_a_replaced_lock_file_is_no_longer_held(tmp_path: Path) -> None:
    lock = FileLock(tmp_path / "x.lock")
    assert lock.try_acquire()
    (tmp_path / "x.lock").unlink()
    # Someone else could now lock a new file at the same path: step down.
    assert not lock.still_held()
    lock.release()


def test_the_lock_fits_the_store(settings: Settings, store: Store) -> None:
    lock = lock_for(store)
    assert isinstance(lock, FileLock)
    assert lock.path == settings.data_dir.resolve() / "foresight.db.scheduler.lock"
    with open_store("sqlite:///:memory:") as memory:
        assert isinstance(lock_for(memory), ProcessLock)


class _FlakyLock(ProcessLock):
    """A lock the test can take away."""

    def __init__(self) -> None:
        super().__init__()
        self.lost = False
        self.releases = 0

    def try_acquire(self) -> bool:
        return not self.lost and super().try_acquire()

    def still_held(self) -> bool:
        return not self.lost and super().still_held()

    def release(self) -> None:
        self.releases += 1
        super().release()


def test_losing_the_lock_demotes_before_anything_else() -> None:
    events: list[str] = []
    lock = _FlakyLock()
    elector = LeaderElector(
        lock, lambda: events.append("elected"), lambda: events.append("demoted"), poll_seconds=1
    )
    elector.poll_once()
    assert elector.is_leader
    lock.lost = True
    elector.poll_once()
    assert not elector.is_leader
    assert events == ["elected", "demoted"]
    assert lock.releases == 1
    elector.poll_once()  # the lock is gone: stays a follower
    assert events == ["elected", "demoted"]


def test_a_failed_start_lets_the_lock_go_and_tries_again() -> None:
    attempts: list[int] = []
    lock = _FlakyLock()

    def elected() -> None:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("database down")

    elector = LeaderElector(lock, elected, lambda: None, poll_seconds=1)
    elector.poll_once()
    assert not elector.is_leader
    assert lock.releases == 1
    elector.poll_once()
    assert elector.is_leader


@pytest.mark.slow
def test_two_processes_on_one_sqlite_store_only_one_runs_jobs_and_the_other_takes_over(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'data' / 'foresight.db'}"
    worker.prepare(url)  # migrate and create the table once, before the replicas race to
    replicas = [worker.Replica(url, tmp_path, tmp_path / f"{name}.log") for name in "ab"]
    try:
        worker.check_takeover(url, replicas)
    finally:
        for replica in replicas:
            replica.close()
