"""The 202 acknowledges only what is durable, against a real uvicorn process: a read right after the POST
finds the audit (200 tries), and after a kill -9 of the API mid-burst every acknowledged audit runs."""

from __future__ import annotations

import os
import signal
import threading
import time

import httpx
from sqlalchemy import func, select

from tests.conftest import make_key
from tests.support import loopback
from tests.support.faults import audit_row, subject_body, wait_until
from tests.support.servers import free_port

TINY = {"counterfactuals": 2, "paraphrases": 0, "similar_names": 1}


def _auth(role: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {make_key(role)}"}


def test_a_read_right_after_the_202_always_finds_the_audit(fault_env):
    port = free_port()
    fault_env.api(port)
    misses = []
    base = f"http://127.0.0.1:{port}"
    # The read comes from another principal on another connection, as a monitoring client's would: on one
    # keep-alive connection uvicorn reads the GET only after the POST's request cycle ended entirely, and the
    # same key's row lock (last_used_at) would hold the GET until the POST commits; both hide a late commit.
    with (
        loopback.client(base_url=base, headers=_auth("auditor"), timeout=30) as writer,
        loopback.client(base_url=base, headers=_auth("admin"), timeout=30) as reader,
    ):
        for i in range(200):
            created = writer.post("/audits", json=subject_body(i % 5, **TINY))
            assert created.status_code == 202, created.text
            read = reader.get(f"/audits/{created.json()['id']}")
            if read.status_code != 200:
                misses.append((i, read.status_code))
    assert not misses, f"{len(misses)} of 200 reads right after the 202 missed the audit: {misses[:10]}"


def _burst(base_url: str, key: str, acked: list[str], stop: threading.Event) -> None:
    with loopback.client(base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=10) as http:
        i = 0
        while not stop.is_set():
            try:
                r = http.post("/audits", json=subject_body(i % 3, **TINY))
            except httpx.HTTPError:
                return  # the API is gone
            if r.status_code == 202:
                acked.append(r.json()["id"])
            i += 1


def test_every_acknowledged_audit_runs_after_the_api_is_killed_mid_burst(fault_env):
    from app.db.engine import session_scope
    from app.db.models import Audit

    port = free_port()
    api = fault_env.api(port)
    fault_env.worker("worker")
    # four clients of four keys: one key's fourth request would wait its turn (3 at once) past the client's timeout
    acked, stop = [], threading.Event()
    keys = [make_key("auditor") for _ in range(4)]
    clients = [threading.Thread(target=_burst, args=(f"http://127.0.0.1:{port}", k, acked, stop)) for k in keys]
    for c in clients:
        c.start()
    wait_until(lambda: len(acked) >= 20, 120, "the API acknowledged too few audits")
    os.kill(api.pid, signal.SIGKILL)  # mid-burst: requests in flight on four connections
    stop.set()
    for c in clients:
        c.join(timeout=30)
    ids = list(acked)
    started = time.monotonic()

    def all_ran() -> bool:
        return all(audit_row(a).status == "succeeded" for a in ids)

    wait_until(all_ran, 300, f"not every one of the {len(ids)} acknowledged audits ran", poll=0.5)
    print(
        f"\n{len(ids)} acknowledged audits before kill -9 of the API: all succeeded, "
        f"{time.monotonic() - started:.1f} s after the kill"
    )

    def nothing_left() -> bool:  # committed but never acknowledged ones run too
        with session_scope() as s:
            open_ = select(func.count()).select_from(Audit).where(Audit.status.in_(("queued", "running")))
            return s.scalar(open_) == 0

    wait_until(nothing_left, 120, "audits were left queued or running")


def test_a_hundred_concurrent_clients_are_all_answered(fault_env):
    """Beyond the database pool, requests used to hold connections while waiting for threads held by requests
    waiting for connections: every request stalled until the pool's 30 s timeout answered 500."""
    port = free_port()
    fault_env.api(port)
    keys = [make_key("auditor") for _ in range(100)]
    statuses: list[int | str] = []
    barrier = threading.Barrier(len(keys))

    def client(key: str) -> None:
        with loopback.client(base_url=f"http://127.0.0.1:{port}", timeout=120) as http:
            barrier.wait()
            for _ in range(3):
                try:
                    statuses.append(http.get("/audits", headers={"Authorization": f"Bearer {key}"}).status_code)
                except httpx.HTTPError as exc:
                    statuses.append(type(exc).__name__)

    threads = [threading.Thread(target=client, args=(k,)) for k in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    failed = [s for s in statuses if s != 200]
    assert not failed, f"{len(failed)} of {len(statuses)} requests failed: {sorted(set(map(str, failed)))}"
