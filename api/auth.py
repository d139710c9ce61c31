"""Bearer tokens with a read and a write scope, checked in constant time.

Tokens are kept as SHA-256 digests and compared with hmac.compare_digest against every
configured one.
Details: docs/api.md, "Notes from the code", `api/auth.py`."""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Iterable
from typing import Annotated, Final, Literal

from fastapi import Depends, FastAPI, HTTPException, Request, Security, status
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.errors import error_body
from api.settings import ServiceSettings
from forecaster.exceptions import ConfigError, ForesightError

logger = logging.getLogger(__name__)

Scope = Literal["read", "write"]
"""What a token may do; a write token may also read."""

READ_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods that only read; every other method needs the write scope."""

REALM: Final = "foresight"


class AuthError(ForesightError):
    """A request lacks the token its route needs (401) or the scope (403)."""

    status_code: int = status.HTTP_401_UNAUTHORIZED
    code: str = "unauthorized"

    @property
    def challenge(self) -> str:
        """The ``WWW-Authenticate`` value of the answer."""
        return f'Bearer realm="{REALM}"'


class MissingTokenError(AuthError):
    """No ``Authorization: Bearer <token>`` header where a token is needed."""


class InvalidTokenError(AuthError):
    """The bearer token matches no configured token."""

    code = "invalid_token"

    @property
    def challenge(self) -> str:
        """The challenge with RFC 6750's ``invalid_token`` error code."""
        return f'Bearer realm="{REALM}", error="invalid_token"'


class InsufficientScopeError(AuthError):
    """A valid read token was presented for a write."""

    status_code = status.HTTP_403_FORBIDDEN
    code = "insufficient_scope"

    @property
    def challenge(self) -> str:
        """The challenge naming the scope that was missing."""
        return f'Bearer realm="{REALM}", error="insufficient_scope", scope="write"'


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def _matches(digest: bytes, configured: tuple[bytes, ...]) -> bool:
    # No early exit: every configured token is compared whatever matched before.
    found = False
    for candidate in configured:
        found |= hmac.compare_digest(digest, candidate)
    return found


class TokenGuard:
    """Decides whether a bearer token may read or write.

    Args:
        read_tokens: tokens allowed to read.
        write_tokens: tokens allowed to read and write.

    Raises:
        ConfigError: a token is empty or has surrounding whitespace (it could never be
            presented in a header as configured).
    """

    def __init__(self, read_tokens: Iterable[str] = (), write_tokens: Iterable[str] = ()) -> None:
        reads, writes = list(read_tokens), list(write_tokens)
        for token in (*reads, *writes):
            if not token or token != token.strip():
                raise ConfigError(
                    "an API token is empty or has surrounding whitespace; set "
                    "service.read_tokens / service.write_tokens to non-empty tokens"
                )
        self._read = tuple(_digest(token) for token in reads)
        self._write = tuple(_digest(token) for token in writes)

    @classmethod
    def from_settings(cls, settings: ServiceSettings) -> TokenGuard:
        """Build the guard of the service settings' tokens."""
        return cls(
            (t.get_secret_value() for t in settings.read_tokens),
            (t.get_secret_value() for t in settings.write_tokens),
        )

    @property
    def is_open(self) -> bool:
        """True when no token is configured: everything is allowed."""
        return not self._read and not self._write

    def scopes(self, token: str) -> frozenset[Scope]:
        """Return what ``token`` may do (empty when it matches no configured token)."""
        digest = _digest(token)
        in_write = _matches(digest, self._write)
        in_read = _matches(digest, self._read)
        if in_write:
            return frozenset({"read", "write"})
        return frozenset({"read"}) if in_read else frozenset()

    def check(self, needed: Scope, token: str | None) -> None:
        """Allow the request or raise why not.

        Args:
            token: the presented bearer token, None without one.

        Raises:
            MissingTokenError: a token is needed and none was presented.
            InvalidTokenError: the token matches no configured token.
            InsufficientScopeError: a read token was presented for a write.
        """
        if self.is_open or (needed == "read" and not self._read):
            return
        if token is None:
            raise MissingTokenError(
                f"this {needed} needs a bearer token: send 'Authorization: Bearer <token>' "
                f"with a {'write' if needed == 'write' else 'read or write'} token"
            )
        granted = self.scopes(token)
        if not granted:
            raise InvalidTokenError("the bearer token is not a configured token")
        if needed not in granted:
            raise InsufficientScopeError(
                "this token may only read; writes (POST) need a token from service.write_tokens"
            )


MIN_TOKEN_LENGTH: Final = 16
"""The shortest token accepted when serving beyond loopback (``openssl rand -hex 32``
gives 64 characters)."""

