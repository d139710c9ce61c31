"""The ingest job on a fake source and a SQLite store: incremental, idempotent, robust."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecaster.exceptions import ConfigError
from forecaster.types import DS, UID, Y
from pipelines.config.settings import Settings
from pipelines.jobs.ingest import backfill, run_ingest
from pipelines.store.store import Store
from tests.pipelines.jobs.job_fakes import POOL, START, STEP, FakeSource, make_settings, synthetic

DEMAND = f"{POOL}/demand_gpus"


def _stored(store: Store) -> pd.DataFrame:
    return store.samples.read()


def _expected_demand(frame: pd.DataFrame) -> pd.Series:
    wide = frame.pivot(index=DS, columns=UID, values=Y)
    return wide[f"{POOL}/allocated_gpus"] + wide[f"{POOL}/queue_gpus"]


def test_first_run_stores_everything_with_demand_then_nothing_new(
    settings: Settings, store: Store
) -> None:
    data = synthetic()
    source = FakeSource(data)
    end = data[DS].max().to_pydatetime()

    first = run_ingest(settings, store=store, source=source, now=end)

    assert first.outcome == "ok", first.summary
    stored = _stored(store)
    assert len(stored) == len(data) + data[DS].nunique()
    demand = stored[stored[UID] == DEMAND].set_index(DS)[Y]
    pd.testing.assert_series_equal(
        demand, _expected_demand(data), check_names=False, check_freq=False
    )
    assert len(source.calls) == 1  # the series share a window: one fetch

    again = run_ingest(settings, store=store, source=source, now=end)
    assert again.outcome == "ok"
    assert again.details.get("rows", 0) == 0
    assert len(_stored(store)) == len(stored)


def test_incremental_run_fetches_after_the_last_sample_and_fills_the_gap(
    settings: Settings, store: Store
) -> None:
    data = synthetic()
    source = FakeSource(data)
    cut = START + pd.Timedelta(days=2)
    run_ingest(settings, store=store, source=source, now=cut.to_pydatetime())
    last = store.samples.last_timestamps()

    end = data[DS].max().to_pydatetime()
    report = run_ingest(settings, store=store, source=source, now=end)

    assert report.outcome == "ok"
    _, start, _ = source.calls[-1]
    assert start > last[f"{POOL}/queue_gpus"]
    assert start - last[f"{POOL}/queue_gpus"] < STEP
    stored = _stored(store)
    assert not stored.duplicated([UID, DS]).any()
    assert len(stored) == len(data) + data[DS].nunique()


def test_backfill_twice_adds_no_duplicates_and_keeps_values(
    settings: Settings, store: Store
) -> None:
    data = synthetic()
    source = FakeSource(data)
    start, end = START.to_pydatetime(), data[DS].max().to_pydatetime()
    first = backfill(settings, start, end, store=store, source=source)
    before = _stored(store)
    second = backfill(settings, start, end, store=store, source=source)
    after = _stored(store)
    assert first.outcome == second.outcome == "ok"
    assert first.job == "backfill"
    pd.testing.assert_frame_equal(before, after)


def test_backfill_rejects_an_empty_window(settings: Settings) -> None:
    start = datetime(2024, 1, 14, tzinfo=UTC)
    with pytest.raises(ConfigError, match="not before"):
        backfill(settings, start, start, source=FakeSource(synthetic()))


def test_bad_data_is_cleaned_or_rejected_per_series_and_others_proceed(
    settings: Settings, store: Store
) -> None:
    data = synthetic()
    util = data[UID] == f"{POOL}/gpu_util"
    queue = data[UID] == f"{POOL}/queue_gpus"
    data.loc[data.index[util][:3], Y] = np.nan
    data.loc[data.index[queue][:2], Y] = -1.0
    repeated = data[queue].iloc[[10]].assign(**{Y: 99.0})
    nodes = data[UID] == f"{POOL}/nodes"
    data.loc[nodes, Y] = np.nan  # every sample bad: the series is rejected
    source = FakeSource(pd.concat([data, repeated], ignore_index=True))

    report = run_ingest(settings, store=store, source=source, now=data[DS].max().to_pydatetime())

    assert report.outcome == "partial"
    assert set(report.problems) == {f"{POOL}/nodes"}
    assert "no storable sample" in report.problems[f"{POOL}/nodes"]
    cleaned = report.details["cleaned"]
    assert "3 NaN" in cleaned[f"{POOL}/gpu_util"]
    assert "2 negative" in cleaned[f"{POOL}/queue_gpus"]
    assert "1 repeated" in cleaned[f"{POOL}/queue_gpus"]
    stored = _stored(store)
    assert np.isfinite(stored[Y]).all()
    assert (stored[Y] >= 0).all()
    queue_rows = stored[stored[UID] == f"{POOL}/queue_gpus"].set_index(DS)[Y]
    assert queue_rows[repeated[DS].iloc[0]] == 99.0  # the last repeated value wins
    assert f"{POOL}/allocated_gpus" in set(stored[UID])


def test_a_vanished_series_is_reported_and_the_others_advance(
    settings: Settings, store: Store
) -> None:
    data = synthetic()
    source = FakeSource(data)
    cut = START + pd.Timedelta(days=2)
    run_ingest(settings, store=store, source=source, now=cut.to_pydatetime())
    gone = f"{POOL}/gpu_util"
    source.frame = data[(data[UID] != gone) | (data[DS] <= cut)]

    report = run_ingest(settings, store=store, source=source, now=data[DS].max().to_pydatetime())

    assert report.outcome == "partial"
    assert list(report.problems) == [gone]
    assert "vanished" in report.problems[gone]
    last = store.samples.last_timestamps()
    assert last[gone] == cut
    assert last[f"{POOL}/queue_gpus"] == data[DS].max()


def test_a_rejected_query_fails_its_series_only(settings: Settings, store: Store) -> None:
    data = synthetic()
    source = FakeSource(data)
    source.rejected = {f"{POOL}/nodes"}

    report = run_ingest(settings, store=store, source=source, now=data[DS].max().to_pydatetime())

    assert report.outcome == "partial"
    assert list(report.problems) == [f"{POOL}/nodes"]
    assert "parse error" in report.problems[f"{POOL}/nodes"]
    assert set(_stored(store)[UID]) == {
        f"{POOL}/{s}" for s in ("queue_gpus", "allocated_gpus", "gpu_util", "demand_gpus")
    }


def test_source_down_fails_cleanly_then_the_next_run_fills_everything(
    settings: Settings, store: Store
) -> None:
    data = synthetic()
    source = FakeSource(data)
    source.down = True
    end = data[DS].max().to_pydatetime()

    failed = run_ingest(settings, store=store, source=source, now=end)

    assert failed.outcome == "failed"
    assert "nothing written" in failed.summary
    assert "connection refused" in failed.summary
    assert len(source.calls) == 3  # the group, then two series alone: enough to tell
    assert _stored(store).empty

    source.down = False
    recovered = run_ingest(settings, store=store, source=source, now=end)
    assert recovered.outcome == "ok"
    assert len(_stored(store)) == len(data) + data[DS].nunique()


def test_source_dying_mid_run_writes_nothing(settings: Settings, store: Store) -> None:
    data = synthetic()
    source = FakeSource(data)
    cut = START + pd.Timedelta(days=1)
    run_ingest(settings, store=store, source=source, now=cut.to_pydatetime())
    before = _stored(store)
    source.rejected = {f"{POOL}/nodes"}  # splits the fetch into series...
    source.fail_after = len(source.calls) + 2  # ...and the source dies after two of them

    report = run_ingest(settings, store=store, source=source, now=data[DS].max().to_pydatetime())

    assert report.outcome == "failed"
    assert "worked earlier in this run" in report.summary
    pd.testing.assert_frame_equal(_stored(store), before)


def test_prometheus_first_run_reaches_back_backfill_days(tmp_path: Path) -> None:

    root = tmp_path
    settings = make_settings(
        root,
        prometheus={"url": "http://127.0.0.1:1", "step": "10min", "backfill_days": 1},
    )
    data = synthetic()
    source = FakeSource(data)
    end = data[DS].max().to_pydatetime()
    queries = {f"{POOL}/allocated_gpus": f"{POOL}/allocated_gpus"}

    report = run_ingest(settings, source=source, queries=queries, now=end)

    assert report.outcome == "ok"
    _, start, stop = source.calls[0]
    assert stop == end
    assert stop - start == timedelta(days=1)
    assert report.details["rows"] == 144 + 1


def test_a_naive_now_is_refused(settings: Settings) -> None:
    with pytest.raises(ValueError, match="naive"):
        run_ingest(settings, source=FakeSource(synthetic()), now=datetime(2025, 3, 2))


def test_a_new_series_the_source_lacks_is_named(settings: Settings, store: Store) -> None:
    data = synthetic()
    queries = {f"{POOL}/nodes": f"{POOL}/nodes", "p2/nodes": "p2/nodes"}

    report = run_ingest(
        settings,
        store=store,
        source=FakeSource(data),
        queries=queries,
        now=data[DS].max().to_pydatetime(),
    )

    assert report.outcome == "partial"
    assert list(report.problems) == ["p2/nodes"]
    assert "has no samples for it" in report.problems["p2/nodes"]
    assert set(_stored(store)[UID]) == {f"{POOL}/nodes"}
