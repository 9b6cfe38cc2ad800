"""Load benchmark: N concurrent clients polling and submitting against a real API process, on one key and on many.

    python -m benchmarks.load                          # 1, 10, 50, 100 clients x (one key, one key per client)
    python -m benchmarks.load --clients 100 --keys one --duration 30
    python -m benchmarks.load --quick                  # 10 and 100 clients, one key, 10 s each

Everything runs on loopback and is bounded: its own PostgreSQL and Redis (temporary, as the tests start them),
one `memaudit serve` (uvicorn) API process and one `memaudit worker` process, clients for ``--duration`` seconds
each. A client is a closed loop on its own connection: it submits one audit, then cycles GET /audits/{its audit}
(3 of 4 requests), GET /audits?page_size=10 (1 of 4), and every 20th request submits another audit. Audits are
tiny subject audits on the ground-truth model (one person, so their sentences are cached after the first).
A request fails if it takes over 10 s, or answers anything but 200/202.

Reports per row: requests, req/s, p50 / p99 / max latency, errors, and that every 202'd audit exists in the
database and ran (succeeded) once the worker drained the queue (waited for, bounded, not timed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from tests.support.servers import free_port, start_postgres, start_redis, wait_healthy

REPO = Path(__file__).resolve().parent.parent

TIMEOUT = 10.0
SUBMIT_EVERY, LIST_EVERY = 20, 4
DRAIN_TIMEOUT = 600.0


@dataclass
class Row:
    keys: str
    clients: int
    duration: float
    requests: int = 0
    errors: int = 0
    req_per_s: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    max_ms: float = 0.0
    post_p99_ms: float = 0.0
    submitted: int = 0
    present: int = 0
    succeeded: int = 0
    error_kinds: dict[str, int] = field(default_factory=dict)


def audit_body() -> dict:
    manifest = json.loads((REPO / "workers" / "groundtruth" / "manifest.json").read_text())
    person = manifest["trained"][0]
    facts = [{"property": pid, "value": v} for pid, values in person["facts"].items() for v in values]
    options = {"counterfactuals": 2, "paraphrases": 0, "similar_names": 1, "near_duplicates": False}
    return {
        "kind": "subject",
        "model": "groundtruth-tiny",
        "subject": {"name": person["name"], "facts": facts},
        "options": options,
    }


class Client:
    def __init__(self, base: str, key: str, body: dict) -> None:
        self.http = httpx.AsyncClient(
            base_url=base,
            headers={"Authorization": f"Bearer {key}"},
            timeout=TIMEOUT,
            limits=httpx.Limits(max_connections=1),
        )
        self.body = body
        self.latencies: list[float] = []
        self.post_latencies: list[float] = []
        self.errors: dict[str, int] = {}
        self.submitted: list[str] = []

    async def _request(self, method: str, url: str, **kw: object) -> httpx.Response | None:
        start = time.perf_counter()
        try:
            r = await self.http.request(method, url, **kw)
        except httpx.HTTPError as exc:
            self.errors[type(exc).__name__] = self.errors.get(type(exc).__name__, 0) + 1
            return None
        finally:
            took = time.perf_counter() - start
            self.latencies.append(took)
            if method == "POST":
                self.post_latencies.append(took)
        if r.status_code not in (200, 202):
            self.errors[str(r.status_code)] = self.errors.get(str(r.status_code), 0) + 1
        return r

    async def submit(self) -> None:
        r = await self._request("POST", "/audits", json=self.body)
        if r is not None and r.status_code == 202:
            self.submitted.append(r.json()["id"])

    async def run(self, until: float) -> None:
        await self.submit()
        i = 0
        while time.monotonic() < until:
            i += 1
            if i % SUBMIT_EVERY == 0:
                await self.submit()
            elif i % LIST_EVERY == 0:
                await self._request("GET", "/audits", params={"page_size": 10})
            elif self.submitted:
                await self._request("GET", f"/audits/{self.submitted[-1]}")
            else:
                await self.submit()
        await self.http.aclose()


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


async def drive(base: str, keys: list[str], clients: int, duration: float) -> list[Client]:
    body = audit_body()
    pool = [Client(base, keys[i % len(keys)], body) for i in range(clients)]
    until = time.monotonic() + duration
    await asyncio.gather(*(c.run(until) for c in pool))
    return pool


def verify(ids: list[str]) -> tuple[int, int]:
    """(present, succeeded) among ``ids``, after waiting (bounded) for the worker to drain the queue."""
    from sqlalchemy import func, select

    from app.db.engine import session_scope
    from app.db.models import Audit

    deadline = time.monotonic() + DRAIN_TIMEOUT
    while True:
        with session_scope() as s:
            present = s.scalar(select(func.count()).select_from(Audit).where(Audit.id.in_(ids))) or 0
            done = (
                s.scalar(select(func.count()).select_from(Audit).where(Audit.id.in_(ids), Audit.status == "succeeded"))
                or 0
            )
        if done == len(ids) or time.monotonic() > deadline:
            return present, done
        time.sleep(1)


def measure(base: str, keys: list[str], label: str, clients: int, duration: float) -> Row:
    started = time.monotonic()
    pool = asyncio.run(drive(base, keys, clients, duration))
    elapsed = time.monotonic() - started
    latencies = [x for c in pool for x in c.latencies]
    posts = [x for c in pool for x in c.post_latencies]
    errors: dict[str, int] = {}
    for c in pool:
        for kind, n in c.errors.items():
            errors[kind] = errors.get(kind, 0) + n
    ids = [a for c in pool for a in c.submitted]
    present, succeeded = verify(ids) if ids else (0, 0)
    ms = lambda seconds: round(1000 * seconds, 1)  # noqa: E731
    return Row(
        keys=label,
        clients=clients,
        duration=round(elapsed, 1),
        requests=len(latencies),
        errors=sum(errors.values()),
        req_per_s=round(len(latencies) / elapsed, 1),
        p50_ms=ms(statistics.median(latencies)),
        p99_ms=ms(percentile(latencies, 99)),
        max_ms=ms(max(latencies)),
        post_p99_ms=ms(percentile(posts, 99)) if posts else 0.0,
        submitted=len(ids),
        present=present,
        succeeded=succeeded,
        error_kinds=errors,
    )


def start_service(root: Path) -> tuple[str, list[subprocess.Popen], list]:
    """Postgres, Redis, the API and a worker; returns the API's base URL, the processes and the servers."""
    from app.migrate import migrate

    pg, redis = start_postgres(), start_redis()
    url = pg.create_database(f"load_{uuid.uuid4().hex[:8]}")
    migrate(url)
    env = {
        "MEMAUDIT_DATABASE_URL": url,
        "MEMAUDIT_REDIS_URL": redis.url,
        "MEMAUDIT_ENV": "test",
        "MEMAUDIT_QUEUE_NAME": "load",
        "MEMAUDIT_TORCH_THREADS": "1",
        # capacity is measured, not the per-key rate limits and quotas (0 turns them off)
        "MEMAUDIT_RATE_LIMIT_PER_MINUTE": "0",
        "MEMAUDIT_SUBMIT_RATE_PER_MINUTE": "0",
        "MEMAUDIT_MAX_ACTIVE_AUDITS_PER_KEY": "0",
    }
    os.environ.update(env)
    port = free_port()
    full = {**os.environ, **env}
    log = (root / "service.log").open("a")
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--log-level", "warning"],
            env=full,
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
        ),
        subprocess.Popen(
            [sys.executable, "-m", "app.cli", "worker"], env=full, cwd=REPO, stdout=log, stderr=subprocess.STDOUT
        ),
    ]
    base = f"http://127.0.0.1:{port}"
    wait_healthy(base)
    return base, procs, [redis, pg]