_PLACEHOLDERS: Final = frozenset(
    {"changeme", "change-me", "change_me", "replaceme", "replace-me", "secret", "password",
     "token", "test", "example", "default", "admin", "foresight", "xxx", "todo"}
)  # fmt: skip
_PLACEHOLDER_PREFIXES: Final = ("change-me", "changeme", "change_me", "replace-me", "your-")


def is_placeholder(token: str) -> bool:
    """True for a well-known placeholder (``CHANGE-ME-read-token``, ``secret``, ...)."""
    lowered = token.strip().lower()
    return lowered in _PLACEHOLDERS or lowered.startswith(_PLACEHOLDER_PREFIXES)


def token_problems(settings: ServiceSettings, *, exposed: bool) -> list[str]:
    """Say why the configured tokens may not be used, one sentence per token ([] if fine).

    An empty token or one with surrounding whitespace is refused everywhere (it could
    never be presented as configured); when ``exposed`` (listening beyond loopback) a
    well-known placeholder or a token under :data:`MIN_TOKEN_LENGTH` characters is
    refused too. The messages name the setting and the rule, never the token.
    """
    problems: list[str] = []
    for field, tokens in (
        ("read_tokens", settings.read_tokens),
        ("write_tokens", settings.write_tokens),
    ):
        for index, secret in enumerate(tokens):
            token = secret.get_secret_value()
            where = f"service.{field}[{index}]"
            if not token or token != token.strip():
                problems.append(f"{where} is empty or has surrounding whitespace")
            elif exposed and is_placeholder(token):
                problems.append(
                    f"{where} is a well-known placeholder (such as CHANGE-ME-...); replace it "
                    "with a random token, e.g. `openssl rand -hex 32`"
                )
            elif exposed and len(token) < MIN_TOKEN_LENGTH:
                problems.append(
                    f"{where} has {len(token)} characters; a token must have at least "
                    f"{MIN_TOKEN_LENGTH} when serving beyond loopback"
                )
    return problems


def warn_if_open(guard: TokenGuard) -> None:
    """Log, once per start, that the API is unguarded."""
    if guard.is_open:
        logger.warning(
            "no API tokens are configured: anyone who reaches the service may read and write "
            "(push samples and spans); set service.read_tokens and service.write_tokens"
        )


_BEARER: Final = HTTPBearer(
    auto_error=False,
    scheme_name="bearer",
    description="a read or write token from service.read_tokens / service.write_tokens; "
    "not needed when none is configured",
)


async def authorize(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(_BEARER)],
) -> None:
    """Check the request's bearer token against the route's scope (its HTTP method).

    Raises:
        AuthError: the token is missing, unknown or lacks the scope.
        HTTPException: 503 before the app has started (no guard yet).
    """
    guard: TokenGuard | None = getattr(request.app.state, "auth", None)
    if guard is None:
        raise HTTPException(
            status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
            detail="the service is starting; retry shortly",
            headers={"Retry-After": "5"},
        )
    needed: Scope = "read" if request.method in READ_METHODS else "write"
    guard.check(needed, None if credentials is None else credentials.credentials)


async def may_read(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(_BEARER)],
) -> bool:
    """Return whether the request may see details (``/readyz``): never refused.

    True when no token is configured at all, or the request carries a read or write
    token; a probe without one (or with a wrong one) gets False, not a 401.
    """
    guard: TokenGuard | None = getattr(request.app.state, "auth", None)
    if guard is None:
        return False
    if guard.is_open:
        return True
    return credentials is not None and "read" in guard.scopes(credentials.credentials)


ReaderDep = Annotated[bool, Depends(may_read)]
"""Whether the request may read details; see :func:`may_read`."""


async def authorize_metrics(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(_BEARER)],
) -> None:
    """Guard ``/metrics`` like a read, unless ``service.metrics_public`` opens it.

    The gauges show each pool's desired and current nodes, i.e. the recommendations.

    Raises:
        AuthError: a read token is needed and missing or unknown.
        HTTPException: 503 before the app has started.
    """
    services = getattr(request.app.state, "services", None)
    if services is not None and services.settings.service.metrics_public:
        return
    await authorize(request, credentials)


AUTH_RESPONSES: Final[dict[int | str, dict[str, str]]] = {
    401: {"description": "a bearer token is needed, or the token is not a configured one"},
    403: {"description": "the token may only read; writes need a write token"},
}
"""The answers :func:`authorize` may give, for the OpenAPI document."""


async def _auth_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, AuthError)  # registered for AuthError only
    return JSONResponse(
        error_body(exc.code, str(exc)),
        status_code=exc.status_code,
        headers={"WWW-Authenticate": exc.challenge},
    )


def install_auth_handlers(app: FastAPI) -> None:
    """Answer :class:`AuthError` with 401/403 and a ``WWW-Authenticate`` challenge."""
    app.add_exception_handler(AuthError, _auth_error)
