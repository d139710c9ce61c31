"""The audit trail of recommendations: a pool's answer is stored when it differs (docs/api.md)."""

from __future__ import annotations

from typing import Any, Final

from api.schemas import PoolRecommendation
from pipelines.store.store import Store
from policy.recommendation import Recommendation

_AUDIT_KEYS: Final = ("desired_nodes", "current_nodes", "action", "mode", "model_version")


def audit_key(payload: dict[str, Any]) -> tuple[Any, ...]:
    """Return what must change for a recommendation's wire form to be audited again."""
    term = payload.get("explanation", {}).get("term")
    return (*(payload.get(key) for key in _AUDIT_KEYS), term)


class AuditTrail:
    """Appends a pool's recommendation to the store when it differs from its last one.

    The last key of each pool is read from the store once, then remembered (the
    caller serialises appends: the service holds its lock).
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        self._last: dict[str, tuple[Any, ...] | None] = {}

    def record(self, rec: Recommendation, body: PoolRecommendation) -> None:
        """Append ``rec`` (wire form ``body``) unless it repeats the pool's last entry.

        Raises:
            StoreError: the store failed.
        """
        payload = body.model_dump(mode="json")
        key = audit_key(payload)
        if rec.pool not in self._last:
            latest = self._store.recommendations.latest(rec.pool)
            self._last[rec.pool] = None if latest is None else audit_key(latest.payload)
        if self._last[rec.pool] == key:
            return
        self._store.recommendations.append(
            rec.pool, rec.generated_at, rec.desired_nodes, rec.action, payload
        )
        self._last[rec.pool] = key
