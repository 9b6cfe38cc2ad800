"""ASGI middleware that does its work before a request's body is read, and keeps errors out of the log.

``RequestGuard``, for every HTTP request, in this order:
1. refuses NUL characters in the path and the query string (422 naming the parameter): PostgreSQL cannot store
   them and every handler would otherwise have to check;
2. refuses a body larger than the limit (413): from Content-Length before reading a byte, and by counting
   the bytes of a body sent without one (chunked) as it is read;
3. authenticates the bearer key or subject token in a short transaction of its own (the request's transaction
   never touches ``api_keys``, so no request waits on a key's row lock) and records the key's use coarsely;
   a request that may carry a body (POST/PUT/PATCH, on any path: deny by default) is refused (401) before its
   body is read;
4. applies the per-principal rate limits (429 with Retry-After), see ``app.limits``;
5. reads the whole body, within its size limit and within ``body_timeout_seconds`` (a dataset upload:
   ``dataset_upload_timeout_seconds``), answering 408 past that time; the body is kept in memory up to 1 MiB, on
   disk beyond, and handed to the application as one message only once complete.
The principal is left in ``request.state.principal`` for the ``CurrentPrincipal`` dependency.

All of this happens before the request takes an admission slot (``app.reliability.admission``, the next layer
in): a client without a key, or one trickling its body a byte a second, holds a socket and a small buffer but no
slot, no thread and no database connection, so it cannot make other requests wait. Authentication runs in
threads of its own (``AUTH_THREADS`` at once), apart from the pool the admitted requests use.

``ErrorScrubber`` (outermost) answers an unhandled exception with a 500 in the standard error shape and logs
its type and where it was raised, never its message: a database error's message carries the row it refused
(``Failing row contains (…)``), i.e. a subject's name or facts. An error once the answer has started
(a stream) closes the connection without the final chunk, so that every HTTP client reports the cut.
"""

from __future__ import annotations

import json
import logging
import re
import tempfile
import traceback
from urllib.parse import parse_qsl

import anyio
from sqlalchemy.exc import InterfaceError, OperationalError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.auth.keys import MISSING_KEY, Principal, bearer_token, principal_for
from app.errors import TooManyRequests, Unauthorized, error_body
from app.limits import check_rate
from app.settings import Settings, get_settings

log = logging.getLogger("memaudit.api")
BODY_METHODS = {"POST", "PUT", "PATCH"}
# Routes whose body may exceed max_request_bytes: (method, path) -> the setting that bounds it.
BODY_LIMITS = {("POST", "/datasets"): "max_dataset_upload_bytes", ("POST", "/nulls/import"): "max_null_artifact_bytes"}
# The dashboard's forms (a person's facts, a CSRF token) are small, and its sign-in form is read before anyone is
# authenticated: a body past this is refused before it is read or parsed.
UI_MAX_BODY_BYTES = 256 * 1024
UNAUTHENTICATED = frozenset({"/health"})
DATABASE_DOWN = "the database is unreachable; retry shortly (GET /health says when it is back)"
# Routes whose body may take longer than body_timeout_seconds to arrive: (method, path) -> the setting.
BODY_TIMEOUTS = {("POST", "/datasets"): "dataset_upload_timeout_seconds"}
BODY_MEMORY_BYTES = 1024 * 1024  # a body past this waits on disk (a temporary file) until it is complete
REPLAY_CHUNK_BYTES = 64 * 1024
AUTH_THREADS = 8  # authentications at once: each is one short transaction (a database connection) in a thread
_auth_limiter: anyio.CapacityLimiter | None = None
PARAM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,39}$")


async def send_error(
    send: Send, status: int, message: str, field: str | None = None, headers: dict[str, str] | None = None
) -> None:
    body = json.dumps(error_body(message, field)).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def nul_field(scope: Scope) -> str | None:
    """The name of the path or query parameter holding a NUL character (a generic name if that name is odd)."""
    if "\x00" in scope.get("path", ""):
        return "path"
    query = scope.get("query_string", b"").decode("latin-1")
    if "%00" not in query and "\x00" not in query:
        return None
    for name, value in parse_qsl(query, keep_blank_values=True):
        if "\x00" in name or "\x00" in value:
            return name if PARAM_NAME.match(name) else "query"  # never echo an odd parameter name
    return None


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return None


