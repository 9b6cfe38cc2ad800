"""HTTP for the served backends (scoring and generation): one httpx client per model with bearer auth, timeouts,
retries with backoff on 429 (its ``Retry-After`` honoured), 5xx, connection errors and malformed replies, a bounded
number of requests in flight and an optional rate limit.

The API key lives only in the client's default headers: it is never formatted into a message, a log line or a repr.
Error messages name the server by scheme, host, port and path only (user info and query stripped), and never quote
the server's error body (a server may echo the prompt, which can hold personal data).
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import httpx

from workers.lm.base import ServerUnavailable

log = logging.getLogger(__name__)  # (the CLI keeps httpx's one-line-per-request INFO log quiet)

RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
MAX_BACKOFF_S = 30.0
T = TypeVar("T")
R = TypeVar("R")


def public_url(url: str) -> str:
    """The URL without user info, query or fragment: safe to show in messages and logs."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _retry_after(response: httpx.Response, default: float) -> float:
    """Seconds the server asks us to wait (Retry-After in seconds), bounded; else our own backoff."""
    try:
        return min(MAX_BACKOFF_S, max(0.0, float(response.headers.get("retry-after", ""))))
    except ValueError:
        return default


class Malformed(Exception):  # noqa: N818 (a reply's defect, not a failure of ours)
    """Raised by a ``read`` function given to ``post``: the server's JSON is not the reply asked for (missing
    choices, the wrong number of answers). ``kind`` names the defect in words free of the reply's content; the
    request is retried like a 5xx."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        super().__init__(kind)


class RequestPacer:
    """At most ``per_second`` requests started per second (None: unlimited), shared by the client's threads: each
    request takes the next free slot and sleeps until it comes."""

    def __init__(self, per_second: float | None) -> None:
        self.interval = 1.0 / per_second if per_second else 0.0
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        if not self.interval:
            return
        with self._lock:
            now = time.monotonic()
            slot = max(now, self._next)
            self._next = slot + self.interval
        if slot > now:
            time.sleep(slot - now)


@cache
def tls_context() -> ssl.SSLContext:
    """One TLS context for every served model's client in this process (safe to share between threads): httpx
    builds one per ``Client`` otherwise, parsing certifi's CA bundle each time (~35 ms of CPU per scorer loaded)."""
    return httpx.create_ssl_context()


class ServedClient:
    """POSTs JSON to ``base_url`` + path; raises ServerUnavailable with a readable, secret-free message.

    ``rate``: requests per second at most (None: no limit); ``on_request``: called before every request sent, retries
    included (a generator counts its queries with it; it may raise to stop the request, e.g. a spent budget);
    ``resume``: what the failure message tells the user about work already done."""

    def __init__(
        self,
        name: str,
        base_url: str,
        api_key: str | None,
        timeout: float,
        retries: int,
        concurrency: int,
        *,
        rate: float | None = None,
        on_request: Callable[[], None] | None = None,
        resume: str = "sentences already scored are cached",
    ) -> None:
        self.name = name
        self.where = public_url(base_url)
        self.retries = retries
        self.concurrency = concurrency
        self.resume = resume
        self.backoff = 0.5  # seconds before the first retry, doubling (a server's Retry-After overrides it)
        self._rate = RequestPacer(rate)
        self._on_request = on_request
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
            verify=tls_context(),
        )
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=f"served-{name}")

    def __repr__(self) -> str:  # the default repr is fine today; this one stays fine if fields are added
        return f"ServedClient({self.name!r}, {self.where!r})"

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        self._http.close()

    def get(self, path: str) -> Any:
        return self._send("GET", path, None, retry=True)

    def post(
        self, path: str, body: dict[str, Any], *, retry: bool = True, read: Callable[[Any], R] | None = None
    ) -> Any:
        """The server's JSON answer, or ``read(answer)`` when given: a reply that is not JSON, or that ``read``
        finds malformed (it raises Malformed), is retried like a 5xx."""
        return self._send("POST", path, body, retry=retry, read=read)

    def map(self, fn: Callable[[T], R], items: Iterable[T], *, on_done: Callable[[int], None] | None = None) -> list[R]:
        """fn over items with at most ``concurrency`` calls in flight, results in input order. ``on_done``: called
        in the caller's thread with the number of items done so far (in input order); if it raises, the items not
        started are cancelled."""
        work: Sequence[T] = list(items)
        results = map(fn, work) if len(work) <= 1 else self._pool.map(fn, work)
        out: list[R] = []
        for result in results:
            out.append(result)
            if on_done is not None:
                on_done(len(out))
        return out

    def _send(
        self, method: str, path: str, body: dict[str, Any] | None, *, retry: bool, read: Callable | None = None
    ) -> Any:
        attempts = 1 + (self.retries if retry else 0)
        started = time.monotonic()
        failure = ""
        for attempt in range(attempts):
            delay = min(MAX_BACKOFF_S, self.backoff * 2**attempt)
            outcome, failure, delay = self._attempt(method, path, body, read, delay)
            if not failure:
                return outcome
            if attempt + 1 < attempts:
                log.warning(
                    "model %s: %s %s failed (%s); retry %d of %d in %.1f s",
                    self.name,
                    method,
                    path,
                    failure,
                    attempt + 1,
                    attempts - 1,
                    delay,
                )
                time.sleep(delay)
        resume = f": {self.resume}" if self.resume else ""
        raise ServerUnavailable(
            f"model {self.name!r}: the server at {self.where} did not answer {path} ({failure}) after "
            f"{attempts} attempt(s) over {time.monotonic() - started:.0f} s; check that it is up (or raise the "
            f"model's timeout/retries), then resubmit the audit{resume}",
            failure,
        )

    def _attempt(
        self, method: str, path: str, body: dict[str, Any] | None, read: Callable | None, delay: float
    ) -> tuple[Any, str, float]:
        """One request: (result, "", delay) on success, (None, what failed, seconds to wait) for a retryable
        failure; raises ServerUnavailable for a refusal that a retry cannot change."""
        self._rate.wait()
        if self._on_request is not None:
            self._on_request()
        try:
            response = self._http.request(method, path, json=body)
        except httpx.TransportError as exc:  # connection refused/reset, timeouts, protocol errors
            return None, type(exc).__name__, delay
        if response.status_code >= 400:
            if response.status_code not in RETRY_STATUS:
                raise ServerUnavailable(self._refusal(response.status_code, path), f"HTTP {response.status_code}")
            return None, f"HTTP {response.status_code}", _retry_after(response, delay)
        try:
            answer = response.json()
        except ValueError:
            return None, "a reply that is not JSON", delay
        if read is None:
            return answer, "", delay
        try:
            return read(answer), "", delay
        except Malformed as exc:
            return None, exc.kind, delay

    def _refusal(self, status: int, path: str) -> str:
        if status in (401, 403):
            return (
                f"model {self.name!r}: the server at {self.where} refused the API key (HTTP {status}); "
                f"set MEMAUDIT_MODELS__{self.name}__API_KEY"
            )
        if status == 404:
            return f"model {self.name!r}: the server at {self.where} has no {path} (HTTP 404); check base_url"
        return f"model {self.name!r}: the server at {self.where} rejected a request to {path} (HTTP {status})"
