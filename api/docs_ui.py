"""``/docs`` and ``/redoc`` served with their scripts and styles, no CDN needed (docs/api.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import fastapi_offline
from fastapi import FastAPI, HTTPException, status
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import FileResponse, HTMLResponse

ASSETS_DIR: Final = Path(fastapi_offline.__file__).parent / "static"
ASSETS_URL: Final = "/docs/assets"
ASSETS: Final = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "redoc.standalone.js": "text/javascript",
    "favicon.png": "image/png",
}
"""The files served under :data:`ASSETS_URL`, with their media types."""


def install_docs(app: FastAPI, *, docs_url: str = "/docs", redoc_url: str = "/redoc") -> None:
    """Serve the interactive API docs and ReDoc from packaged assets.

    Create the app with ``docs_url=None, redoc_url=None`` so FastAPI's CDN pages are
    not registered too.
    """
    openapi_url = app.openapi_url or "/openapi.json"
    redirect_url = app.swagger_ui_oauth2_redirect_url or f"{docs_url}/oauth2-redirect"

    @app.get(docs_url, include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{app.title} - API docs",
            oauth2_redirect_url=redirect_url,
            swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_URL}/favicon.png",
        )

    @app.get(redirect_url, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get(redoc_url, include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url,
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS_URL}/favicon.png",
            with_google_fonts=False,
        )

    @app.get(f"{ASSETS_URL}/{{name}}", include_in_schema=False)
    async def docs_asset(name: str) -> FileResponse:
        media_type = ASSETS.get(name)
        if media_type is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no docs asset {name!r}")
        return FileResponse(
            ASSETS_DIR / name, media_type=media_type, headers={"Cache-Control": "max-age=3600"}
        )
