"""Issue 44: one key's heavy requests (dataset uploads, batches, null imports) run one at a time, waiting in the
key's own slots, so their parsing and writing in the API process do not take every turn of its GIL from another
key's reads (three 3.8 MB uploads at once: another key's `GET /audits` waited up to 2.9 s). The real ASGI
middleware, in an event loop, around an app that records what runs at once."""

from __future__ import annotations

import asyncio

from app.auth.keys import Principal
from app.reliability.admission import Admission


def _run(requests: list[tuple[str, str, str]]) -> tuple[dict[str, int], list]:
    """Send ``requests`` (principal, method, path) at once through Admission (10 slots, 3 per key, 1 heavy turn);
    the most heavy requests of each principal inside at once, and /health's view at the busiest."""
    inside: dict[str, int] = {}
    most: dict[str, int] = {}
    views: list = []

    async def app(scope, receive, send) -> None:  # noqa: ANN001
        who = scope["state"]["principal"].id
        heavy = scope["path"] != "/audits"
        if heavy:
            inside[who] = inside.get(who, 0) + 1
            most[who] = max(most.get(who, 0), inside[who])
        from app.reliability.admission import saturation

        views.append(saturation())
        await asyncio.sleep(0.05)
        if heavy:
            inside[who] -= 1

    async def main() -> None:
        middleware = Admission(app, limit=10, per_key=3, heavy_per_key=1)

        async def one(who: str, method: str, path: str) -> None:
            scope = {"type": "http", "method": method, "path": path, "state": {"principal": Principal(who, "auditor")}}
            await middleware(scope, None, None)

        await asyncio.gather(*(one(*r) for r in requests))

    asyncio.run(main())
    return most, views


def test_one_keys_heavy_requests_run_one_at_a_time():
    requests = [("key:a", "POST", "/datasets")] * 6 + [("key:a", "POST", "/batches")] * 3
    requests += [("key:b", "POST", "/batches"), ("key:c", "GET", "/audits")]
    most, views = _run(requests)
    assert most == {"key:a": 1, "key:b": 1}, most  # before: key:a ran 3 at once (its slots)
    busiest = max(views, key=lambda v: v["heavy_waiting"])
    assert busiest["heavy_per_key"] == 1 and busiest["heavy_waiting"] >= 1 and busiest["in_use"] <= 3


def test_reads_and_other_methods_are_not_heavy():
    most, _ = _run([("key:a", "GET", "/datasets")] * 3 + [("key:a", "POST", "/datasets/x/y")] * 3)
    assert most == {"key:a": 3}
