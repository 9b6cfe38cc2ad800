"""Hardening round three (issue 44): no one key closes the API to others. Real uvicorn processes on the test
Postgres and Redis.

Item 1, the probes: 12 concurrent 3.8 MB dataset uploads by auditor A held every admission slot (10) while B's
`GET /audits` waited 46.3 s; 10 concurrent 2,000-person batches, 19.4 s; `/health` stayed green throughout. Now
one key holds at most `max_concurrent_requests_per_key` slots (3), its other requests wait on their own turn, and
`/health` reports the slots' saturation. Item 3, the probe: `POST /nulls/import` of a 73 KB gzip inflating to 67 MB
of JSON held the GIL 17.6 s (`/health` waited as long); now the file is checked from its start and its inflated
size counted in the API (413 past 32 MiB), and parsed by a process of its own."""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Callable

import httpx

from tests.conftest import make_key
from tests.support import loopback

UNLIMITED = {"MEMAUDIT_SUBMIT_RATE_PER_MINUTE": "0", "MEMAUDIT_RATE_LIMIT_PER_MINUTE": "0"}


def _ratings(target_bytes: int) -> bytes:
    lines, size, i = [], 0, 0
    while size < target_bytes:
        line = f"{1 + i % 6040}::{1 + (i * 7) % 200}::{1 + i % 5}::{978300760 + i}\n"
        lines.append(line)
        size += len(line)
        i += 1
    return "".join(lines).encode()


def _b_waits_while(api, key_b: str, work: list[Callable[[], httpx.Response]]) -> tuple[list[float], list, list]:
    """Run ``work`` in threads at once; meanwhile B lists its audits and /health is read, each about 5 times a
    second, until every piece of work has answered. B's latencies, /health's answers, the work's answers (each
    with its own duration)."""
    answers: list[tuple[httpx.Response, float]] = []

    def timed(w: Callable[[], httpx.Response]) -> None:
        start = time.monotonic()
        answers.append((w(), time.monotonic() - start))

    threads = [threading.Thread(target=timed, args=(w,)) for w in work]
    for t in threads:
        t.start()
    time.sleep(0.5)  # every request of A's is in (its body read, a slot taken or waited for)
    waits, health = [], []
    with loopback.client(base_url=api.url, headers={"Authorization": f"Bearer {key_b}"}, timeout=600) as b:
        while any(t.is_alive() for t in threads):
            start = time.monotonic()
            assert b.get("/audits").status_code == 200
            waits.append(time.monotonic() - start)
            health.append(b.get("/health").json())
            time.sleep(0.2)
    for t in threads:
        t.join()
    return waits, health, answers


def test_one_keys_dataset_uploads_leave_slots_for_another_key(live_api):
    """The probe's shape at a test's size: 4 slots (3 per key), 6 uploads by A of 0.4 MB each. Before, A's uploads
    held every slot and B waited as long as an upload took; now B's list answers while A's uploads run.
    docs/reliability.md has the probe at full size (10 slots, 12 uploads of 3.8 MB)."""
    api = live_api(MEMAUDIT_MAX_CONCURRENT_REQUESTS="4", **UNLIMITED)
    key_a, key_b = make_key("auditor"), make_key("auditor")
    ratings = _ratings(400_000)
    items = "".join(f"{i}::Movie {i} (1995)::Drama\n" for i in range(1, 201)).encode()

    def upload(i: int) -> Callable[[], httpx.Response]:
        def send() -> httpx.Response:
            files = {"items": ("movies.dat", items), "interactions": ("ratings.dat", ratings)}
            with api.client(key_a, timeout=600) as a:
                return a.post("/datasets", data={"name": f"big-{i}"}, files=files)

        return send

    waits, health, answers = _b_waits_while(api, key_b, [upload(i) for i in range(6)])
    assert [r.status_code for r, _ in answers] == [201] * 6, [r.text[:200] for r, _ in answers if r.status_code != 201]
    fastest = min(took for _, took in answers)
    print(
        f"\n6 x {len(ratings) / 1e6:.1f} MB uploads by A: fastest {fastest:.1f} s; B's GET /audits {len(waits)} times,"
        f" worst {max(waits):.2f} s"
    )
    assert max(waits) <= 2.0 and max(waits) < fastest / 2, (waits, fastest)
    assert all(h["status"] == "ok" for h in health)
    busiest = max((h["admission"] for h in health if "admission" in h), key=lambda s: s["in_use"])
    print(f"/health at the busiest: {busiest}")
    assert busiest["per_key"] == 3 and busiest["in_use"] <= 4
    assert any(h["admission"]["keys_at_their_cap"] >= 1 for h in health if "admission" in h), "saturation unseen"
    # one heavy request of A's at a time (its parsing shares this process's GIL with B's reads), the others waiting
    assert all(h["admission"]["heavy_running"] <= 1 for h in health if "admission" in h)
    assert any(h["admission"]["heavy_waiting"] >= 1 for h in health if "admission" in h)


