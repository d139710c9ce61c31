"""The dashboard at ``GET /``: one page per deployment, drawn from the JSON routes.

Details: docs/dashboard.md, "Notes from the code", `api/dashboard/__init__.py`."""

from api.dashboard.router import page_router, router

__all__ = ["page_router", "router"]
