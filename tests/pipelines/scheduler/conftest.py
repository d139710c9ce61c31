"""Fixtures of the scheduler tests: a SQLite store in tmp_path and a scripted job runner."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pipelines.config.settings import Settings, load_settings
from pipelines.jobs.report import JobReport, Outcome
from pipelines.store.store import Store, open_store


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(root=tmp_path, scheduler={"misfire_grace_seconds": 42})


@pytest.fixture
def store(settings: Settings) -> Iterator[Store]:
    with open_store(settings.store_url) as opened:
        yield opened


@dataclass
class FakeRunner:
    """Runs jobs instantly (or slowly) with scripted outcomes and records every call."""

    outcomes: Mapping[str, Outcome] = field(default_factory=dict)
    details: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    raises: Mapping[str, Exception] = field(default_factory=dict)
    seconds: float = 0.0
    calls: list[str] = field(default_factory=list)
    active: int = 0
    most_active: int = 0
    release: threading.Event | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, name: str, settings: Settings) -> JobReport:
        started = datetime.now(UTC)
        with self._lock:
            self.calls.append(name)
            self.active += 1
            self.most_active = max(self.most_active, self.active)
        try:
            if self.release is not None:
                self.release.wait(10)
            if self.seconds:
                time.sleep(self.seconds)
            if name in self.raises:
                raise self.raises[name]
            return JobReport(
                job=name,
                outcome=self.outcomes.get(name, "ok"),
                summary=f"{name} done",
                started_at=started,
                finished_at=datetime.now(UTC),
                problems={"pool/x": "vanished"} if self.outcomes.get(name) == "partial" else {},
                details=dict(self.details.get(name, {})),
            )
        finally:
            with self._lock:
                self.active -= 1

    def count(self, name: str) -> int:
        with self._lock:
            return self.calls.count(name)


@pytest.fixture
def runner() -> FakeRunner:
    return FakeRunner()


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll ``condition`` every 20 ms until it holds or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


@pytest.fixture
def make_runner() -> type[FakeRunner]:
    return FakeRunner


@pytest.fixture(name="wait_until")
def wait_until_fixture() -> Callable[..., bool]:
    return wait_until
