"""The real OpenTelemetry SDK exports a 3-service call chain to a local OTLP/HTTP receiver.

Each service has its own TracerProvider (its own ``service.name``) and the real
OTLPSpanExporter; the trace context crosses the "network" through W3C traceparent
headers injected and extracted in-process. The receiver is a plain http.server on a free
loopback port that hands the raw bodies to our decoder, as ``POST /v1/traces`` will.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from api.callchain.otlp.export import decode_export, export_response
from api.callchain.types import Span
from forecaster.exceptions import DataValidationError
from tests.api.callchain.reference_stats import service_stats
from tests.api.callchain.strict import require_all

T0 = 1_714_564_800_000_000_000
MS = 1_000_000


class _Receiver(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.spans: list[Span] = []
        self.requests: list[tuple[str, str | None, str | None]] = []


class _Handler(BaseHTTPRequestHandler):
    server: _Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        content_type = self.headers.get("Content-Type")
        encoding = self.headers.get("Content-Encoding")
        try:
            spans = require_all(decode_export(body, content_type, encoding))
        except DataValidationError as exc:
            self.send_error(400, str(exc))
            return
        with self.server.lock:
            self.server.spans.extend(spans)
            self.server.requests.append((self.path, content_type, encoding))
        reply, media = export_response(content_type)
        self.send_response(200)
        self.send_header("Content-Type", media)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: object) -> None:
        pass  # keep test output quiet


@pytest.fixture
def receiver() -> Iterator[_Receiver]:
    server = _Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def _provider(service: str, endpoint: str, compression: Compression) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    exporter = OTLPSpanExporter(endpoint=endpoint, timeout=5, compression=compression)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def test_sdk_export_of_a_call_chain_decodes_to_services_parents_and_durations(
    receiver: _Receiver,
) -> None:
    endpoint = f"http://127.0.0.1:{receiver.server_address[1]}/v1/traces"
    providers = {
        "gateway": _provider("gateway", endpoint, Compression.NoCompression),
        "ranker": _provider("ranker", endpoint, Compression.Gzip),
        "embedder": _provider("embedder", endpoint, Compression.Deflate),
    }
    gateway, ranker, embedder = (providers[n].get_tracer("test") for n in providers)
    propagator = TraceContextTextMapPropagator()

    # gateway: server 0-100 ms, client call to ranker 5-95 ms.
    g_server = gateway.start_span("GET /search", kind=SpanKind.SERVER, start_time=T0)
    g_client = gateway.start_span(
        "POST ranker/rank",
        context=trace.set_span_in_context(g_server),
        kind=SpanKind.CLIENT,
        start_time=T0 + 5 * MS,
    )
    headers: dict[str, str] = {}
    propagator.inject(headers, context=trace.set_span_in_context(g_client))

    # ranker: server 10-90 ms from the propagated context, client call to embedder 20-70 ms.
    r_server = ranker.start_span(
        "rank", context=propagator.extract(headers), kind=SpanKind.SERVER, start_time=T0 + 10 * MS
    )
    r_client = ranker.start_span(
        "POST embedder/embed",
        context=trace.set_span_in_context(r_server),
        kind=SpanKind.CLIENT,
        start_time=T0 + 20 * MS,
    )
    headers = {}
    propagator.inject(headers, context=trace.set_span_in_context(r_client))

    # embedder: server 25-65 ms, failing.
    e_server = embedder.start_span(
        "embed", context=propagator.extract(headers), kind=SpanKind.SERVER, start_time=T0 + 25 * MS
    )
    e_server.set_status(Status(StatusCode.ERROR, "GPU out of memory"))
    for span, end_ms in [(e_server, 65), (r_client, 70), (r_server, 90), (g_client, 95)]:
        span.end(end_time=T0 + end_ms * MS)
    g_server.end(end_time=T0 + 100 * MS)
    for provider in providers.values():
        provider.shutdown()

    assert {(path, ct, enc) for path, ct, enc in receiver.requests} == {
        ("/v1/traces", "application/x-protobuf", None),
        ("/v1/traces", "application/x-protobuf", "gzip"),
        ("/v1/traces", "application/x-protobuf", "deflate"),
    }
    spans = {s.name: s for s in receiver.spans}
    assert len(receiver.spans) == 5
    assert {s.trace_id for s in spans.values()} == {f"{g_server.get_span_context().trace_id:032x}"}
    assert [spans[n].service for n in ("GET /search", "rank", "embed")] == [
        "gateway",
        "ranker",
        "embedder",
    ]
    assert spans["GET /search"].parent_span_id is None
    assert spans["POST ranker/rank"].parent_span_id == spans["GET /search"].span_id
    assert spans["rank"].parent_span_id == spans["POST ranker/rank"].span_id
    assert spans["embed"].parent_span_id == spans["POST embedder/embed"].span_id
    assert spans["embed"].span_id == f"{e_server.get_span_context().span_id:016x}"
    assert [spans[n].duration_ms for n in ("GET /search", "rank", "embed")] == [100.0, 80.0, 40.0]
    assert (spans["rank"].kind, spans["POST ranker/rank"].kind) == ("server", "client")
    assert spans["embed"].status == "error"

    stats = service_stats(receiver.spans)
    assert stats["gateway"].callees == ("ranker",)
    assert stats["ranker"].callers == ("gateway",)
    assert stats["ranker"].callees == ("embedder",)
    # Self time: gateway 100 - 80 ranker, ranker 80 - 40 embedder, embedder all 40.
    assert [stats[n].self_p95_ms for n in ("gateway", "ranker", "embedder")] == [20.0, 40.0, 40.0]
    assert stats["embedder"].error_count == 1
