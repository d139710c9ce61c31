"""/readyz: the store must take writes (#13, 12) and no reading may be from the future (1)."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

import pandas as pd
from fastapi.testclient import TestClient

from api.store_probe import PROBE_KEY
from pipelines.store.store import Store


def test_ready_reports_the_write_check(client: TestClient, store: Store) -> None:
    body = client.get("/readyz").json()

    assert body["checks"]["store_write"] == {"ok": True}
    assert store.state.get(PROBE_KEY) is not None


def test_a_locked_store_is_not_ready_and_the_probe_answers_quickly(
    client: TestClient, store: Store
) -> None:
    path = store.url.removeprefix("sqlite:///")
    locker = sqlite3.connect(path, timeout=0.1, isolation_level=None)
    try:
        locker.execute("BEGIN EXCLUSIVE")
        started = time.monotonic()
        response = client.get("/readyz")
        took = time.monotonic() - started
    finally:
        locker.execute("ROLLBACK")
        locker.close()

    assert response.status_code == 503
    body = response.json()
    assert body["checks"]["store_write"]["ok"] is False
    assert any("the store is not writable" in reason for reason in body["reasons"])
    assert took < 10.0


def test_a_reading_from_the_future_is_not_fresh(
    make_services: Any, make_app: Any, store: Store
) -> None:
    # Written by another writer than the push API (which refuses it).
    store.samples.upsert(
        pd.DataFrame(
            {
                "unique_id": ["alpha/nodes"],
                "ds": [pd.Timestamp("2262-04-01", tz="UTC")],
                "y": [0.0],
            }
        )
    )
    with TestClient(make_app(make_services())) as client:
        response = client.get("/readyz")

    assert response.status_code == 503
    assert "alpha (" in response.json()["reasons"][-1]
    assert "s in the future" in response.json()["reasons"][-1]
