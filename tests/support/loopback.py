"""httpx for the suite's own loopback servers (APIs, llama.cpp, the fault stacks), with one TLS context for all of
them: httpx builds a context per ``Client`` and per top-level call (``httpx.get``), parsing certifi's CA bundle each
time (~35 ms of CPU), and the suite makes thousands: every poll of a starting server, every client of the
concurrency tests (about 50 CPU-s of a suite run; docs/lab/2026-11-29-per-process-costs.md). The servers speak
plain HTTP, so the context is never used for a connection; it is only not rebuilt."""

from __future__ import annotations

from typing import Any

import httpx

TLS = httpx.create_ssl_context()


def client(**kw: Any) -> httpx.Client:
    return httpx.Client(verify=TLS, **kw)


def get(url: str, **kw: Any) -> httpx.Response:
    return httpx.get(url, verify=TLS, **kw)


def post(url: str, **kw: Any) -> httpx.Response:
    return httpx.post(url, verify=TLS, **kw)


def request(method: str, url: str, **kw: Any) -> httpx.Response:
    return httpx.request(method, url, verify=TLS, **kw)
