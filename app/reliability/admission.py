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
``GET /health`` never waits here: it has threads and connections of its own (app/meta/router.py), and reports
the slots' saturation (``saturation()``).

Fair per key: one API key or subject token holds at most ``max_concurrent_requests_per_key`` slots at once; its
other requests wait for one of its own slots (on its own semaphore) before they queue for a shared one. Twelve
dataset uploads by one key used to hold every slot while another key's `GET /audits` waited 46 s behind them; now
they hold three and the other key finds a slot free. A request without a principal at this point (the dashboard's
cookie-signed forms, a public route) takes a shared slot only.

Heavy requests (``HEAVY``: a dataset upload, a batch, a null import) parse and write megabytes in this process, and
its threads share one GIL: three of one key's 3.8 MB uploads at once made another key's `GET /audits` wait up to
2.9 s for its turns of the GIL (a 2,000-person batch, 3.6 s). So one key runs at most
``max_heavy_requests_per_key`` (1) of them at once; the others wait, in one of the key's own slots, not in a
shared one."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

UNCOUNTED = frozenset({"/health"})
HEAVY = frozenset({("POST", "/datasets"), ("POST", "/batches"), ("POST", "/nulls/import")})


@dataclass
class Slots:
    """The shared slots and each principal's own (made in the server's event loop, on first use)."""

    limit: int
    per_key: int
    heavy_per_key: int = 1
    shared: asyncio.Semaphore = field(init=False)
    in_use: int = 0
    waiting: int = 0
    # principal id -> [its semaphore, its requests inside or waiting]: only principals with a request are kept
    keys: dict[str, list[Any]] = field(default_factory=dict)
    heavy: dict[str, list[Any]] = field(default_factory=dict)  # the same for heavy requests' turns
    heavy_running: int = 0
    heavy_waiting: int = 0

    def __post_init__(self) -> None:
        self.shared = asyncio.Semaphore(self.limit)

    async def enter(self, stack: AsyncExitStack, principal_id: str | None, heavy: bool = False) -> None:
        """Wait for this principal's own slot (if it has a cap), for its heavy turn (a heavy request), then for a
        shared slot; ``stack`` gives them back."""
        if principal_id is not None and self.per_key > 0:
            await self._enter_own(stack, self.keys, principal_id, self.per_key)
        if principal_id is not None and heavy and self.heavy_per_key > 0:
            self.heavy_waiting += 1
            try:
                await self._enter_own(stack, self.heavy, principal_id, self.heavy_per_key)
            finally:
                self.heavy_waiting -= 1
            self.heavy_running += 1
            stack.callback(self._leave_heavy)
        self.waiting += 1
        try:
            await self.shared.acquire()
        finally:
            self.waiting -= 1
        self.in_use += 1
        stack.callback(self._leave_shared)

    async def _enter_own(self, stack: AsyncExitStack, own: dict, principal_id: str, cap: int) -> None:
        entry = own.setdefault(principal_id, [asyncio.Semaphore(cap), 0])
        entry[1] += 1
        stack.callback(self._leave_own, own, principal_id)
        await stack.enter_async_context(entry[0])

    def _leave_heavy(self) -> None:
        self.heavy_running -= 1

    def _leave_shared(self) -> None:
        self.in_use -= 1
        self.shared.release()

    @staticmethod
    def _leave_own(own: dict, principal_id: str) -> None:
        entry = own[principal_id]
        entry[1] -= 1
        if entry[1] == 0:
            del own[principal_id]

    def saturation(self) -> dict[str, Any]:
        at_cap = sum(1 for sem, _ in self.keys.values() if sem.locked())
        return {
            "limit": self.limit,
            "per_key": self.per_key,
            "in_use": self.in_use,
            "waiting": self.waiting,
            "keys_at_their_cap": at_cap,
            "saturated": self.in_use >= self.limit,
            "heavy_per_key": self.heavy_per_key,
            "heavy_running": self.heavy_running,
            "heavy_waiting": self.heavy_waiting,
        }


_latest: Slots | None = None  # the slots of the app this process serves (the last made)


def saturation() -> dict[str, Any] | None:
    """The admission slots now (for GET /health); None before the first admitted request or with no limit."""
    return _latest.saturation() if _latest is not None else None


class Admission:
    def __init__(self, app: ASGIApp, limit: int, per_key: int = 0, heavy_per_key: int = 1) -> None:
        self.app, self.limit, self.per_key, self.heavy_per_key = app, limit, per_key, heavy_per_key
        self._slots: Slots | None = None

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
        global _latest
        if self._slots is None:  # made in the server's event loop, on first use
            self._slots = _latest = Slots(self.limit, self.per_key, self.heavy_per_key)
        principal = scope.get("state", {}).get("principal")  # set by app.middleware.RequestGuard
        heavy = (scope["method"], scope["path"].rstrip("/")) in HEAVY
        async with AsyncExitStack() as stack:
            await self._slots.enter(stack, getattr(principal, "id", None), heavy)
            await self.app(scope, receive, send)
