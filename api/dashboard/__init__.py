"""The dashboard at ``GET /``: one page per deployment, drawn from the JSON routes.

A server-rendered shell lists the pools; a small vanilla script (no build step, no
CDN) reads ``/pools``, ``/recommendation``, ``/forecast/{pool}`` and
``/dashboard/history/{pool}`` and draws each pool's demand, forecast interval and
recommended capacity as inline SVG beside the explanation.
"""

from api.dashboard.router import page_router, router

__all__ = ["page_router", "router"]
