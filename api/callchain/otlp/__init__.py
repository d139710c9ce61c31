"""Decode OTLP/HTTP trace exports (protobuf and JSON) into :class:`Span` records.

``POST /v1/traces`` receives an ``ExportTraceServiceRequest``: as protobuf
(``application/x-protobuf``, what the OpenTelemetry SDKs and the Collector send by
default) or in the OTLP JSON mapping (``application/json``: lowerCamelCase keys, trace
and span ids as hex strings, 64-bit times as decimal strings or numbers, enums as
integers). Both paths end in the same span builder, so one trace decodes to equal
records whichever way it came. Anything malformed raises
:class:`~forecaster.exceptions.DataValidationError` naming the field and where it is
(``resourceSpans[0].scopeSpans[0].spans[2].traceId``).

Leniency where real senders differ from the letter of the spec: snake_case keys are
accepted next to camelCase (protobuf's JSON parsers do the same), enum names
(``SPAN_KIND_SERVER``) next to integers, and base64 ids (protobuf's generic JSON
mapping, which some exporters use) next to hex; the lengths tell them apart. A resource
without ``service.name`` is ``unknown_service``, as the OpenTelemetry SDKs name it.

The package's modules, one concept each: :mod:`~api.callchain.otlp.media` (media
types and content encodings of the body), :mod:`~api.callchain.otlp.export` (the
``POST /v1/traces`` body in, its answer out), :mod:`~api.callchain.otlp.protobuf` and
:mod:`~api.callchain.otlp.json_mapping` (the two encodings) and
:mod:`~api.callchain.otlp.span` (the one span builder both end in).
"""
