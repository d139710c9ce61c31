"""Behaviour every store backend must show, written once for SQLite and PostgreSQL.

Not collected by itself (no ``test_`` prefix): ``test_store_repositories.py`` runs it
against SQLite and ``tests/integration/test_store_postgres.py`` against PostgreSQL,
each providing a ``store`` fixture with an empty, migrated store.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import event
from sqlalchemy.exc import OperationalError

from forecaster.exceptions import DataValidationError
from pipelines.errors import StoreError
from pipelines.store.outbox import Backoff
from pipelines.store.store import Store
from tests.pipelines.store.outbox_reads import stored_item

T0 = datetime(2024, 3, 1, tzinfo=UTC)
STEP = pd.Timedelta(minutes=5)


def window(uid: str, start: datetime, periods: int, offset: float = 0.0) -> pd.DataFrame:
    """A long frame of one series at a 5-min step with values offset + 0, 1, 2..."""
    return pd.DataFrame(
        {
            "unique_id": uid,
            "ds": pd.date_range(start, periods=periods, freq=STEP),
            "y": offset + np.arange(periods, dtype=np.float64),
        }
    )


class Worker:
    """A thread that runs one call and keeps its exception (threads swallow them).

    Given the barrier its call waits on, a failure breaks it, so the other workers stop
    waiting for this one.
    """

    def __init__(
        self, call: Callable[[], object], barrier: threading.Barrier | None = None
    ) -> None:
        self.errors: list[BaseException] = []
        self.finished = threading.Event()
        self._call = call
        self._barrier = barrier
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Worker:
        self._thread.start()
        return self

    def join(self, timeout: float) -> None:
        join_all([self], timeout)

    def _run(self) -> None:
        try:
            self._call()
        except BaseException as exc:
            self.errors.append(exc)
            if self._barrier is not None:
                self._barrier.abort()
        finally:
            self.finished.set()


def join_all(workers: list[Worker], timeout: float) -> None:
    """Wait for every worker; fail with their errors, the cause before broken barriers."""
    for worker in workers:
        worker._thread.join(timeout)
    assert not any(worker._thread.is_alive() for worker in workers), "a worker is stuck"
    errors = [error for worker in workers for error in worker.errors]
    errors.sort(key=lambda error: isinstance(error, threading.BrokenBarrierError))
    assert errors == [], errors


def _mentions(parameters: object, suffix: str) -> bool:
    if isinstance(parameters, str):
        return parameters.endswith(suffix)
    if isinstance(parameters, dict):
        return any(_mentions(value, suffix) for value in parameters.values())
    if isinstance(parameters, list | tuple):
        return any(_mentions(value, suffix) for value in parameters)
    return False


@contextmanager
def hold_first_write_of(
    store: Store, series_id: str
) -> Iterator[tuple[threading.Event, threading.Event]]:
    """Hold the first statement that writes ``series_id`` until released.

    Yields ``(reached, release)``: ``reached`` is set when the writer is held (its
    thread waits on ``release``); later writes pass. A SQLAlchemy cursor event on the
    store's engine, so the store's own code runs unchanged.
    """
    reached, release = threading.Event(), threading.Event()

    def hold(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if reached.is_set() or not statement.lstrip().upper().startswith("INSERT"):
            return
        if _mentions(parameters, series_id):
            reached.set()
            release.wait(60)

    event.listen(store.engine, "before_cursor_execute", hold)
    try:
        yield reached, release
    finally:
        release.set()
        event.remove(store.engine, "before_cursor_execute", hold)


@contextmanager
def fail_writes_of(store: Store, series_id: str) -> Iterator[None]:
    """Make every statement that writes ``series_id`` fail as a full disk would."""

    def fail(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT") and _mentions(parameters, series_id):
            raise OperationalError(statement, parameters, RuntimeError("disk full"))

    event.listen(store.engine, "before_cursor_execute", fail)
    try:
        yield
    finally:
        event.remove(store.engine, "before_cursor_execute", fail)


def save_forecast(
    store: Store, frame: pd.DataFrame, model_version: str, generated_at: datetime
) -> int:
    """Store a forecast frame as a run of its own (no peaks); return the rows stored."""
    stored = store.forecast_runs.commit(
        frame, None, model_version=model_version, generated_at=generated_at, step=STEP
    )
    return stored.rows


def forecast_frame(uid: str, start: datetime, h: int, level: float = 10.0) -> pd.DataFrame:
    """A forecast frame as Forecaster.predict returns it."""
    mean = level + np.arange(h, dtype=np.float64)
    return pd.DataFrame(
        {
            "unique_id": uid,
            "ds": pd.date_range(start, periods=h, freq=STEP),
            "step": np.arange(1, h + 1),
            "model": "SeasonalNaive",
            "mean": mean,
            "q0.5": mean,
            "q0.9": mean + 2.0,
        }
    )


class SamplesContract:
    def test_writing_the_same_window_twice_stores_it_once(self, store: Store) -> None:
        frame = pd.concat([window("a/queue_gpus", T0, 12), window("b/nodes", T0, 6, 100.0)])
        assert store.samples.upsert(frame) == 18
        first = store.samples.read()
        assert store.samples.upsert(frame) == 18
        second = store.samples.read()
        pd.testing.assert_frame_equal(first, second)
        assert len(second) == 18
        expected = frame.sort_values(["unique_id", "ds"]).reset_index(drop=True)
        pd.testing.assert_frame_equal(second, expected, check_dtype=False)
        assert str(second["ds"].dtype) == "datetime64[ns, UTC]"

    def test_an_overlapping_window_updates_values_and_adds_new_rows(self, store: Store) -> None:
        store.samples.upsert(window("a/q", T0, 10))
        later = window("a/q", T0 + 5 * STEP, 10, offset=50.0)
        store.samples.upsert(later)
        stored = store.samples.read(["a/q"])
        assert len(stored) == 15
        assert stored["y"].iloc[:5].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
        assert stored["y"].iloc[5:].tolist() == later["y"].tolist()

    def test_a_repeated_timestamp_in_one_frame_keeps_the_last_value(self, store: Store) -> None:
        frame = pd.concat([window("a/q", T0, 3), window("a/q", T0, 1, offset=9.0)])
        assert store.samples.upsert(frame) == 3
        assert store.samples.read()["y"].tolist() == [9.0, 1.0, 2.0]

    def test_other_timezones_are_stored_as_the_same_utc_instant(self, store: Store) -> None:
        frame = window("a/q", T0, 4)
        frame["ds"] = frame["ds"].dt.tz_convert("Europe/Berlin")
        store.samples.upsert(frame)
        stored = store.samples.read()
        assert stored["ds"].tolist() == pd.date_range(T0, periods=4, freq=STEP).tolist()
        assert str(stored["ds"].dt.tz) == "UTC"

    def test_last_timestamp(self, store: Store) -> None:
        assert store.samples.last_timestamp("a/q") is None
        store.samples.upsert(pd.concat([window("a/q", T0, 7), window("b/q", T0, 3)]))
        assert store.samples.last_timestamp("a/q") == pd.Timestamp(T0) + 6 * STEP
        assert store.samples.last_timestamps() == {
            "a/q": pd.Timestamp(T0) + 6 * STEP,
            "b/q": pd.Timestamp(T0) + 2 * STEP,
        }
        assert store.samples.last_timestamps(["b/q", "c/q"]) == {"b/q": pd.Timestamp(T0) + 2 * STEP}

    def test_read_filters_series_and_a_half_open_time_range(self, store: Store) -> None:
        store.samples.upsert(pd.concat([window("a/q", T0, 10), window("b/q", T0, 10)]))
        start, end = T0 + 2 * STEP, T0 + 5 * STEP
        got = store.samples.read(["b/q"], start=start, end=end)
        assert got["unique_id"].unique().tolist() == ["b/q"]
        assert got["ds"].tolist() == pd.date_range(start, periods=3, freq=STEP).tolist()
        assert len(store.samples.read(start=T0 + 8 * STEP)) == 4
        assert len(store.samples.read(end=T0 + STEP)) == 2

    def test_latest_is_the_newest_sample_per_series_within_the_start(self, store: Store) -> None:
        store.samples.upsert(pd.concat([window("a/q", T0, 7), window("b/q", T0, 3, offset=100.0)]))
        got = store.samples.latest(["a/q", "b/q", "c/q"])
        expected = pd.concat([window("a/q", T0, 7).tail(1), window("b/q", T0, 3, 100.0).tail(1)])
        assert got["unique_id"].tolist() == ["a/q", "b/q"]
        assert got["ds"].tolist() == expected["ds"].tolist()
        assert got["y"].tolist() == expected["y"].tolist()
        later = store.samples.latest(["a/q", "b/q"], start=T0 + 4 * STEP)
        assert later["unique_id"].tolist() == ["a/q"]

    def test_demand_is_derived_where_a_part_is_written_from_the_stored_partner(
        self, store: Store
    ) -> None:
        store.samples.upsert_with_demand(window("a/allocated_gpus", T0, 3, offset=10.0))
        # Only allocated so far: no demand yet (a missing part never counts as zero).
        assert store.samples.read(["a/demand_gpus"]).empty
        written = store.samples.upsert_with_demand(
            pd.concat([window("a/queue_gpus", T0 + STEP, 2, offset=1.0), window("a/nodes", T0, 1)])
        )
        assert written == 3 + 2
        demand = store.samples.read(["a/demand_gpus"])
        assert demand["ds"].tolist() == [pd.Timestamp(T0 + STEP), pd.Timestamp(T0 + 2 * STEP)]
        assert demand["y"].tolist() == [11.0 + 1.0, 12.0 + 2.0]
        # A rewritten part rewrites only its own timestamp's demand.
        store.samples.upsert_with_demand(window("a/allocated_gpus", T0 + STEP, 1, offset=20.0))
        assert store.samples.read(["a/demand_gpus"])["y"].tolist() == [21.0, 14.0]

    def test_a_failure_writing_derived_demand_leaves_nothing_of_the_write(
        self, store: Store
    ) -> None:
        """The parts are written, the demand write fails: the parts are rolled back too."""
        store.samples.upsert_with_demand(
            pd.concat([window("a/allocated_gpus", T0, 2, 10.0), window("a/queue_gpus", T0, 2, 1.0)])
        )
        before = store.samples.read()
        pushed = pd.concat([window("a/allocated_gpus", T0, 3, 20.0), window("a/nodes", T0, 3)])
        with fail_writes_of(store, "a/demand_gpus"), pytest.raises(StoreError, match="disk full"):
            store.samples.upsert_with_demand(pushed)
        after = store.samples.read()
        assert after.equals(before), after

    def test_a_frame_without_parts_is_written_and_derives_nothing(self, store: Store) -> None:
        frame = pd.concat([window("a/nodes", T0, 2), window("a/gpu_util", T0, 2, 50.0)])
        assert store.samples.upsert_with_demand(frame) == 4
        assert store.samples.upsert_with_demand(frame.iloc[:0]) == 0
        assert set(store.samples.last_timestamps()) == {"a/gpu_util", "a/nodes"}

    def test_writers_of_the_two_parts_of_one_time_leave_demand_their_sum(
        self, store: Store
    ) -> None:
        """Allocated and queued of the same time written at once: demand is their sum.

        Writer A is held just before it writes demand, having read the parts; writer B
        then writes the other part. Without one transaction under a per-pool lock, B
        derives from A's allocated and finishes, and A, released, writes the sum with
        the queued value it read before B's: demand misses B's part.
        """
        store.samples.upsert_with_demand(
            pd.concat([window("a/allocated_gpus", T0, 1, 10.0), window("a/queue_gpus", T0, 1, 1.0)])
        )
        with hold_first_write_of(store, "a/demand_gpus") as (reached, release):
            a = Worker(
                lambda: store.samples.upsert_with_demand(window("a/allocated_gpus", T0, 1, 20.0))
            ).start()
            assert reached.wait(30), "writer A never wrote demand"
            b = Worker(
                lambda: store.samples.upsert_with_demand(window("a/queue_gpus", T0, 1, 2.0))
            ).start()
            # B would finish at once if nothing kept it out while A is held; the timeout
            # only bounds how long it is given (held out, it finishes after A).
            held_out = not b.finished.wait(1.0)
            release.set()
            a.join(30)
            b.join(60)
        stored = store.samples.read(["a/allocated_gpus", "a/queue_gpus", "a/demand_gpus"])
        got = stored.set_index("unique_id")["y"].to_dict()
        # (This module is loaded by path, so pytest does not rewrite its asserts.)
        assert got == {"a/allocated_gpus": 20.0, "a/queue_gpus": 2.0, "a/demand_gpus": 22.0}, got
        assert held_out, "writer B was not kept out while A held the pool"

    def test_concurrent_writers_of_several_pools_leave_every_sum(self, store: Store) -> None:
        # Each writer pushes one part of two pools, listed in opposite orders: locks
        # taken in the frame's order would deadlock on PostgreSQL.
        times = 12
        barrier = threading.Barrier(2)

        def writer(signal: str, pools: list[str], offset: float) -> None:
            for i in range(times):
                frame = pd.concat(
                    [window(f"{pool}/{signal}", T0 + i * STEP, 1, offset) for pool in pools]
                )
                barrier.wait(30)
                store.samples.upsert_with_demand(frame)

        workers = [
            Worker(lambda: writer("allocated_gpus", ["a", "b"], 10.0), barrier).start(),
            Worker(lambda: writer("queue_gpus", ["b", "a"], 1.0), barrier).start(),
        ]
        join_all(workers, 120)
        demand = store.samples.read(["a/demand_gpus", "b/demand_gpus"])
        assert len(demand) == 2 * times, demand
        assert set(demand["y"]) == {11.0}, demand

    def test_writers_of_the_same_rows_in_opposite_orders_do_not_deadlock(
        self, store: Store
    ) -> None:
        # One writer also writes a part of pool a, the other only ready nodes: unless
        # both take turns on every pool they write, PostgreSQL finds them deadlocked.
        rounds = 150
        barrier = threading.Barrier(2)

        def writer(frames: list[pd.DataFrame]) -> None:
            for i in range(rounds):
                frame = pd.concat(frames)
                frame["y"] = float(i)
                barrier.wait(30)
                store.samples.upsert_with_demand(frame)

        with_part = [window("a/allocated_gpus", T0, 1), window("a/nodes", T0, 1)]
        workers = [
            Worker(lambda: writer([*with_part, window("b/nodes", T0, 1)]), barrier).start(),
            Worker(
                lambda: writer([window("b/nodes", T0, 1), window("a/nodes", T0, 1)]), barrier
            ).start(),
        ]
        join_all(workers, 120)
        assert store.samples.read(["a/nodes", "b/nodes"])["y"].tolist() == [rounds - 1.0] * 2

    def test_an_empty_read_has_the_contract_columns(self, store: Store) -> None:
        got = store.samples.read(["nope"])
        assert got.empty
        assert list(got.columns) == ["unique_id", "ds", "y"]
        assert str(got["ds"].dtype) == "datetime64[ns, UTC]"

    def test_bad_frames_are_rejected_and_nothing_is_written(self, store: Store) -> None:
        bad = pd.concat([window("ok/q", T0, 3), window("bad/q", T0, 3)])
        bad.loc[bad["unique_id"] == "bad/q", "y"] = [1.0, np.nan, 2.0]
        with pytest.raises(DataValidationError, match="bad/q"):
            store.samples.upsert(bad)
        naive = window("a/q", T0, 3)
        naive["ds"] = naive["ds"].dt.tz_localize(None)
        with pytest.raises(DataValidationError, match="tz-aware"):
            store.samples.upsert(naive)
        with pytest.raises(DataValidationError, match="missing"):
            store.samples.upsert(naive.drop(columns="y"))
        assert store.samples.read().empty


class ForecastsContract:
    def test_save_and_latest_round_trip(self, store: Store) -> None:
        frame = forecast_frame("a/demand_gpus", T0, 6)
        assert save_forecast(store, frame, "3", T0) == 6
        got = store.forecasts.latest("a/demand_gpus")
        assert list(got.columns) == [
            "unique_id", "ds", "step", "model", "mean", "q0.5", "q0.9",
            "model_version", "generated_at",
        ]  # fmt: skip
        pd.testing.assert_frame_equal(got[frame.columns], frame, check_dtype=False)
        assert set(got["model_version"]) == {"3"}
        assert set(got["generated_at"]) == {pd.Timestamp(T0)}

    def test_latest_is_the_newest_generation(self, store: Store) -> None:
        save_forecast(store, forecast_frame("a/q", T0, 3, level=1.0), "1", T0)
        later = T0 + timedelta(minutes=5)
        save_forecast(store, forecast_frame("a/q", later, 3, level=2.0), "2", later)
        save_forecast(store, forecast_frame("b/q", T0, 3, level=9.0), "2", later)
        got = store.forecasts.latest("a/q")
        assert got["mean"].tolist() == [2.0, 3.0, 4.0]
        assert set(got["model_version"]) == {"2"}
        assert store.forecasts.latest("c/q").empty

    def test_saving_the_same_forecast_again_overwrites_it(self, store: Store) -> None:
        frame = forecast_frame("a/q", T0, 4)
        save_forecast(store, frame, "1", T0)
        frame["mean"] += 1.0
        save_forecast(store, frame, "1", T0)
        got = store.forecasts.read()
        assert len(got) == 4
        assert got["mean"].tolist() == frame["mean"].tolist()

    def test_read_filters_target_times_and_generation(self, store: Store) -> None:
        save_forecast(store, forecast_frame("a/q", T0, 6), "1", T0)
        later = T0 + timedelta(hours=1)
        save_forecast(store, forecast_frame("a/q", later, 6), "1", later)
        window_rows = store.forecasts.read(["a/q"], start=T0 + STEP, end=T0 + 3 * STEP)
        assert window_rows["step"].tolist() == [2, 3]
        assert len(store.forecasts.read(generated_since=later)) == 6
        assert store.forecasts.read(["b/q"]).empty

    def test_steps_are_numbered_when_absent_and_missing_quantiles_stay_nan(
        self, store: Store
    ) -> None:
        frame = forecast_frame("a/q", T0, 3).drop(columns=["step", "model"])
        frame.loc[1, "q0.9"] = np.nan
        save_forecast(store, frame.iloc[::-1], "1", T0)
        got = store.forecasts.latest("a/q")
        assert got["step"].tolist() == [1, 2, 3]
        assert got["model"].isna().all()
        assert np.isnan(got["q0.9"].iloc[1])
        assert got["q0.9"].iloc[2] == frame["q0.9"].iloc[2]

    def test_a_forecast_without_a_mean_is_rejected(self, store: Store) -> None:
        with pytest.raises(DataValidationError, match="mean"):
            save_forecast(store, forecast_frame("a/q", T0, 3).drop(columns="mean"), "1", T0)
        frame = forecast_frame("a/q", T0, 3)
        frame.loc[0, "mean"] = np.inf
        with pytest.raises(DataValidationError, match="a/q"):
            save_forecast(store, frame, "1", T0)
        with pytest.raises(ValueError, match="timezone"):
            save_forecast(store, forecast_frame("a/q", T0, 3), "1", datetime(2024, 1, 1))

    def test_a_run_whose_peak_write_fails_keeps_none_of_its_rows(self, store: Store) -> None:
        peaks = pd.DataFrame(
            {"unique_id": ["a/q"], "ds": [pd.Timestamp(T0)], "lead": [2], "last": [1.0]}
        ).assign(**{"q0.9": [3.0]})
        later = T0 + STEP

        def run(at: datetime) -> None:
            store.forecast_runs.commit(
                forecast_frame("a/q", at, 3),
                peaks,
                model_version="1",
                generated_at=at,
                step=STEP.to_pytimedelta(),
            )

        def fail(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
            if statement.lstrip().upper().startswith("INSERT INTO PEAK_FORECASTS"):
                raise OperationalError(statement, parameters, RuntimeError("disk full"))

        run(T0)
        event.listen(store.engine, "before_cursor_execute", fail)
        try:
            with pytest.raises(StoreError, match="disk full"):
                run(later)
        finally:
            event.remove(store.engine, "before_cursor_execute", fail)

        assert store.forecast_runs.newest("1") == T0
        assert set(store.forecasts.read()["generated_at"]) == {pd.Timestamp(T0)}
        assert store.forecasts.newest(["a/q"], "1") == {"a/q": T0}
        assert len(store.peak_forecasts.at("a/q", "1", T0)) == 1


class RecommendationsContract:
    def test_append_and_latest_per_pool(self, store: Store) -> None:
        assert store.recommendations.latest("a100") is None
        payload = {"explanation": {"term": "forecast", "inputs": [1.5, None]}, "quantile": 0.9}
        first = store.recommendations.append("a100", T0, 4, "scale_up", payload)
        second = store.recommendations.append("a100", T0 + STEP, 3, "hold", {"n": 1})
        store.recommendations.append("h100", T0 + 2 * STEP, 9, "scale_up", {})
        assert second > first
        latest = store.recommendations.latest("a100")
        assert latest is not None
        assert (latest.id, latest.desired_nodes, latest.action) == (second, 3, "hold")
        assert latest.generated_at == T0 + STEP
        history = store.recommendations.history("a100")
        assert [r.id for r in history] == [second, first]
        assert history[1].payload == payload
        assert [r.pool for r in store.recommendations.history(since=T0 + STEP)] == [
            "h100",
            "a100",
        ]

    def test_desired_in_force_starts_with_the_one_in_force(self, store: Store) -> None:
        for minutes, nodes in ((0, 4), (5, 6), (10, 5), (20, 7)):
            store.recommendations.append("a100", T0 + minutes * STEP / 5, nodes, "hold", {})
        store.recommendations.append("h100", T0 + STEP, 9, "scale_up", {})
        found = store.recommendations.desired_in_force("a100", T0 + STEP * 1.4, T0 + STEP * 4)
        # The one made at 5 min was in force at 7 min; 20 min is past the end.
        assert [(at - T0, nodes) for at, nodes in found] == [(STEP, 6), (2 * STEP, 5)]
        assert all(at.tzinfo is not None for at, _ in found)
        assert store.recommendations.desired_in_force("v100", T0, T0 + 9 * STEP) == []


class StateContract:
    def test_state_round_trips_and_is_replaced(self, store: Store) -> None:
        assert store.state.get("a100") is None
        state = {"high_water": 7, "since": "2024-03-01T00:00:00+00:00", "window": [1, 2.5]}
        store.state.put("a100", state, updated_at=T0)
        assert store.state.get("a100") == state
        store.state.put("a100", {"high_water": 3}, updated_at=T0 + STEP)
        assert store.state.get("a100") == {"high_water": 3}
        assert store.state.get("h100") is None

    def test_a_state_changed_since_it_was_read_is_not_overwritten(self, store: Store) -> None:
        store.state.put("a100", {"n": 1}, updated_at=T0)
        mine = store.state.read(["a100", "h100"])
        assert {pool: seen.state for pool, seen in mine.items()} == {"a100": {"n": 1}}
        # Another replica reads and writes both pools first.
        theirs = store.state.read(["a100", "h100"])
        new = {"a100": {"n": 2}, "h100": {"n": 20}}
        assert store.state.replace_if_unchanged(new, theirs, updated_at=T0 + STEP) == set()
        # What this one computed from its older read is refused, pool by pool.
        late = {"a100": {"n": 3}, "h100": {"n": 30}, "v100": {"n": 300}}
        assert store.state.replace_if_unchanged(late, mine, updated_at=T0 + STEP) == {
            "a100",
            "h100",
        }
        got = {pool: store.state.get(pool) for pool in ("a100", "h100", "v100")}
        assert got == {"a100": {"n": 2}, "h100": {"n": 20}, "v100": {"n": 300}}, got
        # Read again, it writes; an unconditional put also moves the version on.
        again = store.state.read(["a100"])
        assert store.state.replace_if_unchanged({"a100": {"n": 3}}, again) == set()
        assert store.state.get("a100") == {"n": 3}
        before_put = store.state.read(["a100"])
        store.state.put("a100", {"n": 4})
        assert store.state.replace_if_unchanged({"a100": {"n": 5}}, before_put) == {"a100"}
        assert store.state.get("a100") == {"n": 4}

    def test_batches_of_pools_in_opposite_orders_do_not_deadlock(self, store: Store) -> None:
        rounds = 60
        barrier = threading.Barrier(2)

        def writer(pools: list[str]) -> None:
            for i in range(rounds):
                barrier.wait(30)
                seen = store.state.read(pools)
                store.state.replace_if_unchanged({pool: {"i": i} for pool in pools}, seen)

        pools = [f"p{i}" for i in range(8)]
        workers = [
            Worker(lambda: writer(pools), barrier).start(),
            Worker(lambda: writer(pools[::-1]), barrier).start(),
        ]
        join_all(workers, 120)
        assert {pool: store.state.get(pool) for pool in pools} == {
            pool: {"i": 59} for pool in pools
        }

    def test_concurrent_read_modify_writes_lose_no_update(self, store: Store) -> None:
        writers, increments = 4, 10
        barrier = threading.Barrier(writers)

        def add_one() -> None:
            while True:
                seen = store.state.read(["a100"])
                count = seen["a100"].state["n"] if "a100" in seen else 0
                if not store.state.replace_if_unchanged({"a100": {"n": count + 1}}, seen):
                    return

        def writer() -> None:
            barrier.wait(30)
            for _ in range(increments):
                add_one()

        join_all([Worker(writer, barrier).start() for _ in range(writers)], 120)
        assert store.state.get("a100") == {"n": writers * increments}


class OutboxContract:
    def test_enqueue_is_idempotent_per_target_and_key(self, store: Store) -> None:
        first = store.outbox.enqueue("http://a/hook", b'{"v":1}', "k1", now=T0)
        again = store.outbox.enqueue("http://a/hook", b'{"v":2}', "k1", now=T0 + STEP)
        other = store.outbox.enqueue("http://b/hook", b'{"v":1}', "k1", now=T0)
        assert first == again
        assert other != first
        assert store.outbox.counts()["pending"] == 2
        item = stored_item(store, first)
        assert item is not None
        assert (item.body, item.attempts, item.created_at) == (b'{"v":1}', 0, T0)

    def test_claims_due_items_oldest_first_up_to_the_limit(self, store: Store) -> None:
        ids = [store.outbox.enqueue("http://a", b"x", f"k{i}", now=T0 + i * STEP) for i in range(4)]
        store.outbox.enqueue("http://a", b"x", "future", now=T0 + timedelta(hours=1))
        claimed = store.outbox.claim_due(now=T0 + timedelta(minutes=30), limit=3)
        assert [item.id for item in claimed] == ids[:3]
        assert all(item.attempts == 1 for item in claimed)
        rest = store.outbox.claim_due(now=T0 + timedelta(minutes=30), limit=10)
        assert [item.id for item in rest] == ids[3:]

    def test_a_claim_hides_items_until_its_lease_expires(self, store: Store) -> None:
        item_id = store.outbox.enqueue("http://a", b"x", "k", now=T0)
        lease = timedelta(minutes=2)
        assert len(store.outbox.claim_due(now=T0, lease=lease)) == 1
        assert store.outbox.claim_due(now=T0 + timedelta(minutes=1), lease=lease) == []
        # The sender died without settling: the item comes back after the lease.
        again = store.outbox.claim_due(now=T0 + lease, lease=lease)
        assert [(i.id, i.attempts) for i in again] == [(item_id, 2)]

    def test_failures_back_off_exponentially_and_delivery_ends_retries(self, store: Store) -> None:
        backoff = Backoff(base=timedelta(seconds=10), factor=2.0, cap=timedelta(seconds=30))
        item_id = store.outbox.enqueue("http://a", b"x", "k", now=T0)
        now = T0
        waits = []
        for _ in range(4):
            (item,) = store.outbox.claim_due(now=now)
            due = store.outbox.mark_failed(item.id, "HTTP 503", now=now, backoff=backoff)
            assert due is not None
            waits.append((due - now).total_seconds())
            assert store.outbox.claim_due(now=due - timedelta(seconds=1)) == []
            now = due
        assert waits == [10.0, 20.0, 30.0, 30.0]
        stored = stored_item(store, item_id)
        assert stored is not None
        assert (stored.attempts, stored.last_error) == (4, "HTTP 503")
        store.outbox.claim_due(now=now)
        store.outbox.mark_delivered(item_id, now=now)
        assert store.outbox.claim_due(now=now + timedelta(days=1)) == []
        assert store.outbox.counts()["pending"] == 0
        assert store.outbox.mark_failed(item_id, "late", now=now) is None
        delivered = stored_item(store, item_id)
        assert delivered is not None
        assert (delivered.delivered_at, delivered.last_error) == (now, None)

    def test_each_item_has_an_explicit_status_and_dead_letters_are_not_delivered(
        self, store: Store
    ) -> None:
        delivered = store.outbox.enqueue("http://a", b"1", "k1", now=T0)
        dead = store.outbox.enqueue("http://a", b"2", "k2", now=T0)
        waiting = store.outbox.enqueue("http://a", b"3", "k3", now=T0)
        store.outbox.claim_due(now=T0)
        store.outbox.mark_delivered(delivered, now=T0)
        store.outbox.give_up(dead, "HTTP 410 Gone", now=T0 + STEP)

        found = {i: stored_item(store, i) for i in (delivered, dead, waiting)}
        assert {i: item.status for i, item in found.items() if item} == {
            delivered: "delivered",
            dead: "dead",
            waiting: "pending",
        }
        assert found[dead] is not None
        assert (found[dead].delivered_at, found[dead].dead_at) == (None, T0 + STEP)
        assert found[dead].last_error == "HTTP 410 Gone"
        assert store.outbox.counts() == {"pending": 1, "delivered": 1, "dead": 1}
        assert [item.id for item in store.outbox.dead_letters()] == [dead]
        # A dead letter neither retries nor holds back the sets queued after it.
        assert store.outbox.mark_failed(dead, "late", now=T0) is None
        later = stored_item(store, waiting)
        assert later is not None
        assert store.outbox.blocker(later) is None

    def test_an_operator_retries_a_dead_letter_unless_a_newer_set_was_delivered(
        self, store: Store
    ) -> None:
        old = store.outbox.enqueue("http://a", b"1", "k1", now=T0)
        store.outbox.claim_due(now=T0)
        store.outbox.give_up(old, "HTTP 401", now=T0)
        newer = store.outbox.enqueue("http://a", b"2", "k2", now=T0 + STEP)
        alone = store.outbox.enqueue("http://b", b"1", "k1", now=T0)
        store.outbox.claim_due(now=T0 + STEP)
        store.outbox.mark_delivered(newer, now=T0 + STEP)
        store.outbox.give_up(alone, "HTTP 404", now=T0 + STEP)

        outcome = store.outbox.retry(now=T0 + 2 * STEP)

        assert outcome.retried == (alone,)
        assert set(outcome.refused) == {old}
        assert f"#{newer}" in outcome.refused[old]
        retried = stored_item(store, alone)
        assert retried is not None
        assert (retried.status, retried.attempts, retried.dead_at) == ("pending", 0, None)
        assert [i.id for i in store.outbox.claim_due(now=T0 + 2 * STEP)] == [alone]
        # Asked explicitly, the outdated one goes too; a non-dead id is refused by name.
        forced = store.outbox.retry([old, newer], now=T0 + 3 * STEP, allow_outdated=True)
        assert forced.retried == (old,)
        assert "is delivered, not a dead letter" in forced.refused[newer]
        assert store.outbox.counts() == {"pending": 2, "delivered": 1, "dead": 0}

    def test_bodies_are_kept_byte_for_byte(self, store: Store) -> None:
        body = bytes(range(256))
        item_id = store.outbox.enqueue("http://a", body, "k", now=T0)
        (item,) = store.outbox.claim_due(now=T0)
        assert item.id == item_id
        assert item.body == body

    def test_concurrent_claims_never_hand_out_an_item_twice(self, store: Store) -> None:
        ids = {store.outbox.enqueue("http://a", b"x", f"k{i}", now=T0) for i in range(40)}
        claimed: list[int] = []
        errors: list[BaseException] = []
        lock = threading.Lock()
        barrier = threading.Barrier(4)

        def worker() -> None:
            try:
                barrier.wait()
                while batch := store.outbox.claim_due(now=T0, limit=3):
                    with lock:
                        claimed.extend(item.id for item in batch)
            except BaseException as exc:  # surfaced below: threads swallow exceptions
                errors.append(exc)

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert errors == []
        assert sorted(claimed) == sorted(ids)
