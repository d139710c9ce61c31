"""Fixtures of the job tests: quick settings under tmp_path and their SQLite store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pipelines.config.settings import Settings
from pipelines.store.store import Store, open_store
from tests.pipelines.jobs.job_fakes import make_settings


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path)


@pytest.fixture
def store(settings: Settings) -> Iterator[Store]:
    with open_store(settings.store_url) as opened:
        yield opened
