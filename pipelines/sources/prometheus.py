"""Samples from a Prometheus-compatible HTTP API (``/api/v1/query_range``) (docs/jobs.md)."""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import urlsplit, urlunsplit

import httpx
import pandas as pd
from pydantic import SecretStr

from forecaster.exceptions import ConfigError, SourceError
from forecaster.types import DS, UID, Y
from pipelines.sources.matrix import LabelSet, Matrix, combine, parse_matrix
from pipelines.sources.protocol import TimeLike, check_window, empty_frame, tidy

logger = logging.getLogger(__name__)

MAX_POINTS: Final = 11_000
"""Prometheus's limit of points per series in one ``query_range`` request."""
QUERY_RANGE_PATH: Final = "/api/v1/query_range"
_RETRY_STATUSES: Final = frozenset({429})
_MS_PER_S: Final = 1000
_NS_PER_MS: Final = 1_000_000
_SHOWN_LABEL_SETS: Final = 5

OnMultiple = Literal["error", "sum"]


@dataclass(frozen=True)
class PrometheusConfig:
    """How to reach a Prometheus server and how patiently.

    Secrets are :class:`pydantic.SecretStr` and kept out of ``repr``.

    Attributes:
        url: the server's base URL, e.g. ``http://prometheus:9090`` (a path prefix
            such as ``https://host/prometheus`` is kept).
        timeout_s: seconds to wait for connecting and for each response.
        max_attempts: tries per request before giving up, >= 1.
        backoff_s: the wait after the first failed try; doubled after each further one.
        max_backoff_s: the longest wait between two tries.
        max_points: points per series per request, in [1, 11000].
        on_multiple: what to do when a query returns several series: ``"error"``
            (list them) or ``"sum"`` (add them per timestamp).
        bearer_token: sent as ``Authorization: Bearer <token>``.
        username: basic-auth user; needs ``password``.
        verify_tls: check the server's certificate (turn off only for testing).
        ca_file: a PEM bundle of the CAs that signed the server's certificate.
        client_cert: a PEM client certificate for mutual TLS.
        client_key: the client certificate's key, if not inside ``client_cert``.
        headers: extra request headers, e.g. ``(("X-Scope-OrgID", "team-a"),)`` for
            a multi-tenant Mimir or Cortex.
        trust_env: honour ``HTTP(S)_PROXY`` / ``NO_PROXY`` and ``SSL_CERT_FILE``.
    """

    url: str
    timeout_s: float = 30.0
    max_attempts: int = 4
    backoff_s: float = 0.5
    max_backoff_s: float = 10.0
    max_points: int = MAX_POINTS
    on_multiple: OnMultiple = "error"
    bearer_token: SecretStr | None = field(default=None, repr=False)
    username: str | None = None
    password: SecretStr | None = field(default=None, repr=False)
    verify_tls: bool = True
    ca_file: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None
    headers: tuple[tuple[str, str], ...] = ()
    trust_env: bool = True

    def __post_init__(self) -> None:
        problems = []
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            problems.append(f"url {redact_url(self.url)!r} is not an http(s) URL with a host")
        if self.timeout_s <= 0:
            problems.append(f"timeout_s must be positive, got {self.timeout_s}")
        if self.max_attempts < 1:
            problems.append(f"max_attempts must be at least 1, got {self.max_attempts}")
        if self.backoff_s < 0 or self.max_backoff_s < 0:
            problems.append("backoff_s and max_backoff_s must not be negative")
        if not 1 <= self.max_points <= MAX_POINTS:
            problems.append(f"max_points must be in [1, {MAX_POINTS}], got {self.max_points}")
        if self.on_multiple not in ("error", "sum"):
            problems.append(f"on_multiple must be 'error' or 'sum', got {self.on_multiple!r}")
        if (self.username is None) != (self.password is None):
            problems.append("basic auth needs both username and password")
        if self.bearer_token is not None and self.username is not None:
            problems.append("set either bearer_token or username/password, not both")
        if not self.verify_tls and self.ca_file is not None:
            problems.append("ca_file is set but verify_tls is off; drop one of them")
        if problems:
            raise ConfigError("invalid Prometheus source: " + "; ".join(problems))


@dataclass(frozen=True)
class Window:
    """One ``query_range`` request: ``start`` to ``end`` inclusive, in epoch milliseconds."""

    start_ms: int
    end_ms: int
    step_ms: int

    def params(self, query: str) -> dict[str, str]:
        """The form parameters of the request."""
        return {
            "query": query,
            "start": _seconds(self.start_ms),
            "end": _seconds(self.end_ms),
            "step": _seconds(self.step_ms),
        }


