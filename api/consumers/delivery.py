"""Webhook delivery from the persistent outbox: claim, sign, POST, settle (docs/consumers.md)."""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Final, Literal

import httpx

from api.clock import Clock, system_clock
from api.consumers.webhooks import (
    DEFAULT_BASE_DELAY,
    DEFAULT_MAX_DELAY,
    IDEMPOTENCY_HEADER,
    TIMESTAMP_HEADER,
    next_attempt_delay,
    signed_headers,
)
from api.settings import AppSettings
from forecaster.exceptions import ConfigError
from pipelines.store.outbox import Backoff, OutboxItem, OutboxRepository

logger = logging.getLogger(__name__)

Outcome = Literal["delivered", "retry", "dead_letter", "waiting"]
"""What one pass did with an item: sent and accepted, to retry, given up, held back."""

RETRIABLE_CLIENT_ERRORS: Final = frozenset({408, 429})
"""4xx statuses that mean "later", not "never" (request timeout, too many requests)."""

_SNIPPET_CHARS: Final = 200
_LEASE_MARGIN: Final = 2.0


@dataclass(frozen=True)
class DeliveryPolicy:
    """How deliveries are signed, timed and retried.

    Attributes:
        secret: the HMAC-SHA256 key; None sends unsigned deliveries (the settings'
            documented meaning of an unset ``webhook_secret``).
        timeout_s: seconds to wait for a receiver per attempt.
        base_delay: the backoff ceiling after the first failure.
        max_delay: the largest backoff ceiling.
        recheck: the longest an item held back behind an earlier one waits before it
            is looked at again (the earlier one may be in flight at another replica
            and settle long before its lease runs out).
    """

    secret: bytes | None = None
    timeout_s: float = 10.0
    batch: int = 10
    base_delay: timedelta = DEFAULT_BASE_DELAY
    max_delay: timedelta = DEFAULT_MAX_DELAY
    recheck: timedelta = timedelta(seconds=5)

    def __post_init__(self) -> None:
        if self.secret is not None and not self.secret:
            raise ConfigError("webhook_secret is empty; set a random secret or leave it unset")
        if self.timeout_s <= 0 or self.batch < 1:
            raise ConfigError(
                f"need a positive timeout and batch, got {self.timeout_s} s and {self.batch}"
            )

    @property
    def lease(self) -> timedelta:
        """How long a claim hides its items: longer than a whole batch can take.

        A lease that ran out mid-batch would let another replica send the same item.
        """
        return timedelta(seconds=_LEASE_MARGIN * self.batch * self.timeout_s + 60)

    @classmethod
    def from_settings(cls, settings: AppSettings) -> DeliveryPolicy:
        """Return the policy of ``settings.webhook_secret`` and ``settings.publish``."""
        secret = settings.webhook_secret
        return cls(
            secret=None if secret is None else secret.get_secret_value().encode("utf-8"),
            timeout_s=settings.publish.webhook_timeout_s,
        )


@dataclass(frozen=True)
class DeliveryResult:
    """One item's fate in one pass.

    Attributes:
        outcome: what happened (see :data:`Outcome`).
        status_code: the receiver's HTTP status, None when there was no response.
        error: why it was not delivered, None when it was.
        next_attempt_at: when it is due again (retry and waiting), else None.
    """

    item_id: int
    target_url: str
    idempotency_key: str
    outcome: Outcome
    status_code: int | None = None
    error: str | None = None
    next_attempt_at: datetime | None = None


def delivery_headers(
    body: bytes, secret: bytes | None, *, sent_at: datetime, key: str
) -> dict[str, str]:
    """Return the headers of one attempt; without a secret, all but the signature."""
    if secret is not None:
        return signed_headers(body, secret, sent_at=sent_at, key=key)
    return {
        "Content-Type": "application/json",
        TIMESTAMP_HEADER: str(int(sent_at.timestamp())),
        IDEMPOTENCY_HEADER: key,
    }


