"""Decode OTLP/HTTP trace exports (protobuf and JSON) into :class:`Span` records.

Details: docs/api.md, "Notes from the code", `api/callchain/otlp/__init__.py`."""
