"""The body of an OTLP/HTTP export as sent: its media type and its content encoding."""

from __future__ import annotations

import zlib
from typing import Final

from api.callchain.types import PayloadTooLargeError, UnsupportedMediaTypeError
from forecaster.exceptions import DataValidationError

PROTOBUF: Final = "application/x-protobuf"
"""The OTLP/HTTP protobuf media type."""

JSON: Final = "application/json"
"""The OTLP/HTTP JSON media type."""

DEFAULT_MAX_DECOMPRESSED_BYTES: Final = 16 * 1024 * 1024
"""The largest body accepted after decompression (guards against compression bombs)."""


def media_type(content_type: str | None) -> str:
    """Return the bare, lower-case media type of a ``Content-Type`` header ('' if None)."""
    if content_type is None:
        return ""
    return content_type.split(";", 1)[0].strip().lower()


def decompress(body: bytes, content_encoding: str | None, max_bytes: int) -> bytes:
    """Undo a ``Content-Encoding`` of gzip or deflate, never producing more than ``max_bytes``.

    Raises:
        UnsupportedMediaTypeError: the encoding is not identity, gzip or deflate.
        PayloadTooLargeError: the body, decompressed, exceeds ``max_bytes``.
        DataValidationError: the compressed stream is corrupt or truncated.
    """
    encoding = (content_encoding or "identity").strip().lower()
    if encoding == "identity":
        raw = body
    elif encoding in {"gzip", "x-gzip", "deflate"}:
        # wbits 32 + 15 accepts both the gzip and the zlib header; decompressing with a cap
        # stops a small bomb from inflating to gigabytes before the size check.
        inflater = zlib.decompressobj(wbits=zlib.MAX_WBITS | 32)
        try:
            raw = inflater.decompress(body, max_bytes + 1)
        except zlib.error as exc:
            raise DataValidationError(
                f"the body is not a valid {encoding} stream (Content-Encoding: {encoding}); "
                "send it compressed whole, or uncompressed without the header"
            ) from exc
        if len(raw) <= max_bytes and not inflater.eof:
            raise DataValidationError(f"the {encoding} body is truncated")
    else:
        raise UnsupportedMediaTypeError(
            f"content encoding {content_encoding!r} is not supported; use gzip, deflate or none"
        )
    if len(raw) > max_bytes:
        raise PayloadTooLargeError(
            f"the trace export is larger than {max_bytes} bytes once decompressed; "
            "send smaller batches"
        )
    return raw
