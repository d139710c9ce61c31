"""The mixed scenario's bookkeeping: distinct pushes, their numbering, and the store check."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.api_client import Records
from benchmarks.api_mixed import lost_samples
from benchmarks.api_mixed_load import (
    BATCH,
    WRITERS,
    batch,
    phase_summary,
    push_streams,
    read_streams,
)
from pipelines.store.store import open_store

END = datetime(2025, 3, 31, tzinfo=UTC)
POOLS = [f"pool-{i:03d}" for i in range(100)]


def test_every_push_of_every_writer_and_phase_writes_its_own_samples() -> None:
    keys = [
        (sample["series_id"], sample["ts"])
        for writer in range(WRITERS)
        for push in range(60)
        for sample in batch(POOLS, writer, push, END)
    ]

    assert len(keys) == WRITERS * 60 * BATCH
    assert len(set(keys)) == len(keys)


def test_pushes_are_numbered_from_where_the_last_phase_stopped() -> None:
    streams = push_streams(POOLS, rate=4.0, seconds=3.0, first=10, end=END)

    assert [s.count for s in streams] == [3] * WRITERS
    first_body = streams[2].requests[0].split(b"\r\n\r\n", 1)[1]
    assert json.loads(first_body) == batch(POOLS, 2, 10, END)
    reads = read_streams("full-set", POOLS, rate=10.0, seconds=3.0, connections=1)
    records = {s.name: Records(s.due()) for s in [*reads, *streams]}
    for found in records.values():
        found.status[:] = 200
        found.done[:] = found.sent[:] = found.intended
    records["push-1"].status[1] = 422

    found = phase_summary(records, measured_from=0.0, first_push=10)

    statuses = found["push_statuses"]
    assert [push for writer, push, _ in statuses if writer == 0] == [10, 11, 12]
    assert [1, 11, 422] in statuses
    assert len(statuses) == 3 * WRITERS
    assert (found["reads"]["requests"], found["pushes"]["errors"]) == (30, 1)


def test_per_pool_reads_take_both_forms_and_every_pool_in_turn() -> None:
    streams = read_streams("per-pool", POOLS, rate=1000.0, seconds=2.0, connections=32)

    assert [s.name for s in streams] == ["per-pool-path", "per-pool-query"]
    assert sum(s.count for s in streams) == 2000
    assert streams[0].requests[7] == b"GET /recommendation/pool-007 HTTP/1.1\r\nHost: bench\r\n\r\n"
    assert streams[1].requests[7].startswith(b"GET /recommendation?pool=pool-007 ")
    # Interleaved: path, query, path, query... at 1 ms apart in all.
    due = np.sort(np.concatenate([s.due() for s in streams]))
    np.testing.assert_allclose(np.diff(due[:10]), 0.001)


def _store_pushes(workdir: Path, pushes: list[tuple[int, int]]) -> None:
    with open_store(f"sqlite:///{workdir / 'store.db'}") as store:
        for writer, push in pushes:
            samples = batch(POOLS, writer, push, END)
            store.samples.upsert_with_demand(
                pd.DataFrame(
                    {
                        "unique_id": [s["series_id"] for s in samples],
                        "ds": pd.to_datetime([s["ts"] for s in samples], utc=True),
                        "y": [s["value"] for s in samples],
                    }
                )
            )


def test_the_store_check_finds_missing_and_changed_samples(tmp_path: Path) -> None:
    _store_pushes(tmp_path, [(0, 0), (1, 0), (0, 1)])
    statuses = [[0, 0, 200], [1, 0, 200], [0, 1, 200], [2, 0, 422]]

    clean = lost_samples(tmp_path, POOLS, statuses, END)

    assert clean == {
        "pushed_samples": 3 * BATCH,
        "rejected_pushes": 1,
        "missing": 0,
        "changed": 0,
        "wrong_demand_rows": 0,
    }

    # An accepted push that never reached the store, and one sample overwritten.
    wrong = batch(POOLS, 1, 0, END)[1]
    with open_store(f"sqlite:///{tmp_path / 'store.db'}") as store:
        store.samples.upsert(
            pd.DataFrame(
                {
                    "unique_id": [wrong["series_id"]],
                    "ds": pd.to_datetime([wrong["ts"]], utc=True),
                    "y": [wrong["value"] + 1],
                }
            )
        )
    found = lost_samples(tmp_path, POOLS, [*statuses, [3, 0, 200]], END)

    assert found["missing"] == BATCH
    assert found["changed"] == 1
    # The lost push's 25 pools have no demand row at its time.
    assert found["wrong_demand_rows"] == BATCH // 4

    # A demand row that is not allocated + queued.
    with open_store(f"sqlite:///{tmp_path / 'store.db'}") as store:
        store.samples.upsert(
            pd.DataFrame(
                {
                    "unique_id": ["pool-000/demand_gpus"],
                    "ds": pd.to_datetime([batch(POOLS, 0, 0, END)[0]["ts"]], utc=True),
                    "y": [-1.0],
                }
            )
        )
    assert lost_samples(tmp_path, POOLS, statuses, END)["wrong_demand_rows"] == 1
