"""Call-chain latency signals: trace ingestion, a sliding window of spans, bottlenecks.

Ingestion (the routes call these): :func:`decode_export_request` for ``POST /v1/traces``
(OTLP/HTTP protobuf or JSON; answer with :func:`export_response`) and
:func:`decode_span_list` for ``POST /signals/spans``; both return :class:`Span` records
for :meth:`ChainWindow.add <api.callchain.incremental.ChainWindow.add>`, whose
``stats`` gives :class:`ServiceStats` per service, and :func:`analyse` turns them,
with the pools' SLOs, into one ``LatencyAdjustment`` per pool and a
:class:`ServiceReport` per service.
"""

from api.callchain.baseline import Baseline, BaselineState, is_ready, update_baselines
from api.callchain.bottleneck import analyse
from api.callchain.bottleneck_settings import BottleneckSettings
from api.callchain.graph import service_pools
from api.callchain.otlp import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    JSON,
    PROTOBUF,
    decode_export,
    decode_export_request,
    decode_json,
    decode_protobuf,
    export_response,
)
from api.callchain.report import (
    OVERFLOW_SERVICE,
    LatencyAnalysis,
    ServiceReport,
    ServiceStatus,
    ThresholdSource,
    Verdict,
)
from api.callchain.spanlist import (
    SpanIn,
    decode_span_list,
    decode_span_list_batch,
    spans_from_models,
)
from api.callchain.stats import percentile, service_stats
from api.callchain.types import (
    Decoded,
    PayloadTooLargeError,
    ServiceStats,
    Span,
    SpanKind,
    SpanStatus,
    UnsupportedMediaTypeError,
)
from api.callchain.window import AddResult

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "JSON",
    "OVERFLOW_SERVICE",
    "PROTOBUF",
    "AddResult",
    "Baseline",
    "BaselineState",
    "BottleneckSettings",
    "Decoded",
    "LatencyAnalysis",
    "PayloadTooLargeError",
    "ServiceReport",
    "ServiceStats",
    "ServiceStatus",
    "Span",
    "SpanIn",
    "SpanKind",
    "SpanStatus",
    "ThresholdSource",
    "UnsupportedMediaTypeError",
    "Verdict",
    "analyse",
    "decode_export",
    "decode_export_request",
    "decode_json",
    "decode_protobuf",
    "decode_span_list",
    "decode_span_list_batch",
    "export_response",
    "is_ready",
    "percentile",
    "service_pools",
    "service_stats",
    "spans_from_models",
    "update_baselines",
]
