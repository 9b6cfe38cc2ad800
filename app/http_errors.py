"""Starlette's own HTTP errors (unknown path, method not allowed, unreadable body) in the standard error shape,
with a truthful Allow header: every method some route of the path accepts, not only the first route's."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.routing import Route

from app.errors import error_body

MESSAGES = {
    404: "no such path: see the API's paths in /openapi.json",
    405: "method not allowed on this path: the Allow header lists the methods it takes",
}


def allowed_methods(request: Request) -> list[str]:
    path = request.url.path
    methods: set[str] = set()
    for route in request.app.routes:
        if isinstance(route, Route) and route.methods and route.path_regex.match(path):
            methods |= route.methods
    return sorted(methods | {"OPTIONS"}) if methods else []


async def http_error(request: Request, exc: HTTPException) -> Response:
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        allow = allowed_methods(request)
        headers["Allow"] = ", ".join(allow)
        if request.method == "OPTIONS" and allow:
            return Response(status_code=204, headers=headers)  # OPTIONS answers which methods the path takes
    message = MESSAGES.get(exc.status_code) or (exc.detail if isinstance(exc.detail, str) else "request refused")
    return JSONResponse(error_body(message), status_code=exc.status_code, headers=headers)
