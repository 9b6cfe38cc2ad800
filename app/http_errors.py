"""Starlette's own HTTP errors (unknown path, method not allowed, unreadable body) in the standard error shape,
with a truthful Allow header: every method some route of the path accepts, not only the first route's."""

from __future__ import annotations

import re
from functools import lru_cache

from fastapi import Request
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from app.errors import error_body

HTTP_METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"}
MESSAGES = {
    404: "no such path: see the API's paths in /openapi.json",
    405: "method not allowed on this path: the Allow header lists the methods it takes",
}

# FastAPI's own 400 for a body its JSON parser gave up on without a decode error: above all one nested deeper than
# the parser's recursion limit (e.g. 100,000 "[" in a row)
UNPARSED_BODY = "There was an error parsing the body"
UNPARSED_MESSAGE = (
    "the body could not be read: it must be one JSON object, nested no deeper than the schema describes"
    " (a few levels; thousands of nested brackets are refused)"
)


def allowed_methods(request: Request) -> list[str]:
    """The methods the OpenAPI document lists for this path (routers nest differently across FastAPI versions;
    the document is the contract), with HEAD beside GET and OPTIONS."""
    methods: set[str] = set()
    for template, operations in request.app.openapi().get("paths", {}).items():
        if _template_regex(template).fullmatch(request.url.path):
            methods |= {m.upper() for m in operations if m.upper() in HTTP_METHODS}
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods | {"OPTIONS"}) if methods else []


@lru_cache(maxsize=256)
def _template_regex(template: str) -> re.Pattern[str]:
    return re.compile(re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)))


async def http_error(request: Request, exc: HTTPException) -> Response:
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        allow = allowed_methods(request) or [m.strip() for m in headers.get("Allow", "").split(",") if m.strip()]
        headers["Allow"] = ", ".join(allow)
        if request.method == "OPTIONS" and allow:
            return Response(status_code=204, headers=headers)  # OPTIONS answers which methods the path takes
    if exc.status_code == 400 and exc.detail == UNPARSED_BODY:  # FastAPI's answer to a body json cannot read
        return JSONResponse(error_body(UNPARSED_MESSAGE, "body"), status_code=400, headers=headers)
    message = MESSAGES.get(exc.status_code) or (exc.detail if isinstance(exc.detail, str) else "request refused")
    return JSONResponse(error_body(message), status_code=exc.status_code, headers=headers)
