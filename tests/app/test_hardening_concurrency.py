"""Many clients on one key against a live API (uvicorn on loopback, real Postgres and Redis): no request waits on
the key's row, duplicates with one Idempotency-Key make one audit, a slow Wikidata holds no database connection."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from sqlalchemy import func, select, text

from tests.app.wikidata.fake_server import FakeWikidata
from tests.conftest import make_key

FACTS = [{"property": "P106", "value": "physicist"}]


def subject_body(name: str = "Concurrent Person", **subject) -> dict:
    return {"kind": "subject", "model": "groundtruth-tiny", "subject": {"name": name, "facts": FACTS, **subject}}


def run_together(n: int, call):
    """`n` threads released at once by a barrier; returns each call's result or exception."""
    barrier = threading.Barrier(n)

    def one(i: int):
        barrier.wait()
        try:
            return call(i)
        except Exception as exc:  # noqa: BLE001 - collected and asserted on
            return exc

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(one, range(n)))


# One key's requests fill every admission slot here, as many clients' would: the per-key cap is not under test.
ONE_KEY_ANY_SLOTS = {"MEMAUDIT_MAX_CONCURRENT_REQUESTS_PER_KEY": "0"}


def test_sixty_clients_on_one_key_are_all_answered(live_api):
    api = live_api(**ONE_KEY_ANY_SLOTS)
    key = make_key("auditor")
    with api.client(key) as c:
        audit_id = c.post("/audits", json=subject_body()).json()["id"]

    def client_session(i: int) -> list[int]:
        with api.client(key, timeout=30) as c:
            return [c.get(f"/audits/{audit_id}" if j % 2 else "/audits?page_size=5").status_code for j in range(10)]

    results = run_together(60, client_session)
    errors = [r for r in results if isinstance(r, Exception)]
    assert not errors, f"{len(errors)} of 60 clients failed, e.g. {errors[0]!r}"
    statuses = [s for r in results for s in r]
    assert statuses == [200] * 600, {s: statuses.count(s) for s in set(statuses)}

    from app.db.engine import session_scope
    from app.db.models import ApiKey

    with session_scope() as s:
        used = s.scalars(select(ApiKey.last_used_at).where(ApiKey.prefix == key.split("_")[1])).one()
    assert used is not None, "the key's use is still recorded (coarsely)"


def test_fifty_concurrent_duplicates_make_one_audit(live_api):
    from app.db.engine import session_scope
    from app.db.models import Audit, IdempotencyKey

    api = live_api(**ONE_KEY_ANY_SLOTS)  # fifty racing inserts, not three at a time
    key = make_key("auditor")
    headers = {"Idempotency-Key": "dup-50"}

    def post(i: int) -> httpx.Response:
        with api.client(key, timeout=60) as c:
            return c.post("/audits", json=subject_body(), headers=headers)

    responses = run_together(50, post)
    errors = [r for r in responses if isinstance(r, Exception)]
    assert not errors, f"{len(errors)} requests failed, e.g. {errors[0]!r}"
    assert [r.status_code for r in responses] == [202] * 50, [r.text for r in responses if r.status_code != 202][:3]
    ids = {r.json()["id"] for r in responses}
    assert len(ids) == 1, f"{len(ids)} audits for one Idempotency-Key"
    assert sum(r.headers.get("Idempotent-Replayed") == "true" for r in responses) == 49
    with session_scope() as s:
        principal = f"key:{s.scalar(select(Audit.owner_key_id).where(Audit.id == ids.pop()))}"
        owned = s.scalar(select(func.count()).select_from(Audit).where(Audit.owner_key_id == int(principal[4:])))
        keys = s.scalar(select(func.count()).select_from(IdempotencyKey).where(IdempotencyKey.principal == principal))
    assert (owned, keys) == (1, 1)
    with api.client(key) as c:
        changed = c.post("/audits", json=subject_body("Someone Else"), headers=headers)
    assert changed.status_code == 409 and changed.json()["detail"][0]["field"] == "Idempotency-Key"


@pytest.fixture
def slow_wikidata():
    fake = FakeWikidata().start()
    fake.delay = 4.0
    yield fake
    fake.stop()


def test_a_slow_wikidata_holds_no_database_connection(live_api, pg_env, slow_wikidata):
    """24 lookups that each wait on Wikidata: none holds a connection (the pool has 20), /health still answers."""
    from app.db.engine import session_scope

    with session_scope() as s:
        started = s.scalar(text("SELECT now()"))  # the API's connections are all opened after this
    api = live_api(MEMAUDIT_WIKIDATA_API_URL=slow_wikidata.url, **ONE_KEY_ANY_SLOTS)
    key = make_key("auditor")
    body = {"kind": "subject", "model": "groundtruth-tiny", "subject": {"wikidata_id": "Q42"}}
    results: list = []

    def post(i: int):
        with api.client(key, timeout=120) as c:
            return c.post("/audits", json=body)

    submitter = threading.Thread(target=lambda: results.extend(run_together(24, post)))
    submitter.start()
    deadline = time.monotonic() + 30
    while len(slow_wikidata.requests) < 24 and time.monotonic() < deadline:
        time.sleep(0.05)  # wait until every request is inside its Wikidata call
    time.sleep(1.5)  # the last one has now waited 1.5 s of its 4 s call
    # Connections of this test's API (opened after `started`; the database is shared with earlier tests' processes)
    # that have sat in an open transaction for over a second: a transaction held across the Wikidata call would be
    # one (the last request's, at least, 1.5 s into its call); a request paused between two statements of a short
    # transaction is not (at 0.5 s, a loaded machine once showed ten such pauses).
    with session_scope() as s:
        waiting = s.scalar(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND state LIKE 'idle in transaction%' AND backend_start >= :started "
                "AND now() - state_change > interval '1 second'"
            ),
            {"started": started},
        )
    with api.client(timeout=15) as c:
        health = c.get("/health")
    submitter.join()
    assert waiting == 0, f"{waiting} connections sat in an open transaction while Wikidata answered"
    assert health.status_code == 200
    assert [getattr(r, "status_code", r) for r in results] == [202] * 24


def test_a_request_never_waits_on_its_keys_row(pg_env, api_factory):
    """Another transaction holds the key's row lock (as a long request once did): requests with that key are
    still answered, and the use is recorded later rather than waited for."""
    from app.db.engine import session_scope
    from app.db.models import ApiKey

    key = make_key("auditor")
    api = api_factory(key=key)
    answers: list[int] = []
    with session_scope() as holder:
        holder.scalars(select(ApiKey).where(ApiKey.prefix == key.split("_")[1]).with_for_update()).one()
        caller = threading.Thread(target=lambda: answers.append(api.get("/audits").status_code), daemon=True)
        caller.start()
        caller.join(timeout=20)
        blocked = caller.is_alive()
    assert not blocked and answers == [200], "the request waited on the key's row lock"
