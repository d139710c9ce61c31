"""Webhook signatures, headers, idempotency keys, change detection and backoff."""

from __future__ import annotations

import hashlib
import hmac
import json
import random
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from api.consumers.webhooks import (
    IDEMPOTENCY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    changed,
    encode,
    idempotency_key,
    next_attempt_delay,
    payload,
    sign,
    signed_headers,
    verify,
)
from forecaster.exceptions import ConfigError
from pipelines.config.pools import PoolConfig
from pipelines.errors import PublishError
from policy.recommendation import Recommendation

MakeRecommendation = Callable[..., Recommendation]
NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
SEC = timedelta(seconds=1)
SECRET = b"s3cret-for-tests"
A100 = PoolConfig(name="a100", node_group_id="eks-a100")
L4 = PoolConfig(name="l4", node_group_id="eks-l4", gpus_per_node=4)


def test_sign_is_hmac_sha256_of_the_raw_body() -> None:
    body = b'{"pools":[]}'
    expected = hmac.new(SECRET, body, hashlib.sha256).hexdigest()

    assert sign(body, SECRET) == f"sha256={expected}"


def test_sign_known_answer_rfc4231_case_2() -> None:
    assert sign(b"what do ya want for nothing?", b"Jefe") == (
        "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    )


def test_empty_secret_is_refused() -> None:
    with pytest.raises(ConfigError, match="secret"):
        sign(b"{}", b"")


def test_verify_accepts_a_fresh_genuine_delivery() -> None:
    body = b'{"a":1}'
    headers = signed_headers(body, SECRET, sent_at=NOW, key="k")

    assert verify(
        body, headers[SIGNATURE_HEADER], SECRET, headers[TIMESTAMP_HEADER], now=NOW + 4 * 60 * SEC
    )


@pytest.mark.parametrize(
    ("body", "secret", "sent_at", "now"),
    [
        (b'{"a":2}', SECRET, NOW, NOW),  # tampered body
        (b'{"a":1} ', SECRET, NOW, NOW),  # one byte more
        (b'{"a":1}', b"other-secret", NOW, NOW),  # wrong secret
        (b'{"a":1}', SECRET, NOW - 6 * 60 * SEC, NOW),  # too old
        (b'{"a":1}', SECRET, NOW + 6 * 60 * SEC, NOW),  # too far in the future
    ],
)
def test_verify_rejects(body: bytes, secret: bytes, sent_at: datetime, now: datetime) -> None:
    headers = signed_headers(b'{"a":1}', SECRET, sent_at=sent_at, key="k")

    assert not verify(body, headers[SIGNATURE_HEADER], secret, headers[TIMESTAMP_HEADER], now=now)


@pytest.mark.parametrize("timestamp", ["", "abc", "-5", "1_714_564_800", "1.5", "99999999999999"])
def test_verify_rejects_malformed_timestamps(timestamp: str) -> None:
    assert not verify(b"{}", sign(b"{}", SECRET), SECRET, timestamp, now=NOW)


def test_verify_rejects_a_signature_without_its_prefix() -> None:
    bare = sign(b"{}", SECRET).removeprefix("sha256=")
    assert not verify(b"{}", bare, SECRET, str(int(NOW.timestamp())), now=NOW)


def test_headers_carry_signature_timestamp_and_key() -> None:
    body = encode({"x": 1})
    headers = signed_headers(body, SECRET, sent_at=NOW, key="abc123")

    assert headers == {
        "Content-Type": "application/json",
        "X-Foresight-Signature": sign(body, SECRET),
        "X-Foresight-Timestamp": "1714564800",
        "X-Foresight-Idempotency-Key": "abc123",
    }
    assert IDEMPOTENCY_HEADER == "X-Foresight-Idempotency-Key"


def test_encode_is_canonical_and_refuses_nan() -> None:
    assert encode({"b": 1, "a": [1.5, "é"]}) == encode({"a": [1.5, "é"], "b": 1})
    assert encode({"b": 1, "a": "é"}) == '{"a":"é","b":1}'.encode()
    with pytest.raises(PublishError, match="JSON"):
        encode({"x": float("nan")})


def test_payload_lists_pools_by_name_as_plain_json(recommend: MakeRecommendation) -> None:
    body = payload([recommend(L4, 1, 2), recommend(A100, 2, 3)], NOW)

    assert body["generated_at"] == "2024-05-01T12:00:00Z"
    pools = body["pools"]
    assert isinstance(pools, list)
    assert [p["pool"] for p in pools] == ["a100", "l4"]
    assert json.loads(encode(body)) == body


def _set_at(recommend: MakeRecommendation, now: datetime, desired: int = 3) -> dict[str, object]:
    recs = [recommend(A100, 2, desired, now=now), recommend(L4, 1, 1, now=now)]
    return payload(recs, now)


def test_idempotency_key_ignores_generated_at_and_ages(recommend: MakeRecommendation) -> None:
    first = _set_at(recommend, NOW)
    later = _set_at(recommend, NOW + 5 * 60 * SEC)

    assert first != later  # the times really differ
    assert idempotency_key(first) == idempotency_key(later)
    assert len(idempotency_key(first)) == 64
    assert not changed(first, later)


def test_idempotency_key_and_change_follow_the_decision(recommend: MakeRecommendation) -> None:
    before = _set_at(recommend, NOW, desired=3)
    after = _set_at(recommend, NOW + 60 * SEC, desired=4)

    assert idempotency_key(before) != idempotency_key(after)
    assert changed(before, after)
    assert changed(None, before)


def test_valid_until_alone_is_no_change(recommend: MakeRecommendation) -> None:
    rec = recommend(A100, 2, 3)
    moved = replace(rec, valid_until=rec.valid_until + timedelta(hours=1))

    assert not changed(payload([rec], NOW), payload([moved], NOW))


def test_chaining_makes_a_return_to_an_earlier_set_a_new_delivery(
    recommend: MakeRecommendation,
) -> None:
    a, b = _set_at(recommend, NOW, 3), _set_at(recommend, NOW, 4)
    key_a = idempotency_key(a)
    key_b = idempotency_key(b, previous_key=key_a)
    key_a_again = idempotency_key(a, previous_key=key_b)

    assert len({key_a, key_b, key_a_again}) == 3
    # A retry of the same delivery computes the same key.
    assert idempotency_key(b, previous_key=key_a) == key_b


def test_backoff_doubles_within_jittered_bounds_and_is_capped() -> None:
    rng = random.Random(7)
    base, cap = timedelta(seconds=2), timedelta(minutes=10)
    for attempts in range(1, 40):
        ceiling = min(cap, base * 2 ** (attempts - 1))
        delay = next_attempt_delay(attempts, rng, base=base, cap=cap)
        assert ceiling / 2 <= delay <= ceiling
    assert next_attempt_delay(10**6, rng, base=base, cap=cap) <= cap


def test_backoff_is_reproducible_and_jittered() -> None:
    first = [next_attempt_delay(3, random.Random(42)) for _ in range(3)]
    rng = random.Random(42)
    spread = {next_attempt_delay(3, rng) for _ in range(20)}

    assert first[0] == first[1] == first[2]
    assert len(spread) == 20


def test_backoff_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="attempts"):
        next_attempt_delay(0, random.Random(0))
    with pytest.raises(ValueError, match="base"):
        next_attempt_delay(1, random.Random(0), base=timedelta(0))