def plan_windows(
    start: TimeLike, end: TimeLike, step: timedelta, max_points: int = MAX_POINTS
) -> list[Window]:
    """Split ``[start, end]`` into step-aligned windows of at most ``max_points`` points.

    Evaluation timestamps are multiples of ``step`` since the Unix epoch, so repeated
    fetches hit the same instants (and the same stored samples). ``start`` is rounded
    up and ``end`` down to the step, keeping every timestamp inside ``[start, end]``.
    Consecutive windows neither overlap nor leave a timestamp out.

    Raises:
        ValueError: ``step`` is not a positive whole number of milliseconds, ``end``
            precedes ``start``, or ``max_points`` is below 1.
    """
    first, last = check_window(start, end, step)
    step_ns = pd.Timedelta(step).value
    if step_ns % _NS_PER_MS:
        raise ValueError(f"step must be a whole number of milliseconds, got {step}")
    if max_points < 1:
        raise ValueError(f"max_points must be at least 1, got {max_points}")
    step_ms = step_ns // _NS_PER_MS
    # Aligned instants are whole milliseconds because the step is.
    first_ms = -(-first.value // step_ns) * step_ms
    last_ms = last.value // step_ns * step_ms
    windows = []
    span = (max_points - 1) * step_ms
    cursor = first_ms
    while cursor <= last_ms:
        stop = min(cursor + span, last_ms)
        windows.append(Window(cursor, stop, step_ms))
        cursor = stop + step_ms
    return windows


class PrometheusSource:
    """A :class:`~pipelines.sources.protocol.MetricSource` over Prometheus's HTTP API.

    Args:
        transport: an httpx transport to send requests through (tests pass an
            ``httpx.MockTransport``); default a real network transport.
        sleep: how to wait between tries (tests pass a recorder).

    The source keeps one HTTP client, so connections are reused across fetches;
    :meth:`close` it (or use it as a context manager) when done.

    Raises:
        ConfigError: a CA file or client certificate cannot be loaded.
    """

    def __init__(
        self,
        config: PrometheusConfig,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self._sleep = sleep
        self._endpoint = config.url.rstrip("/") + QUERY_RANGE_PATH
        self._client = _client(config, transport)

    def __repr__(self) -> str:
        return f"PrometheusSource(url={redact_url(self.config.url)!r})"

    def __enter__(self) -> PrometheusSource:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the HTTP client and its connections."""
        self._client.close()

    def fetch(
        self,
        queries: Mapping[str, str],
        start: TimeLike,
        end: TimeLike,
        step: timedelta,
    ) -> pd.DataFrame:
        """Evaluate each PromQL query over ``[start, end]`` at ``step``.

        See :meth:`pipelines.sources.protocol.MetricSource.fetch`. ``NaN`` and
        infinite values come back as NaN.

        Raises:
            SourceError: Prometheus stays unreachable or erroring through every try,
                rejects a query, or a query returns several series while
                ``on_multiple="error"``; the message names the URL, series and query.
            ValueError: the window or step is invalid.
        """
        windows = plan_windows(start, end, step, self.config.max_points)
        if not windows or not queries:
            return empty_frame()
        frames = []
        for series_id, query in queries.items():
            matrices = [self._query(series_id, query, window) for window in windows]
            frames.append(self._series(series_id, query, matrices))
        return tidy(frames)

    def _query(self, series_id: str, query: str, window: Window) -> list[Matrix]:
        """POST one window, retrying transient failures; return its series."""
        where = f"Prometheus at {redact_url(self.config.url)}"
        what = f"series {series_id!r}, query {query!r}"
        last_failure = ""
        for attempt in range(1, self.config.max_attempts + 1):
            try:
                # POST keeps long PromQL out of URL-length limits of proxies.
                response = self._client.post(self._endpoint, data=window.params(query))
            except httpx.TransportError as exc:
                last_failure = f"{type(exc).__name__}: {exc or 'no detail'}"
            else:
                if response.status_code < 400:
                    return self._parse(response, where, what)
                if response.status_code < 500 and response.status_code not in _RETRY_STATUSES:
                    raise SourceError(
                        f"{where} rejected the {what} with HTTP {response.status_code}: "
                        f"{_error_message(response)}. Fix the query in the pool config."
                    )
                last_failure = f"HTTP {response.status_code}: {_error_message(response)}"
            if attempt < self.config.max_attempts:
                delay = min(self.config.max_backoff_s, self.config.backoff_s * 2 ** (attempt - 1))
                logger.warning(
                    "%s failed (%s) for %s; try %d of %d in %.1f s",
                    where,
                    last_failure,
                    series_id,
                    attempt + 1,
                    self.config.max_attempts,
                    delay,
                )
                self._sleep(delay)
        raise SourceError(
            f"{where} failed {self.config.max_attempts} tries for the {what}; last failure: "
            f"{last_failure}. Check that the server is up and reachable from Foresight."
        )

    def _parse(self, response: httpx.Response, where: str, what: str) -> list[Matrix]:
        try:
            body = response.json()
        except ValueError as exc:
            raise SourceError(
                f"{where} answered the {what} with something that is not JSON "
                f"({response.headers.get('content-type', 'no content type')}); check that "
                "the URL points at the Prometheus API, not a login page or proxy"
            ) from exc
        if not isinstance(body, dict) or body.get("status") != "success":
            raise SourceError(
                f"{where} did not answer the {what} with success: {_describe_error(body)}"
            )
        for warning in body.get("warnings") or ():
            logger.warning("%s warns about the %s: %s", where, what, warning)
        try:
            return parse_matrix(body["data"])
        except (KeyError, TypeError, ValueError) as exc:
            raise SourceError(f"{where} sent an unexpected result for the {what}: {exc}") from exc

    def _series(self, series_id: str, query: str, matrices: list[list[Matrix]]) -> pd.DataFrame:
        parts = [matrix for window in matrices for matrix in window]
        label_sets = list(dict.fromkeys(matrix.labels for matrix in parts))
        if not parts:
            logger.warning("query for %s returned no data: %s", series_id, query)
            return empty_frame()
        if len(label_sets) > 1 and self.config.on_multiple == "error":
            raise SourceError(
                f"the query for {series_id!r} returned {len(label_sets)} series, expected one: "
                f"{_show(label_sets)}. Aggregate it, e.g. sum(...) or avg(...), or set "
                f"on_multiple='sum'. Query: {query!r}"
            )
        ds, y = combine(parts)
        return pd.DataFrame({UID: series_id, DS: pd.to_datetime(ds, unit="ms", utc=True), Y: y})


def redact_url(url: str) -> str:
    """Return ``url`` without a user name or password, for messages and logs."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return urlunsplit(parts._replace(netloc=netloc))


def _client(config: PrometheusConfig, transport: httpx.BaseTransport | None) -> httpx.Client:
    auth: httpx.Auth | None = None
    headers = dict(config.headers)
    if config.bearer_token is not None:
        headers["Authorization"] = f"Bearer {config.bearer_token.get_secret_value()}"
    if config.username is not None and config.password is not None:
        auth = httpx.BasicAuth(config.username, config.password.get_secret_value())
    return httpx.Client(
        auth=auth,
        headers=headers,
        verify=_tls_verify(config),
        timeout=httpx.Timeout(config.timeout_s),
        transport=transport,
        trust_env=config.trust_env,
    )


def _tls_verify(config: PrometheusConfig) -> ssl.SSLContext | bool:
    if config.ca_file is None and config.client_cert is None:
        return config.verify_tls
    try:
        context = ssl.create_default_context(
            cafile=str(config.ca_file) if config.ca_file is not None else None
        )
        if not config.verify_tls:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if config.client_cert is not None:
            context.load_cert_chain(config.client_cert, config.client_key)
    except (OSError, ssl.SSLError) as exc:
        files = [str(p) for p in (config.ca_file, config.client_cert, config.client_key) if p]
        raise ConfigError(
            f"cannot load the TLS files {files} of the Prometheus source: {exc}; "
            "give PEM files that exist and are readable"
        ) from exc
    return context


def _error_message(response: httpx.Response) -> str:
    try:
        body: Any = response.json()
    except ValueError:
        text = response.text.strip()
        return text[:300] or response.reason_phrase
    return _describe_error(body)


def _describe_error(body: Any) -> str:
    if isinstance(body, dict) and "error" in body:
        kind = body.get("errorType")
        return f"{kind}: {body['error']}" if kind else str(body["error"])
    return repr(body)[:300]


def _show(label_sets: Sequence[LabelSet]) -> str:
    shown = [
        "{" + ", ".join(f'{k}="{v}"' for k, v in labels) + "}"
        for labels in label_sets[:_SHOWN_LABEL_SETS]
    ]
    more = len(label_sets) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _seconds(ms: int) -> str:
    return f"{ms / _MS_PER_S:.3f}"
