"""Polling: ETag / If-None-Match (304) on GET /audits/{id} and the list; the Server-Sent-Events stream of an
audit's status and progress, which ends at a final status and honours visibility as GET /audits/{id} does."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from app.audits import polling, repository
from app.auth.keys import authenticate
from app.db.base import utcnow
from app.db.engine import session_scope
from app.db.models import Audit
from app.db.models.audit import AuditStatus
from app.settings import get_settings
from tests.conftest import Api, make_key


def queued_audit(api) -> str:  # noqa: ANN001
    """An audit row owned by ``api``'s key, queued, that no worker runs: the test moves it itself."""
    token = api.headers["Authorization"].removeprefix("Bearer ")
    with session_scope() as s:
        principal = authenticate(s, get_settings(), token)
        audit = Audit(kind="subject", model="groundtruth-tiny", options={}, owner_key_id=principal.key_id)
        s.add(audit)
        s.flush()
        return audit.id


def move(audit_id: str, *, done: int | None = None, total: int | None = None, status: str | None = None) -> None:
    with session_scope() as s:
        if done is not None:
            repository.set_progress(s, audit_id, done, total or done)
        if status is not None:
            audit = s.get(Audit, audit_id)
            audit.status = status
            audit.finished_at = utcnow() if status in ("succeeded", "failed", "cancelled") else None


def test_get_audit_answers_304_while_nothing_changed(sqlite_env, api_factory):
    api = api_factory("auditor")
    audit_id = queued_audit(api)
    first = api.get(f"/audits/{audit_id}")
    etag = first.headers["etag"]
    assert first.status_code == 200 and etag.startswith('"') and "no-cache" in first.headers["cache-control"]
    same = api.get(f"/audits/{audit_id}", headers={"If-None-Match": etag})
    assert same.status_code == 304 and same.content == b"" and same.headers["etag"] == etag
    move(audit_id, done=1, total=4)
    changed = api.get(f"/audits/{audit_id}", headers={"If-None-Match": etag})
    assert changed.status_code == 200 and changed.headers["etag"] != etag
    assert changed.json()["progress"] == {"done": 1, "total": 4}
    # the list too, per filter set and page
    listing = api.get("/audits", params={"status": "queued"})
    tag = listing.headers["etag"]
    assert api.get("/audits", params={"status": "queued"}, headers={"If-None-Match": tag}).status_code == 304
    assert api.get("/audits", params={"status": "running"}, headers={"If-None-Match": tag}).status_code == 200
    # another principal's audit is a 404 whatever the tag
    other = api_factory("auditor")
    assert other.get(f"/audits/{audit_id}", headers={"If-None-Match": etag}).status_code == 404


def events(lines) -> Iterator[tuple[str, dict]]:  # noqa: ANN001
    """(event, data) pairs parsed from an SSE line iterator."""
    name = None
    for line in lines:
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            yield name, json.loads(line.removeprefix("data: "))


def test_the_event_stream_delivers_progress_and_ends_at_a_final_status(sqlite_env, api_factory, monkeypatch):
    monkeypatch.setattr(polling, "EVENTS_POLL_SECONDS", 0.05)
    api = api_factory("auditor")
    audit_id = queued_audit(api)
    seen = []
    with api.client.stream("GET", f"/audits/{audit_id}/events", headers=api.headers) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        stream = events(r.iter_lines())
        seen.append(next(stream))
        move(audit_id, done=2, total=5, status="running")
        seen.append(next(stream))
        move(audit_id, done=5, total=5, status="succeeded")
        seen += list(stream)  # the server ends the stream by itself
    assert [name for name, _ in seen] == ["progress", "progress", "progress", "end"]
    assert seen[0][1]["status"] == "queued"
    assert seen[1][1]["status"] == "running" and seen[1][1]["progress"] == {"done": 2, "total": 5}
    assert seen[-1][1]["status"] == "succeeded" and seen[-1][1]["progress"] == {"done": 5, "total": 5}


def test_the_event_stream_honours_visibility_and_its_lifetime(sqlite_env, api_factory, monkeypatch):
    monkeypatch.setattr(polling, "EVENTS_POLL_SECONDS", 0.05)
    monkeypatch.setenv("MEMAUDIT_EVENTS_MAX_SECONDS", "0.3")
    get_settings.cache_clear()
    api = api_factory("auditor")
    audit_id = queued_audit(api)
    assert api_factory("auditor").get(f"/audits/{audit_id}/events").status_code == 404
    assert api_factory("pipeline").get(f"/audits/{audit_id}/events").status_code == 404
    assert api_factory().get(f"/audits/{audit_id}/events").status_code == 401
    regulator = api_factory("regulator")
    with regulator.client.stream("GET", f"/audits/{audit_id}/events", headers=regulator.headers) as r:
        names = [name for name, _ in events(r.iter_lines())]
    assert names == ["progress", "timeout"]  # nothing changed: one snapshot, then the bounded end


