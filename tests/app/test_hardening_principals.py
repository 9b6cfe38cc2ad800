"""Hardening round two (issue 24), what one principal may take or see: event streams capped per key or token with
a share kept for admins (item 6); a client's Idempotency-Key stored only as its hash; one rule for the regulator
and forget-set values, in the API and the dashboard (item 8)."""

from __future__ import annotations

import gc
import hashlib

import pytest
from sqlalchemy import select, text

from app.audits import polling
from app.auth.keys import Principal, authenticate, subject_token
from app.db.engine import session_scope
from app.errors import ServiceUnavailable
from app.settings import get_settings
from tests.app.audits.test_polling import queued_audit
from tests.conftest import make_key
from tests.support.ui import sign_in

BODY = {
    "kind": "subject",
    "model": "groundtruth-tiny",
    "subject": {"name": "Idem Person", "facts": [{"property": "P106", "value": "physicist"}]},
}


def test_one_token_cannot_take_every_event_stream_and_admins_keep_a_share(sqlite_env, api_factory):
    """The probe: one data subject's token opened 200 streams, then even an admin's stream answered 503. Now one
    token gets MAX_STREAMS_PER_PRINCIPAL of 210 tries; other principals filling the process leave the admins'
    reserved share; an admin still gets a stream, through the route too."""
    auditor = api_factory("auditor")
    audit_id = queued_audit(auditor)
    with session_scope() as s:
        token_principal = authenticate(s, get_settings(), subject_token(audit_id, get_settings()))
    assert token_principal.role == "subject"
    base = polling.open_streams()
    held, refused = [], 0
    for _ in range(210):
        try:
            held.append(polling.open_stream(token_principal, audit_id, None, busy="busy"))
        except ServiceUnavailable as exc:
            refused += 1
            assert "already has" in exc.message
    assert len(held) == polling.MAX_STREAMS_PER_PRINCIPAL and refused == 210 - polling.MAX_STREAMS_PER_PRINCIPAL
    # many other keys fill what is left to non-admins
    i = 0
    while polling.open_streams() < polling.MAX_STREAMS - polling.ADMIN_RESERVED_STREAMS:
        i += 1
        held.append(
            polling.open_stream(
                Principal(id=f"key:{10**6 + i}", role="auditor", key_id=10**6 + i), audit_id, None, busy="busy"
            )
        )
    with pytest.raises(ServiceUnavailable):
        polling.open_stream(Principal(id="key:999999", role="auditor", key_id=999999), audit_id, None, busy="busy")
    admin = api_factory("admin")
    with admin.client.stream("GET", f"/audits/{audit_id}/events", headers=admin.headers) as r:
        assert r.status_code == 200
        assert next(r.iter_lines()).startswith("retry:")
    del held
    gc.collect()
    assert polling.open_streams() == base and not polling._open_by_principal


def test_an_idempotency_key_is_stored_as_its_hash_only(pg_env, api_factory):
    """A client-chosen key (which may hold a name) never lands in the database, and so never in a unique
    violation's DETAIL in the Postgres log; a retry with it still replays the same audit."""
    api = api_factory("auditor")
    key = "Idem Person's first audit"
    first = api.post("/audits", json=BODY, headers={"Idempotency-Key": key})
    again = api.post("/audits", json=BODY, headers={"Idempotency-Key": key})
    assert first.status_code == again.status_code == 202 and again.headers["Idempotent-Replayed"] == "true"
    assert first.json()["id"] == again.json()["id"]
    batch = {"model": "groundtruth-tiny", "people": [BODY["subject"]]}
    b1 = api.post("/batches", json=batch, headers={"Idempotency-Key": key})
    b2 = api.post("/batches", json=batch, headers={"Idempotency-Key": key})
    assert b1.status_code == 202 and b1.json()["id"] == b2.json()["id"], (b1.text, b2.text)
    with session_scope() as s:
        stored = set(s.scalars(text("SELECT key FROM idempotency_keys")))
        stored |= set(s.scalars(text("SELECT idempotency_key FROM batches WHERE idempotency_key IS NOT NULL")))
    assert key not in stored and hashlib.sha256(key.encode()).hexdigest() in stored


def test_a_regulator_sees_no_forget_set_values_in_the_api_or_the_dashboard(sqlite_env, api_factory):
    """One rule: GET /forget-set refuses a regulator, and so does the dashboard's forget-set preview (it showed
    names and values)."""
    from fastapi.testclient import TestClient

    from app.main import create_app

    key = make_key("regulator")
    assert api_factory(key=key).get("/forget-set").status_code == 403
    with TestClient(create_app()) as browser:
        assert sign_in(browser, key).status_code == 303
        page = browser.get("/ui/forget-set", params={"policy": "lenient"})
        assert page.status_code == 403 and "record-count" not in page.text
        assert browser.get("/ui/forget-set/download", params={"format": "csv"}).status_code == 403


def test_the_session_rows_never_hold_the_key(sqlite_env):
    from fastapi.testclient import TestClient

    from app.db.models import DashboardSession
    from app.main import create_app

    key = make_key("auditor")
    with TestClient(create_app()) as browser:
        sign_in(browser, key)
        cookie = browser.cookies["memaudit_ui"]
    with session_scope() as s:
        rows = [(r.id, r.principal) for r in s.scalars(select(DashboardSession))]
    assert rows and all(key not in f"{i} {p}" and cookie not in i for i, p in rows)
