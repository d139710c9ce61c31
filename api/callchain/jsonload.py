"""Parse a JSON request body so that every way it can fail is a validation error."""

from __future__ import annotations

import json
from typing import Any

from forecaster.exceptions import DataValidationError


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
    except RecursionError as exc:
        raise DataValidationError(
            "the body is not valid JSON for this route: it is nested too deeply"
        ) from exc
    except (UnicodeDecodeError, ValueError) as exc:
        raise DataValidationError(f"the body is not valid UTF-8 JSON: {exc}") from exc
