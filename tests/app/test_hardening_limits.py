"""Limits before work: body size (413) and authentication (401) before a byte of the body is read, per-key rate
limits and the active-audit quota (429 + Retry-After), and a database error that never puts a name in the log."""

from __future__ import annotations

import socket
from urllib.parse import urlparse

import pytest
from sqlalchemy import text

from tests.conftest import make_key
from tests.support.ui import sign_in

BODY = {
    "kind": "subject",
    "model": "groundtruth-tiny",
    "subject": {"name": "Limit Person", "facts": [{"property": "P106", "value": "physicist"}]},
}


def raw_exchange(url: str, head: str, chunks: list[bytes] = (), timeout: float = 15) -> tuple[int, bytes]:
    """Send request headers (and maybe some body chunks, never finishing the body); return the answer's status
    and bytes. A server that waits for the whole body before answering makes this time out."""
    parsed = urlparse(url)
    with socket.create_connection((parsed.hostname, parsed.port), timeout=timeout) as s:
        s.sendall(head.encode())
        for chunk in chunks:
            s.sendall(chunk)
        data = b""
        while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < _length(data):
            part = s.recv(65536)
            if not part:
                break
            data += part
    return int(data.split(b" ", 2)[1]), data


def _length(data: bytes) -> int:
    for line in data.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":")[1])
    return 0


def post_head(key: str | None, extra: str) -> str:
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    return f"POST /audits HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{auth}{extra}\r\n"


def test_a_body_without_a_key_is_refused_before_it_is_read(live_api):
    api = live_api()
    status, data = raw_exchange(api.url, post_head(None, "Content-Length: 900000\r\n"))  # body never sent
    assert status == 401 and b"missing API key" in data
    status, _ = raw_exchange(api.url, post_head(None, "Content-Length: 90000000\r\n"))
    assert status == 413, "over the limit: refused whoever sends it"


def test_a_huge_declared_body_is_a_413_before_it_is_read(live_api):
    api = live_api()
    status, data = raw_exchange(api.url, post_head(make_key("auditor"), "Content-Length: 90000000\r\n"))
    assert status == 413 and b'"field": "body"' in data and b"25165824 bytes" in data


def test_a_chunked_body_is_counted_and_cut_at_the_limit(live_api):
    api = live_api(MEMAUDIT_MAX_REQUEST_BYTES="100000")
    piece = b"x" * 50_000
    chunks = [b"%x\r\n%s\r\n" % (len(piece), piece)] * 3  # 150 kB of a body that never ends
    status, data = raw_exchange(api.url, post_head(make_key("auditor"), "Transfer-Encoding: chunked\r\n"), chunks)
    assert status == 413 and b"100000 bytes" in data


def test_bad_keys_on_a_body_route_are_401_before_the_body(live_api):
    api = live_api()
    status, _ = raw_exchange(api.url, post_head("mak_0123456789ab_wrong", "Content-Length: 900000\r\n"))
    assert status == 401


@pytest.fixture
def limited(pg_env, monkeypatch, api_factory):
    """Set MEMAUDIT_* limits for TestClient requests (the rate limiter lives in Redis under pg_env)."""
    from app.settings import get_settings

    def apply(**settings: str):
        for name, value in settings.items():
            monkeypatch.setenv(f"MEMAUDIT_{name.upper()}", value)
        get_settings.cache_clear()
        return api_factory("auditor")

    yield apply
    get_settings.cache_clear()


def test_requests_over_the_rate_limit_get_429_with_retry_after(limited, api_factory):
    api = limited(rate_limit_per_minute="5")
    assert [api.get("/audits").status_code for _ in range(5)] == [200] * 5
    refused = api.get("/audits")
    assert refused.status_code == 429
    assert 1 <= int(refused.headers["Retry-After"]) <= 12  # one request every 12 s refills the bucket
    assert "rate limit" in refused.json()["detail"][0]["message"]
    assert api_factory("auditor").get("/audits").status_code == 200, "another key has its own budget"


def test_submissions_have_their_own_rate_limit(limited):
    api = limited(submit_rate_per_minute="2")
    assert [api.post("/audits", json=BODY).status_code for _ in range(3)] == [202, 202, 429]
    assert api.get("/audits").status_code == 200, "reading is not a submission"


def test_the_active_audit_quota_is_a_429_until_an_audit_ends(limited):
    api = limited(max_active_audits_per_key="2")
    first, _ = (api.post("/audits", json=BODY).json() for _ in range(2))
    refused = api.post("/audits", json=BODY)
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "60"
    assert "queued or running" in refused.json()["detail"][0]["message"]
    assert api.delete(f"/audits/{first['id']}").status_code == 200
    assert api.post("/audits", json=BODY).status_code == 202, "a cancelled audit frees its place"


def test_the_local_rate_limiter_without_redis(sqlite_env, monkeypatch, api_factory):
    from app.settings import get_settings

    monkeypatch.setenv("MEMAUDIT_RATE_LIMIT_PER_MINUTE", "3")
    get_settings.cache_clear()
    api = api_factory("auditor")
    assert [api.get("/audits").status_code for _ in range(4)] == [200, 200, 200, 429]


def test_a_database_error_logs_no_name(live_api, pg_env):
    """The database refuses the subject (a CHECK constraint made for this test): the API answers a 500 in the
    standard shape, and neither the answer nor the API's log holds the name PostgreSQL quoted in its error."""
    from app.db.engine import session_scope

    secret = "Zqxjv Secretname"
    with session_scope() as s:
        s.execute(text("ALTER TABLE subjects ADD CONSTRAINT test_refuse_name CHECK (name NOT LIKE '%Zqxjv%')"))
    try:
        api = live_api()
        with api.client(make_key("auditor")) as c:
            r = c.post("/audits", json={**BODY, "subject": {**BODY["subject"], "name": secret}})
    finally:
        with session_scope() as s:
            s.execute(text("ALTER TABLE subjects DROP CONSTRAINT test_refuse_name"))
    assert r.status_code == 500 and r.json()["detail"][0]["message"].startswith("internal error")
    log = api.log_text()
    assert "IntegrityError" in log and "sqlstate=23514" in log, log[-2000:]
    assert "Zqxjv" not in log and "Zqxjv" not in r.text and "physicist" not in log


def test_the_dashboards_cookie_is_no_way_around_the_rate_limit(sqlite_env, monkeypatch):
    """A signed-in dashboard session counts against its principal's request limit like a bearer key (it did not)."""
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import get_settings

    monkeypatch.setenv("MEMAUDIT_RATE_LIMIT_PER_MINUTE", "3")
    get_settings.cache_clear()
    key = make_key("auditor")
    with TestClient(create_app(), base_url="http://testserver") as browser:
        signed_in = sign_in(browser, key)
        assert signed_in.status_code == 303 and "memaudit_ui" in browser.cookies
        codes = [browser.get("/ui/audits").status_code for _ in range(4)]
        assert codes == [200, 200, 200, 429], codes
        refused = browser.get("/ui/models")
        assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
        assert "rate limit" in refused.text
