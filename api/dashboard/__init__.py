"""The dashboard at ``GET /``: one page per deployment, drawn from the JSON routes.

A server-rendered shell lists the pools; small vanilla scripts (no build step, no CDN),
one per panel, read ``/pools``, ``/recommendation``, ``/dashboard/pool/{pool}``,
``/dashboard/status``, ``/signals/chain`` and ``/scorecard/{pool}`` and draw, per pool,
the nodes that existed against the nodes recommended with the scale events, the served
forecast band, a headline and a table of terms, and the freshness of each input; for the
deployment, the served model (linked in MLflow), its forecast run and the scheduler.
"""

from api.dashboard.router import page_router, router

__all__ = ["page_router", "router"]
