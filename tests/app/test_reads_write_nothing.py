"""A GET has no side effects: every GET route of the OpenAPI spec, read by every role (and a data subject's token),
on Postgres, leaves every table with the rows it had — above all, reading a subject audit whose null does not exist
creates no null audit (the verdict says `missing`). The accountability records are the exception by design: the
access log (who read whose data, GDPR Art. 30) and the evidence record of exports."""

from __future__ import annotations

import json
import re
import uuid

from sqlalchemy import func, select

from app.db.base import Base
from tests.app.forget_set.test_export import create_result
from tests.conftest import REPO, Api, make_key
from tests.support.stored import stored_subject_audit

ROLES = ("admin", "auditor", "regulator", "pipeline")
ACCOUNTABILITY = re.compile(r"^(access_log|evidence.*)$")  # reads are recorded here on purpose
QUERIES = {
    "/forget-set": [{}, {"policy": "bh"}, {"format": "csv"}, {"format": "tofu"}, {"policy": "lenient"}],
    "/audits": [{}, {"kind": "null"}],
}


def counts() -> dict[str, int]:
    from app.db.engine import session_scope

    with session_scope() as s:
        return {t.name: s.scalar(select(func.count()).select_from(t)) for t in Base.metadata.sorted_tables}


def unknown_null_audit(key_id: int) -> tuple[str, int]:
    """A succeeded subject audit of the auditor's, on a configuration no null covers (a read used to queue one)."""
    from app.db.engine import session_scope

    with session_scope() as s:
        subject, audit = stored_subject_audit(
            s,
            key_id,
            "Ada Lovelace",
            {"P27"},
            options={"paraphrases": 1, "counterfactuals": 7},  # a configuration of this test's own
            summary={"scoring": {"fingerprint": uuid.uuid4().hex}, "lookalikes": "reversed"},
        )
        s.flush()
        create_result(
            s, audit, subject, "P27", ["United Kingdom"], ["United Kingdom", "France"], share=1.0, strict=True, z=2.0
        )
        return audit.id, subject.id


def test_no_get_route_writes_a_row(pg_env):
    from app.auth.keys import authenticate, subject_token
    from app.db.engine import session_scope
    from app.settings import get_settings

    tokens = {role: make_key(role) for role in ROLES}
    with session_scope() as s:
        key_id = authenticate(s, get_settings(), tokens["auditor"]).key_id
    audit_id, subject_id = unknown_null_audit(key_id)
    tokens["subject"] = subject_token(audit_id, get_settings())
    ids = {"audit_id": audit_id, "subject_id": str(subject_id), "batch_id": "b" * 32, "dataset_id": "1"}
    person = {"name": "Read Only", "facts": [{"property": "P27", "value": "Ghana"}]}
    made = Api(tokens["auditor"]).post(
        "/requests",
        json={
            "subject": person,
            "rights": ["access"],
            "models": ["groundtruth-tiny"],
            "received_at": "2026-04-01T09:00Z",
        },
    )
    assert made.status_code == 201, made.text  # a person's request (app/requests), read below; no delivery: a 404
    ids |= {"request_id": made.json()["id"], "delivery_id": "d" * 32}
    spec = json.loads((REPO / "openapi" / "openapi.json").read_text())
    paths = [p for p, ops in spec["paths"].items() if "get" in ops]
    assert "/audits/{audit_id}/facts" in paths and "/forget-set" in paths
    before = counts()
    answered: dict[str, set[int]] = {}
    for role, token in tokens.items():
        api = Api(token)
        for path in paths:
            url = path.format(**ids)
            for params in QUERIES.get(path, [{"audit_id": audit_id, "model": "groundtruth-tiny"}]):
                r = api.get(url, params=params)
                answered.setdefault(path, set()).add(r.status_code)
                assert r.status_code < 500, (role, url, params, r.text[:300])
    after = counts()
    changed = {t: (before[t], after[t]) for t in before if before[t] != after[t] and not ACCOUNTABILITY.match(t)}
    assert not changed, f"GET routes wrote rows: {changed}"
    assert 200 in answered["/audits/{audit_id}/facts"] and 200 in answered["/forget-set"], answered
    assert 200 in answered["/requests/{request_id}"] and 200 in answered["/requests"], answered
    facts = Api(tokens["auditor"]).get(f"/audits/{audit_id}/facts").json()
    [fact] = facts["facts"]
    assert fact["calibration"]["status"] == "missing" and "POST a null audit" in fact["calibration"]["message"]
