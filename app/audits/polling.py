"""Polling done cheaply: entity tags for audit reads (``If-None-Match`` -> 304) and a Server-Sent-Events stream of
one audit's status and progress that ends at a final status.

The stream holds no database connection between its reads: each read is a short transaction of its own, run in the
thread pool, and re-applies the principal's visibility (an audit erased meanwhile ends the stream). It lives at most
``MEMAUDIT_EVENTS_MAX_SECONDS`` (300); a client that still wants news reconnects (EventSource does so by itself)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import weakref
from collections.abc import AsyncIterator

from fastapi import Request, Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from app.audits import repository, service
from app.auth.keys import Principal, still_valid
from app.db.engine import session_scope
from app.db.models.audit import FINAL_STATUSES
from app.db.models.auth import Role
from app.errors import ServiceUnavailable
from app.settings import get_settings

EVENTS_POLL_SECONDS = 1.0  # how often the stream reads the audit's row
EVENTS_KEEPALIVE_SECONDS = 15.0  # a comment line so that proxies keep an idle stream open
MAX_STREAMS = 200  # streams open at once in this process (they bypass the admission limit: they hold no connection)
MAX_STREAMS_PER_PRINCIPAL = 20  # ... of one API key or subject token: one client cannot take every stream
# ... of one account: an auditor's key and every subject token of its audits together (a token's streams count for
# the key that owns the audit), so minting tokens does not multiply a key's share
MAX_STREAMS_PER_ACCOUNT = 40
ADMIN_RESERVED_STREAMS = 20  # the last of MAX_STREAMS, for admins only: an admin can always look
REGULATOR_RESERVED_STREAMS = 20  # the 20 before those, for regulators and admins: a regulator can always look
_open_streams = 0
_open_by_principal: dict[str, int] = {}  # principal id -> its open streams (only principals with one open)
_open_by_account: dict[str, int] = {}  # account -> its open streams (only accounts with one open)


def etag_of(body: BaseModel) -> str:
    """A strong tag of the JSON answer: any change of status, progress, summary or links changes it."""
    digest = hashlib.sha256(body.model_dump_json().encode()).hexdigest()[:32]
    return f'"{digest}"'


def not_modified(request: Request, etag: str) -> Response | None:
    """A 304 when the client's If-None-Match holds ``etag`` (or ``*``); None when the full answer is due."""
    header = request.headers.get("if-none-match")
    if header is None:
        return None
    tags = {t.strip().removeprefix("W/") for t in header.split(",")[:50]}  # bounded: a header is client input
    if etag in tags or "*" in tags:
        return Response(status_code=304, headers={"ETag": etag, "Cache-Control": "private, no-cache"})
    return None


def tagged(response: Response, etag: str) -> None:
    response.headers["ETag"] = etag
    response.headers["Cache-Control"] = "private, no-cache"  # revalidate each time; never in a shared cache


def check_visible(principal: Principal, audit_id: str) -> str:
    """404 (NotFound) unless the principal may see the audit; a short transaction of its own. Returns the account
    the principal's stream of it counts against (``stream_account``)."""
    with session_scope() as session:
        return stream_account(principal, service.get_audit(session, principal, audit_id).owner_key_id)


def stream_account(principal: Principal, owner_key_id: int | None) -> str:
    """Whose share a stream takes: an admin's or a regulator's own (their shares are reserved); anyone else's, the
    key that owns the audit (a subject token's streams count for the auditor that minted it)."""
    if principal.sees_everything or owner_key_id is None:
        return principal.id
    return f"key:{owner_key_id}"


def _cap(principal: Principal) -> int:
    if principal.role == Role.ADMIN:
        return MAX_STREAMS
    if principal.role == Role.REGULATOR:
        return MAX_STREAMS - ADMIN_RESERVED_STREAMS
    return MAX_STREAMS - ADMIN_RESERVED_STREAMS - REGULATOR_RESERVED_STREAMS


