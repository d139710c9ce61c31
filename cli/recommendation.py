"""``foresight recommendation``: what Foresight recommends per pool, from the service or the store.

Details: docs/layout.md, "Notes from the code", `cli/recommendation.py`."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from rich.table import Table
from rich.text import Text

from cli.support import ConfigOption, cli_errors, cli_settings, console
from forecaster.exceptions import ConfigError, ForesightError

if TYPE_CHECKING:
    import httpx
    from pydantic import SecretStr

    from api.settings import AppSettings

Source = Literal["auto", "service", "store"]
SOURCES: tuple[Source, ...] = ("auto", "service", "store")
DEFAULT_URL = "http://127.0.0.1:8000"
TIMEOUT_SECONDS = 5.0


class ServiceDownError(ForesightError):
    """The service did not answer at the URL given."""


def recommendation_command(
    pool: Annotated[
        str | None, typer.Option("--pool", help="One pool's recommendation; default every pool.")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the JSON the service serves.")
    ] = False,
    url: Annotated[
        str, typer.Option("--url", help="The running service's base URL.")
    ] = DEFAULT_URL,
    source: Annotated[
        str,
        typer.Option(
            "--from",
            help="auto (the service, else the store), service, or store.",
        ),
    ] = "auto",
    config: ConfigOption = None,
) -> None:
    """Show the recommended nodes per pool: from the running service, else the store."""
    with cli_errors():
        chosen = _source(source)
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"--url must start with http:// or https://, not {url!r}")
        settings = cli_settings(config)
        token = _read_token(settings.service.read_tokens, settings.service.write_tokens)
        pools, said = _recommendations(settings, chosen, url.rstrip("/"), token, pool)
    if as_json:
        console.print_json(json.dumps({"pools": pools}))
        return
    console.print(said, soft_wrap=True)
    console.print(_table(pools))


def _source(text: str) -> Source:
    for known in SOURCES:
        if text == known:
            return known
    raise ConfigError(f"--from must be one of {', '.join(SOURCES)}, not {text!r}")


def _read_token(*groups: tuple[SecretStr, ...]) -> str | None:
    for group in groups:
        for token in group:
            return str(token.get_secret_value())
    return None


def _recommendations(
    settings: AppSettings, source: Source, url: str, token: str | None, pool: str | None
) -> tuple[list[dict[str, Any]], str]:
    """The pools' recommendations as wire JSON, and a line saying where they came from."""
    if source != "store":
        try:
            return _from_service(url, token, pool), f"from the service at {url}"
        except ServiceDownError as exc:
            if source == "service":
                raise ConfigError(str(exc)) from exc
            fallback = f"{exc}; read from the store instead"
    else:
        fallback = "read from the store"
    return _from_store(settings, pool), fallback


def _from_service(url: str, token: str | None, pool: str | None) -> list[dict[str, Any]]:
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    path = "/recommendation" if pool is None else f"/recommendation/{pool}"
    try:
        answer = httpx.get(url + path, headers=headers, timeout=TIMEOUT_SECONDS)
    except httpx.HTTPError as exc:
        raise ServiceDownError(f"no service answered at {url} ({exc})") from exc
    if answer.status_code == 404 and pool is not None:
        raise ConfigError(_message(answer) or f"the service has no pool {pool!r}")
    if answer.status_code in (401, 403):
        raise ConfigError(
            f"the service at {url} refused the read ({answer.status_code}): set a read token "
            "in service.read_tokens (FORESIGHT_SERVICE__READ_TOKENS) or use --from store"
        )
    if answer.status_code != 200:
        raise ServiceDownError(
            f"the service at {url} answered {answer.status_code}: {_message(answer)}"
        )
    body = answer.json()
    return list(body["pools"]) if pool is None else [body]


def _message(answer: httpx.Response) -> str:
    try:
        return str(answer.json().get("message", ""))
    except ValueError:
        return answer.text[:200]


def _from_store(settings: AppSettings, pool: str | None) -> list[dict[str, Any]]:
    from pipelines.config.pools_file import load_pools
    from pipelines.store.store import open_store

    names = [entry.name for entry in load_pools(settings.pools_file).pools]
    if pool is not None and pool not in names:
        raise ConfigError(f"no pool {pool!r} in {settings.pools_file}; pools: {', '.join(names)}")
    out: list[dict[str, Any]] = []
    with open_store(settings.store_url) as store:
        for name in [pool] if pool is not None else names:
            stored = store.recommendations.latest(name)
            if stored is not None:
                out.append(dict(stored.payload))
    if not out:
        raise ConfigError(
            "the store holds no recommendation yet: start `foresight serve` (it decides and "
            "records one per pool), then run this again"
        )
    return out


def _table(pools: list[dict[str, Any]]) -> Table:
    table = Table(show_lines=False)
    for column, justify in (
        ("pool", "left"),
        ("now", "right"),
        ("want", "right"),
        ("action", "left"),
        ("mode", "left"),
        ("made (UTC)", "left"),
        ("why", "left"),
    ):
        table.add_column(column, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for entry in pools:
        explanation = entry.get("explanation") or {}
        table.add_row(
            str(entry.get("pool", "")),
            str(entry.get("current_nodes", "")),
            str(entry.get("desired_nodes", "")),
            str(entry.get("action", "")),
            str(entry.get("mode", "")),
            _made(entry.get("generated_at")),
            Text(str(explanation.get("summary", ""))),
        )
    return table


def _made(stamp: Any) -> str:
    """When a recommendation was made (the service's clock: a replay's is the data's)."""
    if not isinstance(stamp, str):
        return "-"
    try:
        made = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return "-"
    return made.astimezone(UTC).strftime("%Y-%m-%d %H:%M")
