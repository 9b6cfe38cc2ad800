"""HTTP for the served backend: one httpx client per model with bearer auth, timeouts, retries with backoff on
429/5xx and connection errors, and a bounded number of requests in flight.

The API key lives only in the client's default headers: it is never formatted into a message, a log line or a repr.
Error messages name the server by scheme, host, port and path only (user info and query stripped), and never quote
the server's error body (a server may echo the prompt, which can hold personal data).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
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


class ServedClient:
    """POSTs JSON to ``base_url`` + path; raises ServerUnavailable with a readable, secret-free message."""

    def __init__(
        self, name: str, base_url: str, api_key: str | None, timeout: float, retries: int, concurrency: int
    ) -> None:
        self.name = name
        self.where = public_url(base_url)
        self.retries = retries
        self.concurrency = concurrency
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
        )
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=f"served-{name}")

    def __repr__(self) -> str:  # the default repr is fine today; this one stays fine if fields are added
        return f"ServedClient({self.name!r}, {self.where!r})"

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        self._http.close()

    def get(self, path: str) -> Any:
        return self._send("GET", path, None, retry=True)

    def post(self, path: str, body: dict[str, Any], *, retry: bool = True) -> Any:
        return self._send("POST", path, body, retry=retry)

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """fn over items with at most ``concurrency`` calls in flight, results in input order."""
        work: Sequence[T] = list(items)
        if len(work) <= 1:
            return [fn(item) for item in work]
        return list(self._pool.map(fn, work))

    def _send(self, method: str, path: str, body: dict[str, Any] | None, *, retry: bool) -> Any:
        attempts = 1 + (self.retries if retry else 0)
        started = time.monotonic()
        failure = ""
        for attempt in range(attempts):
            delay = min(MAX_BACKOFF_S, 0.5 * 2**attempt)
            try:
                response = self._http.request(method, path, json=body)
            except httpx.TransportError as exc:  # connection refused/reset, timeouts, protocol errors
                failure = type(exc).__name__
            else:
                if response.status_code < 400:
                    return self._json(response, path)
                if response.status_code not in RETRY_STATUS:
                    raise ServerUnavailable(self._refusal(response.status_code, path), f"HTTP {response.status_code}")
                failure = f"HTTP {response.status_code}"
                delay = _retry_after(response, delay)
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
        raise ServerUnavailable(
            f"model {self.name!r}: the server at {self.where} did not answer {path} ({failure}) after "
            f"{attempts} attempt(s) over {time.monotonic() - started:.0f} s; check that it is up (or raise the "
            "model's timeout/retries), then resubmit the audit: sentences already scored are cached",
            failure,
        )

    def _refusal(self, status: int, path: str) -> str:
        if status in (401, 403):
            return (
                f"model {self.name!r}: the server at {self.where} refused the API key (HTTP {status}); "
                f"set MEMAUDIT_MODELS__{self.name}__API_KEY"
            )
        if status == 404:
            return f"model {self.name!r}: the server at {self.where} has no {path} (HTTP 404); check base_url"
        return f"model {self.name!r}: the server at {self.where} rejected a request to {path} (HTTP {status})"

    def _json(self, response: httpx.Response, path: str) -> Any:
        try:
            return response.json()
        except ValueError as exc:
            raise ServerUnavailable(
                f"model {self.name!r}: the server at {self.where} answered {path} with no JSON"
            ) from exc