def test_one_keys_large_batches_leave_slots_for_another_key(live_api):
    """The same with 6 batches of 2,000 people by A (JSON rosters, parsed in a thread)."""
    api = live_api(MEMAUDIT_MAX_CONCURRENT_REQUESTS="4", **UNLIMITED)
    key_a, key_b = make_key("auditor"), make_key("auditor")

    def batch(i: int) -> Callable[[], httpx.Response]:
        people = [
            {"name": f"Batch{i} Person{j}", "facts": [{"property": "P106", "value": "chemist"}]} for j in range(2000)
        ]

        def send() -> httpx.Response:
            with api.client(key_a, timeout=600) as a:
                return a.post("/batches", json={"model": "groundtruth-tiny", "people": people})

        return send

    waits, _, answers = _b_waits_while(api, key_b, [batch(i) for i in range(6)])
    assert [r.status_code for r, _ in answers] == [202] * 6, [r.text[:200] for r, _ in answers if r.status_code != 202]
    fastest = min(took for _, took in answers)
    print(f"\n6 x 2,000-person batches by A: fastest {fastest:.1f} s; B's GET /audits worst {max(waits):.2f} s")
    # Before, B waited for one of A's batches to end; then, with a slot of its own, it still shared the GIL with
    # three of A's batches written at once (3.6 s on a loaded machine). Now A's batches run one at a time and a
    # batch's look-alike sample no longer folds every pool name per person (16 s of its 22 s): docs/reliability.md.
    assert max(waits) < fastest / 2, (waits, fastest)


def _probe_null(json_bytes: int, fmt: str = "memaudit.null/1") -> bytes:
    """A file shaped like a null artifact (canonical key order, the shipped null's header and columns) whose one
    distribution repeats a row until its JSON is ``json_bytes`` long: it compresses about 1,000 to 1."""
    from app.nulls.shipped import SHIPPED_DIR

    shipped = json.loads(gzip.decompress(next(SHIPPED_DIR.glob("*.null.json.gz")).read_bytes()))
    dist = shipped["distributions"][0]
    row = json.dumps(dist["rows"][0], separators=(",", ":"))
    head = dict(shipped, format=fmt, distributions=[dict(dist, rows=[])])
    text = json.dumps(head, sort_keys=True, separators=(",", ":"))
    cut = text.index('"rows":[]') + len('"rows":[')
    n = max(1, (json_bytes - len(text)) // (len(row) + 1))
    return gzip.compress((text[:cut] + ",".join([row] * n) + text[cut:]).encode(), compresslevel=9)


def _health_until(url: str, done: Callable[[], bool]) -> list[tuple[int, float]]:
    """/health's status and latency, read on one connection about 10 times a second until ``done()`` (3 at least)."""
    out = []
    with loopback.client(base_url=url, timeout=30) as client:
        while not done() or len(out) < 3:
            start = time.monotonic()
            status = client.get("/health").status_code
            out.append((status, time.monotonic() - start))
            time.sleep(0.1)
    return out


def test_a_null_import_bomb_does_not_hold_up_health(live_api):
    api = live_api()
    key = make_key("admin")
    idle = _health_until(api.url, lambda: True)
    cases = (
        ("67 MB", _probe_null(67_000_000), 413, "body"),  # the probe: past the inflation ceiling
        ("30 MB", _probe_null(30_000_000, fmt="memaudit.null/0"), 422, "format"),  # parsed whole, refused at the end
    )
    for label, data, status, field in cases:
        answer: list[httpx.Response] = []

        def send(data: bytes = data, answer: list = answer) -> None:
            with api.client(key, timeout=300) as admin:
                answer.append(admin.post("/nulls/import", content=data, headers={"Content-Type": "application/gzip"}))

        sender = threading.Thread(target=send)
        start = time.monotonic()
        sender.start()
        latencies = _health_until(api.url, lambda sender=sender: not sender.is_alive())
        sender.join()
        took = time.monotonic() - start
        worst = max(seconds for _, seconds in latencies)
        print(
            f"\n{len(data) / 1e3:.0f} KB gzip inflating to {label}: {answer[0].status_code} after {took:.1f} s;"
            f" /health {len(latencies)} answers, worst {worst:.3f} s (idle: worst {max(s for _, s in idle):.3f} s)"
        )
        assert answer[0].status_code == status and answer[0].json()["detail"][0]["field"] == field, answer[0].text
        # Before: 17.6 s. Measured here: at most 0.3-1.2 s on a machine at load 14-16 (idle: 0.1 s), once 3.0 s in
        # a full suite run (2026-11-29, steal 6 %); the bound leaves room for such a machine's pauses, not for a
        # parse in the API process.
        assert all(code == 200 for code, _ in latencies) and worst <= 5.0, latencies
