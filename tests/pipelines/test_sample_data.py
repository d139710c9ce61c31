"""The committed sample: reproducible byte for byte, and shaped like a real GPU cluster."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecaster.types import DS, UID, Y
from pipelines.config.pools import PoolsConfig
from pipelines.config.pools_file import load_pools
from pipelines.config.signals import SIGNALS
from pipelines.dataset import SAMPLE_FILE
from pipelines.sample_data import generate_sample, write_sample

SAMPLE_DIR = Path(__file__).resolve().parents[2] / "data" / "sample"
STEPS_PER_DAY = 288


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_sample(tmp_path_factory.mktemp("sample"))


@pytest.fixture(scope="module")
def frame(written: Path) -> pd.DataFrame:
    df = pd.read_csv(written)
    df[DS] = pd.to_datetime(df[DS], utc=True)
    return df


@pytest.fixture(scope="module")
def pools() -> PoolsConfig:
    return load_pools(SAMPLE_DIR / "pools.yaml")


def wide(frame: pd.DataFrame, pool: str) -> pd.DataFrame:
    """One pool's signals side by side on the regular 5-minute grid (gaps as NaN)."""
    part = frame[frame[UID].str.startswith(f"{pool}/")]
    table = part.pivot(index=DS, columns=UID, values=Y)
    table.columns = [str(column).split("/", 1)[1] for column in table.columns]
    return table.asfreq("5min")


def test_regenerating_gives_the_committed_bytes(written: Path) -> None:
    committed = SAMPLE_DIR / SAMPLE_FILE
    assert committed.is_file(), "run `python -m pipelines.sample_data` and commit the file"
    # Content first, so a failure says whether the generator or only gzip changed.
    assert gzip.decompress(written.read_bytes()) == gzip.decompress(committed.read_bytes())
    assert written.read_bytes() == committed.read_bytes()


def test_sample_is_small(written: Path) -> None:
    assert written.stat().st_size < 2 * 1024 * 1024


def test_frame_follows_the_series_contract(frame: pd.DataFrame, pools: PoolsConfig) -> None:
    assert list(frame.columns) == [UID, DS, Y]
    expected = {pool.series_id(signal) for pool in pools.pools for signal in SIGNALS}
    assert set(frame[UID]) == expected
    assert frame[Y].dtype == np.float64
    assert frame[Y].notna().all()
    assert not frame.duplicated([UID, DS]).any()
    assert frame.equals(frame.sort_values([UID, DS]).reset_index(drop=True))
    steps = frame.groupby(UID)[DS].diff().dropna()
    assert (steps % pd.Timedelta("5min") == pd.Timedelta(0)).all()
    assert (steps > pd.Timedelta("5min")).sum() == len(SIGNALS)  # only the outage skips
    assert frame[DS].min() == pd.Timestamp("2025-03-03", tz="UTC")
    assert frame[DS].max() == pd.Timestamp("2025-03-30 23:55", tz="UTC")


def test_no_negative_values_and_utilisation_is_a_percentage(frame: pd.DataFrame) -> None:
    assert (frame[Y] >= 0).all()
    util = frame.loc[frame[UID].str.endswith("/gpu_util"), Y]
    assert util.max() <= 100
    counts = frame.loc[~frame[UID].str.endswith("/gpu_util"), Y]
    assert (counts == counts.round()).all()


def test_allocation_fits_capacity_and_nodes_stay_in_bounds(
    frame: pd.DataFrame, pools: PoolsConfig
) -> None:
    for pool in pools.pools:
        table = wide(frame, pool.name).dropna()
        capacity = table["nodes"] * pool.gpus_per_node
        assert (table["allocated_gpus"] <= capacity).all(), pool.name
        assert table["nodes"].between(pool.min_nodes, pool.max_nodes).all(), pool.name
        # The autoscaler does grow and shrink the pool.
        assert table["nodes"].max() > 2 * max(pool.min_nodes, 1), pool.name
    # The h100 pool's demand outgrows it: it runs at max_nodes and work queues there.
    h100 = wide(frame, "h100-train").dropna()
    at_max = h100["nodes"] == pools.get("h100-train").max_nodes
    assert at_max.sum() > STEPS_PER_DAY // 4
    assert (h100.loc[at_max, "queue_gpus"] > 0).any()


def test_an_outage_gap_spans_every_signal_of_one_pool(frame: pd.DataFrame) -> None:
    table = wide(frame, "h100-train")
    missing = table.isna()
    # Every signal is missing at the same steps, for hours in a row.
    assert (missing.all(axis=1) == missing.any(axis=1)).all()
    gap = missing.all(axis=1)
    assert 24 <= gap.sum() <= 72  # 2 to 6 hours of 5-minute steps
    runs = gap.astype(int).diff().fillna(0)
    assert (runs == 1).sum() == 1  # one contiguous outage
    for pool in ("a100-train", "l4-infer"):
        assert not wide(frame, pool).isna().any().any(), pool


def test_inference_has_a_strong_daily_cycle_training_a_weak_one(frame: pd.DataFrame) -> None:
    infer = wide(frame, "l4-infer")["allocated_gpus"]
    train = wide(frame, "a100-train")["allocated_gpus"]
    infer_daily = infer.autocorr(lag=STEPS_PER_DAY)
    train_daily = train.autocorr(lag=STEPS_PER_DAY)

    assert infer_daily > 0.7
    assert train_daily < infer_daily - 0.2
    # Weekends are quiet for inference.
    weekend = infer.index.dayofweek >= 5
    assert infer[weekend].mean() < 0.7 * infer[~weekend].mean()


def test_bursts_queue_while_nodes_boot(frame: pd.DataFrame) -> None:
    for pool in ("a100-train", "h100-train", "l4-infer"):
        queue = wide(frame, pool)["queue_gpus"].dropna()
        waiting = (queue > 0).mean()
        assert 0.05 < waiting < 0.5, pool  # mostly zero, but bursts do wait
    infer = wide(frame, "l4-infer")
    assert (infer["queue_gpus"] > 0).any()


def test_same_seed_same_frame_other_seed_other_frame() -> None:
    first = generate_sample(seed=7, days=2)
    assert first.equals(generate_sample(seed=7, days=2))
    assert not first[Y].equals(generate_sample(seed=8, days=2)[Y])


def test_step_and_length_are_parameters() -> None:
    df = generate_sample(days=1, step="10min", start="2024-06-01")
    sizes = df.groupby(UID).size()
    assert len(sizes) == 12
    assert (sizes == 144).all()
    assert df[DS].min() == pd.Timestamp("2024-06-01", tz="UTC")
