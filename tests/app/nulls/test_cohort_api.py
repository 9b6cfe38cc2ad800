"""GET /cohort-stats: bad cohorts answer 422/404 naming the field; another auditor's audits are not visible."""

from __future__ import annotations

import uuid


def make_audit(model: str, kind: str = "subject", status: str = "succeeded", owner: int | None = None) -> str:
    from app.db.engine import session_scope
    from app.db.models import Audit

    with session_scope() as s:
        audit = Audit(id=uuid.uuid4().hex, kind=kind, model=model, status=status, options={}, owner_key_id=owner)
        s.add(audit)
        return audit.id


def test_cohort_requests_are_checked(pg_env, api_factory):
    admin = api_factory("admin")
    a, b = make_audit("groundtruth-tiny"), make_audit("smollm2-135m")
    running = make_audit("groundtruth-tiny", status="running")
    r = admin.get("/cohort-stats")
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "model"
    r = admin.get("/cohort-stats", params={"audit_id": [a, b]})
    assert r.status_code == 422 and "one model" in r.text
    r = admin.get("/cohort-stats", params={"audit_id": [a, running]})
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "audit_id[1]"
    assert admin.get("/cohort-stats", params={"audit_id": [a, uuid.uuid4().hex]}).status_code == 404
    assert api_factory("auditor").get("/cohort-stats", params={"audit_id": [a]}).status_code == 404
    empty = admin.get("/cohort-stats", params={"audit_id": [a]}).json()  # an audit without results
    assert empty["cohort"]["subjects"] == 1 and empty["cohort"]["facts"] == 0 and empty["null"] is None
    assert empty["cohort"]["zero_memorization"] == 1.0
