"""The dashboard's HTML shell and static assets, read from the package's ``static/``.

Details: docs/dashboard.md, "Notes from the code", `api/dashboard/page.py`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from html import escape
from importlib.resources import files
from string import Template
from typing import Final

ASSETS: Final = {
    "common.js": "text/javascript; charset=utf-8",
    "chart.js": "text/javascript; charset=utf-8",
    "status.js": "text/javascript; charset=utf-8",
    "chain.js": "text/javascript; charset=utf-8",
    "dashboard.js": "text/javascript; charset=utf-8",
    "dashboard.css": "text/css; charset=utf-8",
    "scorecard.js": "text/javascript; charset=utf-8",
    "scorecard.css": "text/css; charset=utf-8",
}
"""The static files served under ``/dashboard/static/``, with their media types."""

ROUTES: Final = {
    "pools": "pools",
    "recommendation": "recommendation",
    "forecast": "forecast/",
    "history": "dashboard/history/",
    "pool_view": "dashboard/pool/",
    "status": "dashboard/status",
    "docs": "docs",
    "scorecard": "scorecard/",
}
"""The JSON routes the page reads, relative to the page (so a path prefix still works)."""


@cache
def asset_text(name: str) -> str:
    """Return a static asset's text (read once per process).

    Raises:
        KeyError: ``name`` is not one of :data:`ASSETS`.
    """
    if name not in ASSETS:
        raise KeyError(name)
    return files("api.dashboard").joinpath("static", name).read_text(encoding="utf-8")


@cache
def _template() -> Template:
    return Template(files("api.dashboard").joinpath("static", "index.html").read_text("utf-8"))


def pool_section(name: str) -> str:
    """Return the placeholder section of one pool, filled in by the script."""
    pool = escape(name, quote=True)
    return (
        f'<section class="pool" id="pool-{pool}" data-pool="{pool}" aria-busy="true">'
        f'<h2 class="pool-name">{pool}</h2>'
        '<p class="status">loading…</p>'
        "</section>"
    )


def render_page(pools: Sequence[str], *, bottlenecks_url: str | None = None) -> str:
    """Return the dashboard page listing ``pools``.

    Args:
        pools: pool names in the pools file's order.
        bottlenecks_url: a JSON route listing call-chain bottlenecks, relative to the
            page; None when the app has none (the page then shows only the latency
            term of each explanation).
    """
    config = {**ROUTES, "bottlenecks": bottlenecks_url, "pool_names": list(pools)}
    # "</" inside a script element would end it early; JSON allows "<\/".
    config_json = json.dumps(config).replace("</", "<\\/")
    return _template().substitute(
        pool_count=len(pools),
        pool_sections="\n".join(pool_section(name) for name in pools),
        config_json=config_json,
    )
