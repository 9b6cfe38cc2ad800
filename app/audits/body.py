"""POST /audits bodies: parsed in a worker thread, and refused by their kind's size limit before validation.

FastAPI parses a JSON body (``json.loads``) and validates it against the schema in the event loop: a 21 MB body
took 30 s (mostly validation of 700,000 list items) during which no other request was answered, ``/health``
included. Here the route's request parses its body in a thread, and the body is refused (413, naming the kind
and its limit) when it is larger than its kind needs (``AuditKind.max_body_bytes``; a subject's 50 facts fit in
a few kilobytes, a capacity grid too) or holds more JSON values than any audit needs (``MAX_JSON_VALUES``). What
is left to validate in the event loop is then small. Large lists of people go to ``POST /batches``."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
from fastapi import Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from app.audits.kinds import AuditKind, KindRegistry
from app.errors import error_body
from app.settings import get_settings

MAX_JSON_VALUES = 50_000  # objects, arrays, strings, numbers… in one audit's body (a dynamics audit's 5,000
# strings are 15,000; validating 50,000 takes tens of milliseconds, 2 million took seconds)


LEADING_KIND = re.compile(rb'\s*\{\s*"kind"\s*:\s*"([a-z_]{1,40})"')


class TooLarge(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _count_values(value: Any, budget: int) -> int:
    """How many JSON values ``value`` holds, counting stops past ``budget`` (iterative: no recursion limit)."""
    seen, stack = 0, [value]
    while stack and seen <= budget:
        item = stack.pop()
        seen += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return seen


def _check_size(body: bytes, kind: AuditKind | None) -> None:
    if kind is None:
        return
    limit = kind.max_body_bytes or get_settings().max_request_bytes
    if len(body) > limit:
        raise TooLarge(
            f"a {kind.name} audit's body is at most {limit:,} bytes, this one is {len(body):,}: send only what "
            "the schema describes (many people go to POST /batches)"
        )


def parse(body: bytes, kinds: KindRegistry) -> Any:
    """The parsed body, or TooLarge; a JSON error (or a body nested past json's recursion limit) is raised as
    json raises it, for FastAPI to answer as it does any unreadable body. A body that names its kind first (as
    clients write it) is measured against its kind's limit before it is parsed at all."""
    first = LEADING_KIND.match(body[:200])
    if first is not None:
        _check_size(body, kinds.get(first.group(1).decode()))
    data = json.loads(body)
    if isinstance(data, dict) and isinstance(data.get("kind"), str):
        _check_size(body, kinds.get(data["kind"]))
    if _count_values(data, MAX_JSON_VALUES) > MAX_JSON_VALUES:
        raise TooLarge(
            f"an audit's body holds at most {MAX_JSON_VALUES:,} JSON values: send only what the schema describes"
        )
    return data


def _json_content(content_type: str | None) -> bool:
    """FastAPI reads a body as JSON when it says so, or says nothing."""
    if not content_type:
        return True
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


class _ParsedRequest(Request):
    """A request whose ``json()`` is the body already parsed in a thread (FastAPI's documented way to change how
    a route reads its body: a Request subclass handed to the route's handler)."""

    def __init__(self, request: Request, body: bytes, parsed: Any, error: BaseException | None) -> None:
        super().__init__(request.scope, request.receive)
        self._raw, self._parsed, self._error = body, parsed, error

    async def body(self) -> bytes:
        return self._raw

    async def json(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._parsed


class ThreadParsedRoute(APIRoute):
    """The route of POST /audits: the body parsed in a thread and its kind's size limit applied, before FastAPI
    validates it."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            body = await request.body()  # already read whole by app.middleware.RequestGuard, within its limits
            parsed, error = None, None
            if body and _json_content(request.headers.get("content-type")):
                try:
                    parsed = await anyio.to_thread.run_sync(parse, body, request.app.state.kinds)
                except TooLarge as exc:
                    return JSONResponse(error_body(exc.message, "body"), status_code=413)
                except (ValueError, RecursionError) as exc:  # json's own errors: FastAPI answers them
                    error = exc
            return await handler(_ParsedRequest(request, body, parsed, error))

        return route
