"""Call-chain latency signals: trace ingestion, a sliding window of spans, bottlenecks.

Ingestion (the routes call these): :func:`decode_export` for ``POST /v1/traces``
(OTLP/HTTP protobuf or JSON; answer with :func:`export_response`) and
:func:`decode_span_list_batch` for ``POST /signals/spans``; both return the valid
:class:`Span` records, and why the others were rejected, for
:meth:`ChainWindow.add <api.callchain.incremental.ChainWindow.add>`, whose ``stats``
gives :class:`ServiceStats` per service, and :func:`analyse` turns them, with the
pools' SLOs, into one ``LatencyAdjustment`` per pool and a :class:`ServiceReport` per
service.
"""
