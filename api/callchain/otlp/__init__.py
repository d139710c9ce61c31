"""Decode OTLP/HTTP trace exports (protobuf and JSON) into :class:`Span` records (docs/api.md)."""
