"""Slow clients and big bodies cannot freeze the API (issue 24, items 1 and 2): a body is read whole, within its
time limit, before the request takes an admission slot; `/health` never waits behind admission; a large JSON body
is parsed off the event loop and refused by its kind's size limit. Real uvicorn processes on loopback."""

from __future__ import annotations

import json
import socket
import threading
import time
from urllib.parse import urlparse

import httpx

from tests.conftest import make_key
from tests.support import loopback

SLOW_CLIENTS = 12
# An answer that waited on nothing arrives within this many seconds; one that waited would take at least 5 s (the
# 6 s body limit these tests set, Wikidata's 5 s a call, the 21 MB body's parse). Not 1 s: at 15 % hypervisor steal
# and load 4 on 2 cores, a same-key read answered in 1.8 s with nothing held (2026-11-29).
PROMPT = 3.0


def _trickle(url: str, head: str, stop: threading.Event, answers: list[bytes], every: float = 0.5) -> None:
    """Send the request head, then one byte of the body every ``every`` seconds until the server answers; once its
    answer has begun, send nothing more (as an HTTP client does) and read until the server closes. A byte sent after
    the server's close draws a reset, which ends the read with what had arrived (it was a flake: a reset raised in
    this thread dropped an answer already read)."""
    parsed = urlparse(url)
    with socket.create_connection((parsed.hostname, parsed.port), timeout=60) as s:
        s.sendall(head.encode())
        s.settimeout(every)
        data = b""
        while not stop.is_set():
            try:
                part = s.recv(65536)
            except TimeoutError:
                if data:
                    continue
                try:
                    s.sendall(b"a")
                except OSError:
                    break
                continue
            except ConnectionResetError:
                break
            if not part:
                break
            data += part
        answers.append(data)


def _health_latencies(url: str, seconds: float) -> list[tuple[int, float]]:
    out = []
    end = time.monotonic() + seconds
    with loopback.client(timeout=30) as client:
        while time.monotonic() < end:
            start = time.monotonic()
            status = client.get(f"{url}/health").status_code
            out.append((status, time.monotonic() - start))
            time.sleep(0.2)
    return out


def test_slow_sign_in_bodies_never_hold_up_health(live_api):
    """The probe: 12 connections trickling a body to POST /ui/signin held /health for 60 s (the admission slots
    were taken before the body was read). Now /health answers promptly throughout, and each slow body gets a
    408 once its time limit is over."""
    api = live_api(MEMAUDIT_BODY_TIMEOUT_SECONDS="6", MEMAUDIT_MAX_CONCURRENT_REQUESTS="10")
    head = (
        "POST /ui/signin HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        "Content-Length: 5000\r\n\r\n"
    )
    stop, answers = threading.Event(), []
    threads = [threading.Thread(target=_trickle, args=(api.url, head, stop, answers)) for _ in range(SLOW_CLIENTS)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.5)  # every slow client is connected and sending
        latencies = _health_latencies(api.url, 5.0)
    finally:
        deadline = time.monotonic() + 15
        while len(answers) < SLOW_CLIENTS and time.monotonic() < deadline:
            time.sleep(0.2)
        stop.set()
        for t in threads:
            t.join()
    assert all(status == 200 for status, _ in latencies), latencies
    worst = max(seconds for _, seconds in latencies)
    print(f"\n/health with {SLOW_CLIENTS} slow sign-in bodies: {len(latencies)} answers, worst {worst * 1000:.0f} ms")
    assert worst < PROMPT, latencies
    assert len(answers) == SLOW_CLIENTS and all(a.startswith(b"HTTP/1.1 408") for a in answers), answers[:2]
    assert all(b'"field": "body"' in a for a in answers)


def test_a_slow_keyed_body_holds_no_admission_slot(live_api):
    """With one admission slot, a key's own request trickling its body to POST /audits leaves the slot free: the
    same key's reads answer at once."""
    api = live_api(MEMAUDIT_BODY_TIMEOUT_SECONDS="6", MEMAUDIT_MAX_CONCURRENT_REQUESTS="1")
    key = make_key("auditor")
    head = (
        f"POST /audits HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\n"
        "Content-Length: 5000\r\n\r\n"
    )
    stop, answers = threading.Event(), []
    threads = [threading.Thread(target=_trickle, args=(api.url, head, stop, answers)) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.5)
        with api.client(key, timeout=30) as client:
            for _ in range(5):
                start = time.monotonic()
                assert client.get("/audits").status_code == 200
                assert time.monotonic() - start < PROMPT
    finally:
        stop.set()
        for t in threads:
            t.join()


