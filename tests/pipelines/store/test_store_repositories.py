"""The store's repositories on SQLite (the same contract runs on PostgreSQL in integration)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from pipelines.store.store import Store, open_store


def _load_contract() -> ModuleType:
    # tests/ is not a package (importlib import mode), so load the shared module by path.
    name = "foresight_store_contract"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, Path(__file__).with_name("store_contract.py")
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


contract = _load_contract()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(f"sqlite:///{tmp_path / 'store' / 'foresight.db'}") as opened:
        yield opened


class TestSamplesSqlite(contract.SamplesContract):
    pass


class TestForecastsSqlite(contract.ForecastsContract):
    pass


class TestRecommendationsSqlite(contract.RecommendationsContract):
    pass


class TestStateSqlite(contract.StateContract):
    pass


class TestOutboxSqlite(contract.OutboxContract):
    pass