def deliver_due(
    outbox: OutboxRepository,
    http: httpx.Client,
    policy: DeliveryPolicy,
    *,
    clock: Clock = system_clock,
    rng: random.Random | None = None,
) -> list[DeliveryResult]:
    """Claim the due items once, send each (oldest first per URL), settle each.

    Args:
        http: the client that POSTs (tests pass one over ``httpx.MockTransport``).
        clock: the time of claims, signatures and settlements.
        rng: the backoff jitter source; default an unseeded one.

    Returns:
        One result per claimed item, in id order.

    Raises:
        StoreError: the store failed (items already sent stay settled).
    """
    jitter = rng or random.Random()
    claimed = sorted(outbox.claim_due(now=clock(), limit=policy.batch, lease=policy.lease), key=_id)
    held: dict[str, datetime] = {}
    results: list[DeliveryResult] = []
    for item in claimed:
        due_at = held.get(item.target_url)
        blocker = None if due_at is not None else outbox.blocker(item)
        if due_at is None and blocker is not None:
            now = clock()
            due_at = max(min(blocker.next_attempt_at, now + policy.recheck), now)
        if due_at is not None:
            outbox.release(item.id, due_at=due_at)
            results.append(_waiting(item, due_at, blocker))
            continue
        result = _attempt(outbox, http, policy, item, clock, jitter)
        if result.outcome == "retry" and result.next_attempt_at is not None:
            held[item.target_url] = result.next_attempt_at
        results.append(result)
    return results


def _id(item: OutboxItem) -> int:
    return item.id


def _waiting(item: OutboxItem, due_at: datetime, blocker: OutboxItem | None) -> DeliveryResult:
    reason = (
        f"waiting for the earlier delivery #{blocker.id} to {item.target_url}"
        if blocker is not None
        else f"waiting: an earlier delivery to {item.target_url} just failed"
    )
    return DeliveryResult(
        item.id, item.target_url, item.idempotency_key, "waiting", None, reason, due_at
    )


def _attempt(
    outbox: OutboxRepository,
    http: httpx.Client,
    policy: DeliveryPolicy,
    item: OutboxItem,
    clock: Clock,
    rng: random.Random,
) -> DeliveryResult:
    """POST one claimed item and settle it in the outbox."""
    sent_at = clock()
    headers = delivery_headers(item.body, policy.secret, sent_at=sent_at, key=item.idempotency_key)
    try:
        response = http.post(
            item.target_url, content=item.body, headers=headers, timeout=policy.timeout_s
        )
    except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
        return _dead(outbox, item, clock, None, f"invalid webhook URL {item.target_url!r}: {exc}")
    except httpx.TimeoutException:
        return _retry(outbox, policy, item, clock, rng, None, f"no answer in {policy.timeout_s} s")
    except httpx.TransportError as exc:
        return _retry(outbox, policy, item, clock, rng, None, f"receiver unreachable: {exc!r}")
    status = response.status_code
    if 200 <= status < 300:
        outbox.mark_delivered(item.id, now=clock())
        return DeliveryResult(item.id, item.target_url, item.idempotency_key, "delivered", status)
    error = f"HTTP {status}: {response.text[:_SNIPPET_CHARS]}"
    if 400 <= status < 500 and status not in RETRIABLE_CLIENT_ERRORS:
        return _dead(outbox, item, clock, status, error)
    wait = _retry_after(response.headers.get("Retry-After"), clock())
    return _retry(outbox, policy, item, clock, rng, status, error, at_least=wait)


def _retry(
    outbox: OutboxRepository,
    policy: DeliveryPolicy,
    item: OutboxItem,
    clock: Clock,
    rng: random.Random,
    status: int | None,
    error: str,
    *,
    at_least: timedelta | None = None,
) -> DeliveryResult:
    delay = next_attempt_delay(item.attempts, rng, base=policy.base_delay, cap=policy.max_delay)
    if at_least is not None:
        delay = min(max(delay, at_least), policy.max_delay)
    # The outbox computes the next time from a Backoff; a constant one applies our
    # jittered delay exactly.
    due = outbox.mark_failed(
        item.id, error, now=clock(), backoff=Backoff(base=delay, factor=1.0, cap=delay)
    )
    logger.info(
        "webhook #%d to %s failed (attempt %d), retrying at %s: %s",
        item.id,
        item.target_url,
        item.attempts,
        due,
        error,
    )
    return DeliveryResult(
        item.id, item.target_url, item.idempotency_key, "retry", status, error, due
    )


def _dead(
    outbox: OutboxRepository, item: OutboxItem, clock: Clock, status: int | None, error: str
) -> DeliveryResult:
    outbox.give_up(item.id, error, now=clock())
    logger.error(
        "webhook #%d to %s rejected for good, not retrying (dead letter): %s; fix the "
        "receiver or its URL/secret, then re-publish",
        item.id,
        item.target_url,
        error,
    )
    return DeliveryResult(
        item.id, item.target_url, item.idempotency_key, "dead_letter", status, error
    )


def _retry_after(value: str | None, now: datetime) -> timedelta | None:
    """Parse ``Retry-After`` (seconds or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        return timedelta(seconds=int(text))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(when - now, timedelta(0))
