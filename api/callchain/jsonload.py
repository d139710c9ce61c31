"""Parse a JSON request body so that every way it can fail is a validation error (docs/api.md)."""

from __future__ import annotations

import json
import sys
from typing import Any

from forecaster.exceptions import DataValidationError


def json_problem(exc: BaseException) -> str:
    """Say why a body failed to parse as JSON, for the sender (field, rule, position)."""
    if isinstance(exc, RecursionError):
        return "the body is not valid JSON for this route: it is nested too deeply"
    if isinstance(exc, UnicodeDecodeError):
        return (
            f"the body is not UTF-8 (byte {exc.start} cannot be decoded); send uncompressed "
            "UTF-8 JSON (or declare Content-Encoding where the route accepts it)"
        )
    if isinstance(exc, json.JSONDecodeError):
        return (
            f"the body is not valid JSON (line {exc.lineno}, column {exc.colno}); send a "
            "JSON document"
        )
    if isinstance(exc, ValueError) and "digits" in str(exc):
        limit = sys.get_int_max_str_digits()
        return (
            f"the body holds a number of more than {limit} digits; numbers must be plain "
            "JSON numbers (Unix nanoseconds fit in 20 digits)"
        )
    return "the body is not valid UTF-8 JSON"


def load_json(body: bytes | str) -> Any:
    """Parse a JSON body.

    Besides syntax errors, ``json.loads`` fails on nesting deeper than the interpreter's
    recursion limit (``RecursionError``) and on integers beyond Python's digit limit
    (a plain ``ValueError``); all of them mean a malformed body (the routes' 400/422).

    Raises:
        DataValidationError: the body is not valid UTF-8 JSON, or is nested too deeply.
    """
    try:
        return json.loads(body)
    except (RecursionError, UnicodeDecodeError, ValueError) as exc:
        raise DataValidationError(json_problem(exc)) from exc