def _snapshot(principal: Principal, audit_id: str) -> dict[str, object] | None:
    with session_scope() as session:
        # a key or subject token revoked while its stream is open ends the stream (as if the audit were gone)
        audit = repository.get_visible(session, principal, audit_id) if still_valid(session, principal) else None
        if audit is None:
            return None
        return {
            "id": audit.id,
            "status": audit.status,
            "progress": {"done": audit.progress_done, "total": audit.progress_total},
            "error": audit.error,
        }


def _event(name: str, data: dict[str, object]) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


def open_stream(principal: Principal, audit_id: str, request: Request, busy: str, account: str) -> AsyncIterator[str]:
    """The event stream of one audit, its slot among ``MAX_STREAMS`` taken now: at most
    ``MAX_STREAMS_PER_PRINCIPAL`` per key or token, ``MAX_STREAMS_PER_ACCOUNT`` per ``account`` (what
    ``check_visible`` returned), the last ``ADMIN_RESERVED_STREAMS`` for admins and the
    ``REGULATOR_RESERVED_STREAMS`` before them for regulators. The check and the count happen together (no await
    between them), so requests arriving at once cannot all pass the check before any stream has started. The slot
    is given back when the stream ends, or when a stream that never started is dropped. ``busy``: the 503's advice
    when every slot is taken."""
    global _open_streams
    mine = _open_by_principal.get(principal.id, 0)
    if mine >= MAX_STREAMS_PER_PRINCIPAL:
        raise ServiceUnavailable(
            f"this key or token already has {MAX_STREAMS_PER_PRINCIPAL} event streams open; close one first"
        )
    ours = _open_by_account.get(account, 0)
    if ours >= MAX_STREAMS_PER_ACCOUNT:
        raise ServiceUnavailable(
            f"the key owning this audit and its subject tokens already have {MAX_STREAMS_PER_ACCOUNT} event streams"
            " open; close one first"
        )
    if _open_streams >= _cap(principal):
        raise ServiceUnavailable(busy)
    _open_streams += 1
    _open_by_principal[principal.id] = mine + 1
    _open_by_account[account] = ours + 1
    release = _Release()
    events = _audit_events(principal, audit_id, request, release)
    release.finalizer = weakref.finalize(events, _give_back, principal.id, account)
    return events


def open_streams() -> int:
    return _open_streams


def _give_back(principal_id: str, account: str) -> None:
    global _open_streams
    _open_streams -= 1
    for counts, key in ((_open_by_principal, principal_id), (_open_by_account, account)):
        left = counts.get(key, 1) - 1
        if left > 0:
            counts[key] = left
        else:
            counts.pop(key, None)  # bounded: only principals and accounts with an open stream are kept


class _Release:
    finalizer: weakref.finalize | None = None

    def __call__(self) -> None:
        if self.finalizer is not None:
            self.finalizer()  # runs _give_back at most once (a stream that ends is also collected later)


async def _audit_events(principal: Principal, audit_id: str, request: Request, release: _Release) -> AsyncIterator[str]:
    """``event: progress`` whenever status or progress changed, then ``event: end`` at a final status (or
    ``event: gone`` if the audit disappeared, ``event: timeout`` at the lifetime's end, with ``retry`` advice)."""
    try:
        yield f"retry: {int(EVENTS_POLL_SECONDS * 3000)}\n\n"
        last: dict[str, object] | None = None
        started = quiet_since = time.monotonic()
        lifetime = get_settings().events_max_seconds  # EventSource reconnects after it
        while time.monotonic() - started < lifetime:
            if await request.is_disconnected():
                return
            now = await run_in_threadpool(_snapshot, principal, audit_id)
            if now is None:
                yield _event("gone", {"id": audit_id})
                return
            if now != last:
                yield _event("progress", now)
                last, quiet_since = now, time.monotonic()
            if now["status"] in FINAL_STATUSES:
                yield _event("end", now)
                return
            if time.monotonic() - quiet_since > EVENTS_KEEPALIVE_SECONDS:
                yield ": keep-alive\n\n"
                quiet_since = time.monotonic()
            # never past the lifetime: a stream ends when its settings say, not up to a poll later
            await asyncio.sleep(max(0.0, min(EVENTS_POLL_SECONDS, lifetime - (time.monotonic() - started))))
        yield _event("timeout", {"id": audit_id, "reconnect": True})
    finally:
        release()


SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
