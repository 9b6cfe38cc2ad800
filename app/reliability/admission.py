"""Admission control: at most ``max_concurrent_requests`` requests inside the application at once; the others
wait in the event loop, holding neither a thread nor a database connection.

Why: a request holds its database connection from its first query until the session dependency exits, and
between those it needs more turns of the thread pool (the endpoint, the dependency's exit). With more requests
inside than connections, threads block waiting for a connection while the requests holding the connections
wait for a thread: the API stops until the pool's 30 s timeout turns them into 500s (measured: 100 concurrent
clients, every request timed out). Admitting fewer requests than the pool has connections keeps every admitted
request able to finish; the queue in front of it is a cheap asyncio wait.

What waits here has already been authenticated and has its whole body read (app.middleware.RequestGuard, the
layer outside this one): a slot is never held by a client still sending, nor taken by one without a key.
``GET /health`` never waits here: it has threads and connections of its own (app/meta/router.py)."""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Receive, Scope, Send

UNCOUNTED = frozenset({"/health"})


class Admission:
    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit
        self._semaphore: asyncio.Semaphore | None = None  # made in the server's event loop, on first use

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Event streams (GET /audits/{id}/events) stay open for minutes holding no connection: not counted (they
        # have caps of their own, app/audits/polling.py); nor is the health check, which must answer when busy.
        if (
            scope["type"] != "http"
            or self.limit <= 0
            or scope["path"].endswith("/events")
            or scope["path"] in UNCOUNTED
        ):
            await self.app(scope, receive, send)
            return
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.limit)
        async with self._semaphore:
            await self.app(scope, receive, send)
