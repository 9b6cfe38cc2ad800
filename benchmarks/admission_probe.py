"""Issue 44's probes at full size: does one auditor's heavy requests close the API to another?

    python -m benchmarks.admission_probe                      # uploads, batches, nulls
    python -m benchmarks.admission_probe --probe uploads --out benchmarks/results/admission_probe.json

Everything real and on loopback: its own PostgreSQL and Redis (temporary, as the tests start them), one
`memaudit serve` API process with the default settings (10 admission slots, 3 per key), the per-key rate limits
off (what is measured is admission, not the rate limits), no worker (nothing submitted needs to run).

- ``uploads``: auditor A sends 12 dataset uploads at once (200 items, ~3.8 MB of MovieLens-style ratings each);
  meanwhile auditor B reads `GET /audits` then `GET /health`, 0.2 s apart, until every upload has answered.
- ``batches``: A sends 10 JSON batches of 2,000 people at once; B the same.
- ``nulls``: an admin imports a gzip inflating to 67 MB of null-artifact-shaped JSON (refused past the inflation
  ceiling), then one inflating to 30 MB (parsed whole by the intake process, refused at its end); `/health` is
  read 10 times a second meanwhile.

Prints and (``--out``) writes each probe's worst and median wait, how many reads, the heavy requests' statuses and
durations, and the machine's 1-minute load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.support.servers import free_port, start_postgres, start_redis, wait_healthy

REPO = Path(__file__).resolve().parent.parent
ENV = {
    "MEMAUDIT_ENV": "test",
    "MEMAUDIT_RATE_LIMIT_PER_MINUTE": "0",
    "MEMAUDIT_SUBMIT_RATE_PER_MINUTE": "0",
    "MEMAUDIT_MAX_ACTIVE_AUDITS_PER_KEY": "0",
}


def ratings(target_bytes: int) -> bytes:
    """MovieLens `ratings.dat` lines over 6,040 users and 200 items, ``target_bytes`` long."""
    lines, size, i = [], 0, 0
    while size < target_bytes:
        line = f"{1 + i % 6040}::{1 + (i * 7) % 200}::{1 + i % 5}::{978300760 + i}\n"
        lines.append(line)
        size += len(line)
        i += 1
    return "".join(lines).encode()


def start(root: Path) -> tuple[str, subprocess.Popen, list]:
    from app.migrate import migrate

    pg, redis = start_postgres(), start_redis()
    url = pg.create_database(f"probe_{uuid.uuid4().hex[:8]}")
    migrate(url)
    env = {**ENV, "MEMAUDIT_DATABASE_URL": url, "MEMAUDIT_REDIS_URL": redis.url, "MEMAUDIT_QUEUE_NAME": "probe"}
    os.environ.update(env)
    port = free_port()
    log = (root / "service.log").open("a")
    cmd = [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--log-level", "warning"]
    proc = subprocess.Popen(cmd, env={**os.environ, **env}, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    wait_healthy(base)
    return base, proc, [redis, pg]


def key(role: str) -> str:
    from app.auth.keys import create_key
    from app.db.engine import session_scope
    from app.settings import get_settings

    with session_scope() as s:
        return create_key(s, get_settings(), role, f"probe-{role}")[1]


def run_while(work: list[Callable[[], httpx.Response]], poll: Callable[[], None]) -> list[tuple[int, float]]:
    """Start every piece of work in a thread at once, call ``poll`` until all have answered; (status, seconds)."""
    answers: list[tuple[int, float]] = []

    def timed(w: Callable[[], httpx.Response]) -> None:
        t = time.monotonic()
        try:
            status = w().status_code
        except httpx.HTTPError:
            status = 0
        answers.append((status, round(time.monotonic() - t, 2)))

    threads = [threading.Thread(target=timed, args=(w,)) for w in work]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        poll()
    for t in threads:
        t.join()
    return answers


def b_polls(base: str, key_b: str, work: list[Callable[[], httpx.Response]]) -> dict:
    waits, health, saturation = [], [], []
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key_b}"}, timeout=600) as b:

        def poll() -> None:
            for url, into in (("/audits", waits), ("/health", health)):
                t = time.monotonic()
                r = b.get(url)
                into.append(time.monotonic() - t)
                if url == "/health" and r.status_code == 200:
                    saturation.append(r.json().get("admission", {}).get("in_use", 0))
            time.sleep(0.2)

        answers = run_while(work, poll)
    return {
        "a_answers": sorted(answers, key=lambda a: a[1]),
        "b_reads": len(waits),
        "b_worst_s": round(max(waits), 3),
        "b_median_s": round(statistics.median(waits), 3),
        "health_worst_s": round(max(health), 3),
        "admission_in_use_max": max(saturation, default=0),
    }


def probe_uploads(base: str, key_a: str, key_b: str, n: int = 12, size: int = 3_800_000) -> dict:
    items = "".join(f"{i}::Movie {i} (1995)::Drama\n" for i in range(1, 201)).encode()
    data = ratings(size)

    def upload(i: int) -> Callable[[], httpx.Response]:
        def send() -> httpx.Response:
            files = {"items": ("movies.dat", items), "interactions": ("ratings.dat", data)}
            with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key_a}"}, timeout=900) as a:
                return a.post("/datasets", data={"name": f"probe-{i}"}, files=files)

        return send

    return {"uploads": n, "upload_bytes": len(data), **b_polls(base, key_b, [upload(i) for i in range(n)])}


def probe_batches(base: str, key_a: str, key_b: str, n: int = 10, people: int = 2000) -> dict:
    def batch(i: int) -> Callable[[], httpx.Response]:
        roster = [
            {"name": f"Probe{i} Person{j}", "facts": [{"property": "P106", "value": "chemist"}]} for j in range(people)
        ]

        def send() -> httpx.Response:
            with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key_a}"}, timeout=900) as a:
                return a.post("/batches", json={"model": "groundtruth-tiny", "people": roster})

        return send

    return {"batches": n, "people": people, **b_polls(base, key_b, [batch(i) for i in range(n)])}


def probe_nulls(base: str, admin: str) -> list[dict]:
    from tests.app.test_hardening_admission import _probe_null

    out = []
    for label, data in (("67 MB", _probe_null(67_000_000)), ("30 MB", _probe_null(30_000_000, "memaudit.null/0"))):
        latencies: list[float] = []
        with httpx.Client(base_url=base, timeout=60) as h:

            def poll(h: httpx.Client = h, latencies: list[float] = latencies) -> None:
                t = time.monotonic()
                h.get("/health")
                latencies.append(time.monotonic() - t)
                time.sleep(0.1)

            def send(data: bytes = data) -> httpx.Response:
                with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {admin}"}, timeout=600) as a:
                    return a.post("/nulls/import", content=data, headers={"Content-Type": "application/gzip"})

            answers = run_while([send], poll)
        out.append(
            {
                "inflates_to": label,
                "gzip_bytes": len(data),
                "answer": answers[0],
                "health_reads": len(latencies),
                "health_worst_s": round(max(latencies), 3),
                "health_median_s": round(statistics.median(latencies), 3),
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--probe", action="append", choices=["uploads", "batches", "nulls"])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    probes = args.probe or ["uploads", "batches", "nulls"]
    root = Path(os.environ.get("TMPDIR", "/tmp")) / f"memaudit-probe-{uuid.uuid4().hex[:6]}"
    root.mkdir(parents=True)
    base, proc, servers = start(root)
    result: dict = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cores": os.cpu_count()}
    try:
        key_a, key_b, admin = key("auditor"), key("auditor"), key("admin")
        for name in probes:
            load = os.getloadavg()[0]
            if name == "uploads":
                out = probe_uploads(base, key_a, key_b)
            elif name == "batches":
                out = probe_batches(base, key_a, key_b)
            else:
                out = probe_nulls(base, admin)
            result[name] = {"load_before": round(load, 2), "result": out, "load_after": round(os.getloadavg()[0], 2)}
            print(name, json.dumps(result[name]), flush=True)
        if args.out:
            args.out.write_text(json.dumps(result, indent=2) + "\n")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        for server in servers:
            server.stop()
    print(f"service log: {root / 'service.log'}")


if __name__ == "__main__":
    main()