def test_the_event_stream_ends_at_its_lifetime_not_a_poll_later(sqlite_env, api_factory, monkeypatch):
    monkeypatch.setattr(polling, "EVENTS_POLL_SECONDS", 30.0)  # a poll far longer than the lifetime
    monkeypatch.setenv("MEMAUDIT_EVENTS_MAX_SECONDS", "0.2")
    get_settings.cache_clear()
    api = api_factory("auditor")
    audit_id = queued_audit(api)
    started = time.monotonic()
    with api.client.stream("GET", f"/audits/{audit_id}/events", headers=api.headers) as r:
        names = [name for name, _ in events(r.iter_lines())]
    assert names == ["progress", "timeout"]
    assert time.monotonic() - started < 15, "the stream slept a whole poll past its lifetime"


@pytest.mark.parametrize("status", [AuditStatus.FAILED, AuditStatus.CANCELLED])
def test_a_finished_audit_streams_one_snapshot_and_ends(sqlite_env, status):
    api = Api(make_key("admin"))
    audit_id = queued_audit(api)
    move(audit_id, status=status)
    with api.client.stream("GET", f"/audits/{audit_id}/events", headers=api.headers) as r:
        assert [name for name, _ in events(r.iter_lines())] == ["progress", "end"]


def test_revoking_the_key_ends_its_open_stream(sqlite_env, api_factory, monkeypatch):
    """The key was checked when the stream opened; revoked meanwhile, the stream ends with `gone` at its next poll
    instead of running on for its lifetime (docs/dashboard.md: revocation signs sessions out at once)."""
    from app.auth.keys import revoke_key

    monkeypatch.setattr(polling, "EVENTS_POLL_SECONDS", 0.05)
    api = api_factory("auditor")
    audit_id = queued_audit(api)
    token = api.headers["Authorization"].removeprefix("Bearer ")
    with session_scope() as s:
        key_id = authenticate(s, get_settings(), token).key_id
    with api.client.stream("GET", f"/audits/{audit_id}/events", headers=api.headers) as r:
        stream = events(r.iter_lines())
        assert next(stream)[0] == "progress"
        with session_scope() as s:
            assert revoke_key(s, key_id)
        assert [name for name, _ in stream] == ["gone"]


def test_the_stream_cap_counts_a_stream_when_it_is_opened_and_gives_it_back_once(sqlite_env, api_factory, monkeypatch):
    """Requests that arrive together must not all pass the check before any stream has started (the count used to
    be taken inside the stream, at its first chunk); a stream dropped before it starts, and one that ends, give
    their slot back exactly once."""
    import gc

    from app.errors import ServiceUnavailable

    monkeypatch.setattr(polling, "EVENTS_POLL_SECONDS", 0.05)
    monkeypatch.setattr(polling, "MAX_STREAMS", polling.open_streams() + 2)
    monkeypatch.setattr(polling, "ADMIN_RESERVED_STREAMS", 0)  # this cap, not the admins' share, is under test
    monkeypatch.setattr(polling, "REGULATOR_RESERVED_STREAMS", 0)
    api = api_factory("auditor")
    audit_id = queued_audit(api)
    with session_scope() as s:
        principal = authenticate(s, get_settings(), api.headers["Authorization"].removeprefix("Bearer "))
    base = polling.open_streams()
    opened = [
        polling.open_stream(principal, audit_id, None, busy="busy", account=principal.id) for _ in range(2)
    ]  # not started yet
    with pytest.raises(ServiceUnavailable):
        polling.open_stream(principal, audit_id, None, busy="busy", account=principal.id)
    assert api.get(f"/audits/{audit_id}/events").status_code == 503  # the route says so too
    assert polling.open_streams() == base + 2
    del opened
    gc.collect()
    assert polling.open_streams() == base  # never started, dropped: the slots are back
    move(audit_id, status="succeeded")
    with api.client.stream("GET", f"/audits/{audit_id}/events", headers=api.headers) as r:
        assert [name for name, _ in events(r.iter_lines())] == ["progress", "end"]
    gc.collect()
    assert polling.open_streams() == base  # ended, then collected: given back once, not twice
