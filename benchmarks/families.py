"""Trace families: the groups of series a rule must hold on without having been tuned on.

Series of one family share their source and their behaviour (the 16 virtual clusters
of one training cluster, the three CloudWatch series of one benchmark), so a rule
tuned on one of them is not judged on another of the same family: the benchmarks
choose their constants with the family being scored left out
(:mod:`benchmarks.peak_lofo`).

The shared traces (``../shared/data``) form five families by the pool of a series
id (``<pool>/<signal>``); a series of outside files (``--data``) is a family of its
own pool.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

FAMILIES: Final = {
    "earth_total": "Earth total (Helios, 16 VCs summed)",
    "earth_vc": "Earth virtual clusters (Helios)",
    "alibaba_lora": "Alibaba GenAI LoRA inference",
    "alibaba_openb": "Alibaba openb GPU pods",
    "nab": "NAB AWS CloudWatch",
}
"""The shared traces' families and what they are."""
_VC_PREFIX: Final = "earth_vc_"


def family_of(uid: str) -> str:
    """The family of a series id ``<pool>/<signal>``: a shared one, else its pool."""
    pool = uid.rpartition("/")[0] or uid
    return "earth_vc" if pool.startswith(_VC_PREFIX) else pool


def families_of(uids: Iterable[str]) -> dict[str, str]:
    """Series id -> family, for every id."""
    return {uid: family_of(uid) for uid in uids}
