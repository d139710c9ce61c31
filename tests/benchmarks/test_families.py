"""Trace families: every shared series in its family, an outside series in its pool's."""

from __future__ import annotations

import pytest

from benchmarks.families import FAMILIES, families_of, family_of
from benchmarks.peak_quantile import SCORED_VCS


@pytest.mark.parametrize(
    ("uid", "family"),
    [
        ("earth_total/demand_gpus", "earth_total"),
        ("earth_total/pending_gpus", "earth_total"),
        ("earth_vc_vc6YE/demand_gpus", "earth_vc"),
        ("earth_vc_vcJkd/pending_jobs", "earth_vc"),
        ("alibaba_lora/demand_gpus", "alibaba_lora"),
        ("alibaba_lora/arrivals", "alibaba_lora"),
        ("alibaba_openb/demand_gpus", "alibaba_openb"),
        ("nab/ec2_cpu_utilization_24ae8d", "nab"),
        ("nab/rds_cpu_utilization_e47b3b", "nab"),
    ],
)
def test_each_shared_series_is_in_its_family(uid: str, family: str) -> None:
    assert family_of(uid) == family
    assert family in FAMILIES


def test_every_scored_vc_is_one_family_and_outside_pools_are_their_own() -> None:
    vcs = families_of(f"earth_vc_{vc}/demand_gpus" for vc in SCORED_VCS)
    assert set(vcs.values()) == {"earth_vc"}
    assert family_of("x/rate_rps") == "x"
    assert family_of("y/demand_gpus") == "y"
    assert family_of("x/rate_rps") != family_of("y/demand_gpus")
    assert family_of("bare") == "bare"