def authenticate_and_limit(settings: Settings, token: str, submits: bool) -> Principal:
    """Runs in the threadpool: a short database transaction, then the rate limiter (maybe Redis)."""
    principal = principal_for(settings, token)
    check_rate(settings, principal.id, "requests", settings.rate_limit_per_minute)
    if submits:
        check_rate(settings, principal.id, "submissions", settings.submit_rate_per_minute)
    return principal


class BodyTooLarge(Exception):
    """Raised from `receive` when a body passes its limit; the guard answers 413 whatever the app made of it."""


async def _refuse_early(scope: Scope, send: Send, settings: Settings) -> int | None:
    """The body's size limit of this request, or None once it has been answered: a NUL in the path or query (422),
    or a Content-Length past the limit (413)."""
    field = nul_field(scope)
    if field is not None:
        await send_error(send, 422, "NUL characters (\\0) are not allowed; remove them", field)
        return None
    limit = getattr(settings, BODY_LIMITS.get((scope["method"], scope["path"]), "max_request_bytes"))
    if scope["path"].startswith("/ui/"):
        limit = min(limit, UI_MAX_BODY_BYTES)
    length = _header(scope, b"content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        await send_error(send, 413, *_too_large(limit))
        return None
    return limit


async def _authenticate(scope: Scope, send: Send, settings: Settings, with_body: bool) -> bool:
    """Leave the principal in the request's state (or the Unauthorized error, for a route without a body that may
    be public); False once the request has been answered (401, 429, 503)."""
    # the health check is public and must answer when the database does not: no authentication
    public = scope["path"] in UNAUTHENTICATED and scope["method"] in ("GET", "HEAD")
    token = None if public else bearer_token(_header(scope, b"authorization"))
    state = scope.setdefault("state", {})
    # The dashboard's forms (app/ui) authenticate with its session cookie and a CSRF token instead.
    if token is None and with_body and not scope["path"].startswith("/ui/"):
        await send_error(send, 401, MISSING_KEY, headers={"WWW-Authenticate": "Bearer"})
        return False
    if token is None:
        return True
    global _auth_limiter
    if _auth_limiter is None:  # made in the server's event loop, on first use
        _auth_limiter = anyio.CapacityLimiter(AUTH_THREADS)
    try:
        state["principal"] = await anyio.to_thread.run_sync(
            authenticate_and_limit, settings, token, with_body, limiter=_auth_limiter
        )
    except TooManyRequests as exc:
        await send_error(send, 429, exc.message, exc.field, {"Retry-After": str(exc.retry_after)})
        return False
    except (OperationalError, InterfaceError):  # the database is down: say so, not "internal error"
        await send_error(send, 503, DATABASE_DOWN, "database", {"Retry-After": "5"})
        return False
    except Unauthorized as exc:
        if with_body:
            await send_error(send, 401, exc.message, exc.field, {"WWW-Authenticate": "Bearer"})
            return False
        state["principal"] = exc  # a route without a body may be public: the dependency decides
    return True


class RequestGuard:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        settings = get_settings()
        limit = await _refuse_early(scope, send, settings)
        if limit is None:
            return
        with_body = scope["method"] in BODY_METHODS
        if not await _authenticate(scope, send, settings, with_body):
            return
        if with_body:
            await self._with_body(scope, receive, send, settings, limit)
        else:
            await self._guarded(scope, receive, send, limit)

    async def _with_body(self, scope: Scope, receive: Receive, send: Send, settings: Settings, limit: int) -> None:
        """Read the whole body within its limits (413, 408), then hand it to the application in one piece."""
        seconds = getattr(settings, BODY_TIMEOUTS.get((scope["method"], scope["path"]), "body_timeout_seconds"))
        try:
            body = await read_body(receive, limit, seconds)
        except BodyTooLarge:
            await send_error(send, 413, *_too_large(limit))
            return
        except TimeoutError:
            message = f"the request body did not arrive within {seconds:g} s; send it at once, or a smaller one"
            await send_error(send, 408, message, "body", {"Connection": "close"})
            return
        if body is None:  # the client left before sending its whole body: nobody to answer
            return
        try:
            await self.app(scope, body.receive(receive), send)
        finally:
            body.close()

    async def _guarded(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        """A request that may carry no body (GET, DELETE…): should it send one anyway, it is counted as read."""
        seen, over, started = 0, False, False

        async def counting_receive() -> Message:
            nonlocal seen, over
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    over = True
                    raise BodyTooLarge
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if over:  # whatever the app answers to the interrupted body, the answer is 413
                if not started:
                    started = True
                    await send_error(send, 413, *_too_large(limit))
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except BodyTooLarge:
            if not started:
                await send_error(send, 413, *_too_large(limit))


class ReadBody:
    """A complete request body (in memory, or in a temporary file past ``BODY_MEMORY_BYTES``), replayed to the
    application as ASGI messages; after it, ``receive`` goes to the client (a disconnect, for a stream)."""

    def __init__(self) -> None:
        self.size = 0
        self._memory: list[bytes] = []
        self._file: tempfile.SpooledTemporaryFile | None = None

    def add(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self._file is None and self.size > BODY_MEMORY_BYTES:
            self._file = tempfile.SpooledTemporaryFile(max_size=0)  # noqa: SIM115 - closed by close()
            for part in self._memory:
                self._file.write(part)
            self._memory = []
        if self._file is not None:
            self._file.write(chunk)
        else:
            self._memory.append(chunk)

    def receive(self, receive: Receive) -> Receive:
        if self._file is not None:
            self._file.seek(0)
        done = False

        async def replay() -> Message:
            nonlocal done
            if done:
                return await receive()
            if self._file is None:
                done = True
                return {"type": "http.request", "body": b"".join(self._memory), "more_body": False}
            chunk = self._file.read(REPLAY_CHUNK_BYTES)
            done = self._file.tell() >= self.size
            return {"type": "http.request", "body": chunk, "more_body": not done}

        return replay

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


async def read_body(receive: Receive, limit: int, seconds: float) -> ReadBody | None:
    """The whole body within ``limit`` bytes (else BodyTooLarge) and ``seconds`` (else TimeoutError); None when
    the client disconnected first."""
    body = ReadBody()
    try:
        with anyio.fail_after(seconds):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    body.close()
                    return None
                body.add(message.get("body", b""))
                if body.size > limit:
                    raise BodyTooLarge
                if not message.get("more_body", False):
                    return body
    except BaseException:
        body.close()
        raise


def _too_large(limit: int) -> tuple[str, str]:
    return f"the request body is larger than the limit of {limit} bytes", "body"


class ErrorScrubber:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watching_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watching_send)
        except Exception as exc:  # noqa: BLE001 - every error: its message may hold personal data
            log.error("%s %s failed: %s", scope["method"], _route_path(scope), describe(exc))
            if not started:
                await send_error(send, 500, "internal error: the request was not completed; it is in the server log")
            # Started: return without the final chunk; the server closes the connection (the client sees the cut).


def _route_path(scope: Scope) -> str:
    route = scope.get("route")
    return getattr(route, "path", None) or "(no route)"


def describe(exc: BaseException) -> str:
    """An exception without its message: type, database error code and constraint, and where it was raised."""
    inner = getattr(exc, "orig", None)  # SQLAlchemy's DBAPIError wraps the driver's error
    diag = getattr(inner, "diag", None)
    parts = [type(exc).__name__]
    if inner is not None:
        parts.append(type(inner).__name__)
    if diag is not None:
        parts += [f"sqlstate={diag.sqlstate}", f"constraint={diag.constraint_name}", f"table={diag.table_name}"]
    frames = traceback.extract_tb(exc.__traceback__)[-3:]
    where = " <- ".join(f"{f.filename.rsplit('/', 2)[-1]}:{f.lineno} {f.name}" for f in reversed(frames))
    return f"{' '.join(parts)} at {where}"