def test_a_large_auditor_body_does_not_hold_up_health(live_api):
    """The probe: a 21 MB capacity body (under the 24 MiB limit) took 30.9 s to a 422 while /health waited up to
    20.4 s. Now it is parsed off the event loop and refused by the capacity kind's own size limit (413 naming
    it), and /health answers promptly meanwhile."""
    api = live_api()
    key = make_key("auditor")
    architectures = [{"n_layer": 1, "d_model": 8 + i % 7} for i in range(700_000)]
    body = json.dumps(
        {"kind": "capacity", "model": "scratch", "grid": {"architectures": architectures, "dataset_sizes": [64]}}
    ).encode()
    assert 20_000_000 < len(body) < 24 * 1024 * 1024
    answer: list[httpx.Response] = []

    def send() -> None:
        with api.client(key, timeout=120) as client:
            answer.append(client.post("/audits", content=body, headers={"Content-Type": "application/json"}))

    sender = threading.Thread(target=send)
    start = time.monotonic()
    sender.start()
    latencies = _health_latencies(api.url, 3.0)
    sender.join()
    took = time.monotonic() - start
    worst = max(seconds for _, seconds in latencies)
    print(f"\n21 MB capacity body: answered {answer[0].status_code} after {took:.1f} s; /health worst {worst:.3f} s")
    assert all(status == 200 for status, _ in latencies)
    assert worst < PROMPT, latencies
    assert answer[0].status_code == 413
    assert answer[0].json()["detail"][0]["field"] == "body"
    assert "capacity" in answer[0].json()["detail"][0]["message"]


def test_the_kind_limit_holds_wherever_the_body_names_its_kind():
    """Named first, the kind's limit applies before parsing; named last, after parsing (in the thread): either way
    a 413. And a body of too many JSON values is refused whatever its kind."""
    import pytest

    from app.audits.body import MAX_JSON_VALUES, TooLarge, parse
    from app.kinds import KINDS

    facts = [{"property": "P106", "value": "v" * 200}] * 2000
    for body in (
        {"kind": "subject", "subject": {"name": "A", "facts": facts}},
        {"subject": {"facts": facts}, "kind": "subject"},
    ):
        with pytest.raises(TooLarge, match="subject audit's body is at most"):
            parse(json.dumps(body).encode(), KINDS)
    many = {"kind": "dynamics", "strings": [{"text": "a"}] * MAX_JSON_VALUES}
    with pytest.raises(TooLarge, match="JSON values"):
        parse(json.dumps(many).encode(), KINDS)
    assert parse(b'{"kind": "subject", "model": "m"}', KINDS) == {"kind": "subject", "model": "m"}


def test_hung_wikidata_lookups_do_not_hold_up_health(live_api):
    """The probe: 24 hung Wikidata lookups (every admission slot taken by a submission waiting on Wikidata) held
    /health for 34 s. /health takes no admission slot and has threads and a connection of its own."""
    from tests.app.wikidata.fake_server import FakeWikidata

    fake = FakeWikidata().start()
    fake.delay = 8.0  # hung, as far as /health is concerned (the API gives up on Wikidata after 5 s a call)
    try:
        # one key's lookups fill every slot (the per-key cap, tests/app/test_hardening_admission.py, aside)
        api = live_api(
            MEMAUDIT_WIKIDATA_API_URL=fake.url,
            MEMAUDIT_SUBMIT_RATE_PER_MINUTE="0",
            MEMAUDIT_MAX_CONCURRENT_REQUESTS_PER_KEY="0",
        )
        key = make_key("auditor")
        body = {"kind": "subject", "model": "groundtruth-tiny", "subject": {"wikidata_id": "Q42"}}

        def post() -> None:
            with api.client(key, timeout=120) as c:
                c.post("/audits", json=body)

        posts = [threading.Thread(target=post) for _ in range(24)]
        for t in posts:
            t.start()
        deadline = time.monotonic() + 20
        while len(fake.requests) < 10 and time.monotonic() < deadline:  # every admission slot is in a lookup
            time.sleep(0.05)
        assert len(fake.requests) >= 10
        latencies = _health_latencies(api.url, 3.0)
        worst = max(seconds for _, seconds in latencies)
        print(f"\n/health with 24 hung Wikidata lookups: {len(latencies)} answers, worst {worst * 1000:.0f} ms")
        assert all(status == 200 for status, _ in latencies) and worst < PROMPT, latencies
    finally:
        fake.delay = 0.0
        for t in posts:
            t.join()
        fake.stop()
