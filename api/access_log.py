"""Keep secrets out of the access log: no query string of a refused request, no token.

Details: docs/api.md, "Notes from the code", `api/access_log.py`."""

from __future__ import annotations

import logging
import re
from typing import Final
from urllib.parse import parse_qsl, urlencode

ACCESS_LOGGER: Final = "uvicorn.access"
"""The logger uvicorn writes one record per request to."""

SECRET_PARAMETER: Final = re.compile(
    r"token|key|secret|password|passwd|auth|credential|signature|session", re.IGNORECASE
)
"""Query parameter names whose values are never logged."""

REDACTED: Final = "***"


def redact_path(path: str, status: int) -> str:
    """Return ``path`` as it may be logged for a response of ``status``."""
    route, sep, query = path.partition("?")
    if not sep:
        return path
    if status >= 400:
        return route
    pairs = parse_qsl(query, keep_blank_values=True)
    kept = [(name, REDACTED if SECRET_PARAMETER.search(name) else value) for name, value in pairs]
    return f"{route}?{urlencode(kept, safe='*')}"


class RedactQueryStrings(logging.Filter):
    """Rewrite uvicorn access records (client, method, path, version, status) in place."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact the path argument; always keep the record."""
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str):
            status = args[4] if isinstance(args[4], int) else 0
            record.args = (args[0], args[1], redact_path(args[2], status), args[3], args[4])
        return True


def install_redaction(logger_name: str = ACCESS_LOGGER) -> RedactQueryStrings:
    """Add the filter to the access logger (once) and return it."""
    logger = logging.getLogger(logger_name)
    for existing in logger.filters:
        if isinstance(existing, RedactQueryStrings):
            return existing
    installed = RedactQueryStrings()
    logger.addFilter(installed)
    return installed
