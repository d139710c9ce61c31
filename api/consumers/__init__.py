"""Consumers' formats: the priority-expander ConfigMap, capacity buffers and webhooks.

Every builder here is a pure function that validates what it returns offline and raises
:class:`~pipelines.errors.PublishError` rather than return something a consumer
would reject or misread. Writing to a cluster and delivering webhooks live elsewhere.
"""

from api.consumers.capacity_buffers import (
    BufferManifests,
    BufferSettings,
    PoolBuffer,
    capacity_buffers,
    validate_capacity_buffer,
)
from api.consumers.go_regex import quote_meta
from api.consumers.priority_expander import (
    CONFIGMAP_KEY,
    CONFIGMAP_NAME,
    PriorityExpanderConfig,
    RankedPool,
    node_group_regex,
    priority_expander_configmap,
    rank_pools,
    validate_priorities,
    validate_value_text,
)
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

__all__ = [
    "CONFIGMAP_KEY",
    "CONFIGMAP_NAME",
    "IDEMPOTENCY_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "BufferManifests",
    "BufferSettings",
    "PoolBuffer",
    "PriorityExpanderConfig",
    "RankedPool",
    "capacity_buffers",
    "changed",
    "encode",
    "idempotency_key",
    "next_attempt_delay",
    "node_group_regex",
    "payload",
    "priority_expander_configmap",
    "quote_meta",
    "rank_pools",
    "sign",
    "signed_headers",
    "validate_capacity_buffer",
    "validate_priorities",
    "validate_value_text",
    "verify",
]