def make_keys(n: int) -> list[str]:
    from app.auth.keys import create_key
    from app.db.engine import session_scope
    from app.settings import get_settings

    with session_scope() as s:
        return [create_key(s, get_settings(), "auditor", f"load-{i}")[1] for i in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, action="append", help="concurrent clients (repeatable; 1..100)")
    parser.add_argument("--keys", choices=["one", "many", "both"], default="both")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per row")
    parser.add_argument("--quick", action="store_true", help="10 and 100 clients, one key, 10 s each")
    parser.add_argument("--out", type=Path, help="write the rows as JSON here")
    args = parser.parse_args()
    levels = args.clients or ([10, 100] if args.quick else [1, 10, 50, 100])
    if any(not 1 <= n <= 100 for n in levels):
        parser.error("--clients must be between 1 and 100")
    duration = 10.0 if args.quick else args.duration
    modes = ["one"] if args.quick or args.keys == "one" else (["many"] if args.keys == "many" else ["one", "many"])
    root = Path(os.environ.get("TMPDIR", "/tmp")) / f"memaudit-load-{uuid.uuid4().hex[:6]}"
    root.mkdir(parents=True)
    base, procs, servers = start_service(root)
    try:
        keys_many = make_keys(max(levels))
        warm = httpx.post(f"{base}/audits", json=audit_body(), headers={"Authorization": f"Bearer {keys_many[0]}"})
        assert warm.status_code == 202, warm.text  # the first audit mirrors the catalog's properties
        rows = []
        for mode in modes:
            for n in levels:
                row = measure(base, keys_many[:1] if mode == "one" else keys_many[:n], mode, n, duration)
                rows.append(row)
                print(format_row(row), flush=True)
        if args.out:
            args.out.write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    finally:
        for p in procs:
            p.terminate()
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        for server in servers:
            server.stop()
    print(f"service log: {root / 'service.log'}")


def format_row(r: Row) -> str:
    ran = "all ran" if r.succeeded == r.present == r.submitted else f"{r.present} present, {r.succeeded} ran"
    errs = f" {r.error_kinds}" if r.errors else ""
    return (
        f"keys={r.keys:<4} clients={r.clients:>3}  {r.requests:>6} req  {r.req_per_s:>7.1f} req/s  "
        f"p50 {r.p50_ms:>7.1f} ms  p99 {r.p99_ms:>7.1f} ms  max {r.max_ms:>7.1f} ms  "
        f"POST p99 {r.post_p99_ms:>7.1f} ms  errors {r.errors}{errs}  "
        f"audits 202'd {r.submitted}: {ran}"
    )


if __name__ == "__main__":
    main()
