"""The service's front door: ``GET /`` leads to the dashboard, and ``/docs`` (Swagger UI) is served from the vendored
copy under the dashboard's static files (app/ui/static/vendor/README.md), so it renders offline. ReDoc, which FastAPI
would load from a CDN, is not served."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse, RedirectResponse

SWAGGER_UI = "/ui/static/vendor/swagger-ui-dist-5.35.0"
DOCS_URL = "/docs"
OAUTH2_REDIRECT_URL = "/docs/oauth2-redirect"


def mount_docs(app: FastAPI) -> None:
    """``/`` and ``/docs`` on ``app``, built with ``docs_url=None, redoc_url=None`` (FastAPI's own pages use a CDN)."""

    @app.get("/", include_in_schema=False)
    def front_door() -> RedirectResponse:
        return RedirectResponse("/ui/", status_code=307)

    @app.get(DOCS_URL, include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} — API",
            swagger_js_url=f"{SWAGGER_UI}/swagger-ui-bundle.js",
            swagger_css_url=f"{SWAGGER_UI}/swagger-ui.css",
            swagger_favicon_url=f"{SWAGGER_UI}/favicon-32x32.png",
            oauth2_redirect_url=OAUTH2_REDIRECT_URL,
        )

    @app.get(OAUTH2_REDIRECT_URL, include_in_schema=False)
    def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()
