"""Call-chain latency signals: trace ingestion, a sliding window of spans, bottlenecks.

Ingestion (the routes call these): :func:`decode_export_request` for ``POST /v1/traces``
(OTLP/HTTP protobuf or JSON; answer with :func:`export_response`) and
:func:`decode_span_list` for ``POST /signals/spans``; both return :class:`Span` records
for :meth:`ChainWindow.add <api.callchain.incremental.ChainWindow.add>`, whose
``stats`` gives :class:`ServiceStats` per service, and :func:`analyse` turns them,
with the pools' SLOs, into one ``LatencyAdjustment`` per pool and a
:class:`ServiceReport` per service.
"""
