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


def _open(principal: Principal, audit_id: str) -> object:
    return polling.open_stream(
        principal, audit_id, None, busy="busy", account=polling.check_visible(principal, audit_id)
    )


def test_one_token_cannot_take_every_event_stream_and_admins_keep_a_share(sqlite_env, api_factory):
    """The probe: one data subject's token opened 200 streams, then even an admin's stream answered 503. Now one
    token gets MAX_STREAMS_PER_PRINCIPAL of 210 tries; other principals filling the process leave the admins' and
    the regulators' reserved shares; an admin and a regulator still get a stream, through the route too."""
    auditor = api_factory("auditor")
    audit_id = queued_audit(auditor)
    with session_scope() as s:
        token_principal = authenticate(s, get_settings(), subject_token(audit_id, get_settings()))
    assert token_principal.role == "subject"
    base = polling.open_streams()
    held, refused = [], 0
    for _ in range(210):
        try:
            held.append(_open(token_principal, audit_id))
        except ServiceUnavailable as exc:
            refused += 1
            assert "already has" in exc.message
    assert len(held) == polling.MAX_STREAMS_PER_PRINCIPAL and refused == 210 - polling.MAX_STREAMS_PER_PRINCIPAL
    # many other keys fill what is left to auditors
    reserved = polling.ADMIN_RESERVED_STREAMS + polling.REGULATOR_RESERVED_STREAMS
    i = 0
    while polling.open_streams() < polling.MAX_STREAMS - reserved:
        i += 1
        other = Principal(id=f"key:{10**6 + i}", role="auditor", key_id=10**6 + i)
        held.append(polling.open_stream(other, audit_id, None, busy="busy", account=other.id))
    with pytest.raises(ServiceUnavailable):
        other = Principal(id="key:999999", role="auditor", key_id=999999)
        polling.open_stream(other, audit_id, None, busy="busy", account=other.id)
    for role in ("regulator", "admin"):
        api = api_factory(role)
        with api.client.stream("GET", f"/audits/{audit_id}/events", headers=api.headers) as r:
            assert r.status_code == 200, role
            assert next(r.iter_lines()).startswith("retry:")
    del held
    gc.collect()
    assert polling.open_streams() == base and not polling._open_by_principal and not polling._open_by_account


def test_one_auditors_subject_tokens_cannot_take_every_event_stream(sqlite_env, api_factory):
    """The probe (issue 44, item 2): one auditor minted 9 subject tokens and opened 20 streams with each, all 180
    streams not reserved for admins; then other auditors, their tokens and the regulator got 503. A subject
    token's streams now count for the key that owns its audit: the auditor's tokens share one account's cap, and
    another auditor, its token and the regulator still get a stream (through the route)."""
    auditor = api_factory("auditor")
    base = polling.open_streams()
    held, refused = [], 0
    for _ in range(9):
        audit_id = queued_audit(auditor)
        with session_scope() as s:
            token = authenticate(s, get_settings(), subject_token(audit_id, get_settings()))
        for _ in range(20):
            try:
                held.append(_open(token, audit_id))
            except ServiceUnavailable as exc:
                refused += 1
                assert "its subject tokens already have" in exc.message
    assert len(held) == polling.MAX_STREAMS_PER_ACCOUNT and refused == 180 - polling.MAX_STREAMS_PER_ACCOUNT
    other = api_factory("auditor")
    other_audit = queued_audit(other)
    token_headers = {"Authorization": f"Bearer {subject_token(other_audit, get_settings())}"}
    regulator = api_factory("regulator")
    for headers in (other.headers, token_headers, regulator.headers):
        with other.client.stream("GET", f"/audits/{other_audit}/events", headers=headers) as r:
            assert r.status_code == 200, r.read()
            assert next(r.iter_lines()).startswith("retry:")
    print(
        f"\n9 tokens x 20 streams of one auditor: {len(held)} opened, {refused} refused; another auditor,"
        " its token and the regulator each got a stream"
    )
    del held
    gc.collect()
    assert polling.open_streams() == base and not polling._open_by_account


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
