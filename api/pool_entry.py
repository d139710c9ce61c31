"""A pool's current answer as the service keeps it: the recommendation and its wire form."""

from __future__ import annotations

from dataclasses import dataclass

from api.schemas import PoolRecommendation
from policy.recommendation import Recommendation


@dataclass(frozen=True)
class PoolEntry:
    """A pool's current recommendation and its wire form, built once when decided."""

    recommendation: Recommendation
    body: PoolRecommendation

    @classmethod
    def of(cls, rec: Recommendation) -> PoolEntry:
        """Build the entry and the recommendation's wire form."""
        return cls(rec, PoolRecommendation.of(rec))
