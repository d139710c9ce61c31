"""Webhook deliveries of the recommendation set: body, signature, keys, change, backoff.

Details: docs/consumers.md, "Notes from the code", `api/consumers/webhooks.py`."""

from __future__ import annotations

import hashlib
import hmac
import json
import random
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Final

from api.schemas import PoolRecommendation
from forecaster.exceptions import ConfigError
from pipelines.errors import PublishError
from policy.recommendation import Recommendation
from policy.types import iso_utc, require_aware

SIGNATURE_HEADER: Final = "X-Foresight-Signature"
TIMESTAMP_HEADER: Final = "X-Foresight-Timestamp"
IDEMPOTENCY_HEADER: Final = "X-Foresight-Idempotency-Key"
SIGNATURE_PREFIX: Final = "sha256="

VOLATILE_KEYS: Final = frozenset(
    {"generated_at", "valid_until", "data_freshness_seconds", "age_seconds", "at"}
)
"""Keys left out, at any depth, when deciding whether the set changed.

They move with the clock or with each new sample's time even when every number a
consumer acts on stays the same; values, counts and the explanation's terms still count.
"""

_UNIX_SECONDS: Final = re.compile(r"[0-9]{1,12}")

DEFAULT_TOLERANCE: Final = timedelta(minutes=5)
DEFAULT_BASE_DELAY: Final = timedelta(seconds=2)
DEFAULT_MAX_DELAY: Final = timedelta(minutes=10)


def payload(recommendations: Iterable[Recommendation], generated_at: datetime) -> dict[str, object]:
    """Return the webhook payload: ``generated_at`` and the pools in name order, each in
    the wire form ``GET /recommendation`` serves (:class:`~api.schemas.PoolRecommendation`)."""
    require_aware(generated_at, "generated_at")
    pools = sorted(recommendations, key=lambda rec: rec.pool)
    return {
        "generated_at": iso_utc(generated_at),
        "pools": [PoolRecommendation.of(rec).model_dump(mode="json") for rec in pools],
    }


def encode(body: Mapping[str, object]) -> bytes:
    """Return canonical JSON bytes: sorted keys, no spaces, UTF-8.

    Raises:
        PublishError: the payload holds NaN, infinities or non-JSON values.
    """
    try:
        text = json.dumps(
            body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    except (TypeError, ValueError) as exc:
        raise PublishError(f"webhook payload is not JSON-serialisable: {exc}") from exc
    return text.encode("utf-8")


def sign(body: bytes, secret: bytes) -> str:
    """Return ``sha256=<hex>``, the HMAC-SHA256 of the raw ``body`` keyed by ``secret``.

    Raises:
        ConfigError: the secret is empty (a signature anyone can forge).
    """
    if not secret:
        raise ConfigError("the webhook secret is empty; configure a random secret per receiver")
    return SIGNATURE_PREFIX + hmac.new(secret, body, hashlib.sha256).hexdigest()


def verify(
    body: bytes,
    signature: str,
    secret: bytes,
    timestamp: str,
    *,
    now: datetime,
    tolerance: timedelta = DEFAULT_TOLERANCE,
) -> bool:
    """Check a delivery as a receiver would: signature and timestamp.

    Args:
        body: the raw request body as received.
        signature: the ``X-Foresight-Signature`` header.
        timestamp: the ``X-Foresight-Timestamp`` header (Unix seconds).
        now: the receiver's clock.
        tolerance: the largest accepted difference between ``now`` and the timestamp,
            either way (clocks skew).

    Returns:
        True when the signature matches (compared in constant time) and the timestamp
        is an integer within ``tolerance`` of ``now``.
    """
    require_aware(now, "now")
    if not _UNIX_SECONDS.fullmatch(timestamp):
        return False
    try:
        sent = datetime.fromtimestamp(int(timestamp), tz=UTC)
    except (OverflowError, OSError, ValueError):
        return False
    fresh = abs(now - sent) <= tolerance
    expected = sign(body, secret).encode("ascii")
    matches = hmac.compare_digest(expected, signature.strip().encode("utf-8"))
    return matches and fresh


def decision_content(value: object, ignore: frozenset[str] = VOLATILE_KEYS) -> object:
    """Return ``value`` with the ``ignore`` keys removed from every mapping in it."""
    if isinstance(value, Mapping):
        return {k: decision_content(v, ignore) for k, v in value.items() if k not in ignore}
    if isinstance(value, list | tuple):
        return [decision_content(v, ignore) for v in value]
    return value


def changed(
    previous: Mapping[str, object] | None,
    current: Mapping[str, object],
    ignore: frozenset[str] = VOLATILE_KEYS,
) -> bool:
    """Return whether ``current`` differs from ``previous`` beyond time-derived fields.

    Args:
        previous: the last payload delivered, None when nothing was delivered yet.
        ignore: keys that do not count as a change (see :data:`VOLATILE_KEYS`).
    """
    if previous is None:
        return True
    return decision_content(previous, ignore) != decision_content(current, ignore)


def idempotency_key(
    body: Mapping[str, object],
    previous_key: str | None = None,
    ignore: frozenset[str] = VOLATILE_KEYS,
) -> str:
    """Return the delivery's idempotency key, a SHA-256 hex digest.

    Args:
        previous_key: the key of the delivery before this one; chaining makes a set
            that returns to an earlier state (A, B, A) a new delivery, not a duplicate.
        ignore: keys left out of the hash, as for :func:`changed`.
    """
    digest = hashlib.sha256()
    digest.update((previous_key or "").encode("ascii"))
    digest.update(b"\n")
    digest.update(encode({"content": decision_content(body, ignore)}))
    return digest.hexdigest()


def signed_headers(body: bytes, secret: bytes, *, sent_at: datetime, key: str) -> dict[str, str]:
    """Return the headers of one delivery attempt.

    Args:
        body: the exact bytes to be POSTed.
        sent_at: when this attempt is sent (timezone-aware).
        key: the delivery's idempotency key (the same on every retry).
    """
    require_aware(sent_at, "sent_at")
    return {
        "Content-Type": "application/json",
        SIGNATURE_HEADER: sign(body, secret),
        TIMESTAMP_HEADER: str(int(sent_at.timestamp())),
        IDEMPOTENCY_HEADER: key,
    }


def next_attempt_delay(
    attempts: int,
    rng: random.Random,
    *,
    base: timedelta = DEFAULT_BASE_DELAY,
    cap: timedelta = DEFAULT_MAX_DELAY,
) -> timedelta:
    """Return how long to wait before the next attempt: exponential, capped, jittered.

    The ceiling doubles per failed attempt (``base x 2^(attempts-1)``, at most ``cap``);
    the delay is drawn uniformly from its upper half, so retries of many deliveries
    spread out but never come back sooner than half the ceiling.

    Args:
        attempts: failed attempts so far, >= 1.
        rng: the source of jitter (seeded in tests).
        base: the ceiling after the first failure.
    """
    if attempts < 1:
        raise ValueError(f"attempts must be >= 1 after a failure, got {attempts}")
    if base <= timedelta(0) or cap < base:
        raise ValueError(f"need 0 < base <= cap, got base={base} cap={cap}")
    # Past 2^62 the doubling is certain to exceed any cap; stop before floats overflow.
    ceiling = min(cap.total_seconds(), base.total_seconds() * 2.0 ** min(attempts - 1, 62))
    return timedelta(seconds=ceiling / 2 + rng.uniform(0, ceiling / 2))
