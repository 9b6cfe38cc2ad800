"""GDPR-shaped erasure and accountability with real Postgres and Redis: erasure reaches idempotency keys and job
records, reads and exports land in the access log without a name, a data-subject token can be revoked, old
audits are purged by the retention policy, and erasure can VACUUM what it touched."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select, text, update

from app.db.base import utcnow
from app.db.engine import session_scope
from app.db.models import AccessLog, Audit, IdempotencyKey, Subject
from tests.support.faults import audit_row, person, subject_body

TINY = {"counterfactuals": 2, "paraphrases": 0, "similar_names": 1}
NAME_KEY = "audit of Yselda Calderwick, 2026"  # a client-chosen idempotency key that holds a name


def submit(api, i: int = 0, **headers) -> dict:
    r = api.post("/audits", json=subject_body(i, **TINY), headers=headers)
    assert r.status_code == 202, r.text
    return r.json()


def access_log() -> list[AccessLog]:
    with session_scope() as s:
        rows = list(s.scalars(select(AccessLog).order_by(AccessLog.id)))
        s.expunge_all()
    return rows


def assert_no_name(rows: list[AccessLog], name: str) -> None:
    for r in rows:
        assert all(name not in str(v) for v in (r.principal, r.role, r.action, r.subject_id, r.audit_id)), r.action


def test_erasure_removes_idempotency_keys_and_job_records(pg_env, api_factory):
    from redis import Redis

    from app.queue import job_id

    api = api_factory("auditor")
    created = submit(api, **{"Idempotency-Key": NAME_KEY})
    redis = Redis.from_url(pg_env["MEMAUDIT_REDIS_URL"])
    assert redis.exists(f"rq:job:{job_id(created['id'])}")
    erased = api.delete(f"/subjects/{created['subject_id']}")
    assert erased.status_code == 200, erased.text
    assert erased.json()["idempotency_keys"] == 1 and erased.json()["job_records"] == 1, erased.json()
    with session_scope() as s:
        assert s.scalar(select(IdempotencyKey).where(IdempotencyKey.key == NAME_KEY)) is None
    assert not redis.exists(f"rq:job:{job_id(created['id'])}")
    [entry] = [r for r in access_log() if r.action == "erase_subject" and r.subject_id == created["subject_id"]]
    assert entry.role == "auditor" and entry.principal.startswith("key:")
    assert_no_name(access_log(), person(0)["name"])


def test_reads_and_exports_are_logged_by_id_only(pg_env, api_factory):
    from workers.jobs.subject import run

    auditor, regulator, pipeline = (api_factory(role) for role in ("auditor", "regulator", "pipeline"))
    created = submit(auditor, 0)
    run(created["id"])  # in-process: the ground-truth model memorized this trained person
    assert audit_row(created["id"]).status == "succeeded"
    assert regulator.get(f"/audits/{created['id']}/facts").status_code == 200
    exported = pipeline.get("/forget-set", params={"audit_id": created["id"], "policy": "lenient"})
    assert exported.status_code == 200 and exported.text, "nothing memorized: the export test proves nothing"

    mine = [r for r in access_log() if r.audit_id == created["id"]]
    assert [(r.role, r.action) for r in mine] == [("regulator", "read_facts"), ("pipeline", "export_forget_set")]
    assert all(r.subject_id == created["subject_id"] for r in mine)
    assert_no_name(access_log(), person(0)["name"])
    page = regulator.get("/access-log", params={"audit_id": created["id"]})
    assert page.status_code == 200 and [e["action"] for e in page.json()["items"]] == [
        "export_forget_set",
        "read_facts",
    ]
    assert pipeline.get("/access-log").status_code == 403
    assert auditor.get("/access-log").status_code == 403


def test_a_revoked_subject_token_no_longer_authenticates(pg_env, api_factory):
    owner = api_factory("auditor")
    created = submit(owner)
    audit_id, token = created["id"], created["subject_token"]
    subject = api_factory(key=token)
    assert subject.get(f"/audits/{audit_id}").status_code == 200
    assert api_factory("auditor").delete(f"/audits/{audit_id}/subject-token").status_code == 404  # not theirs
    assert api_factory("regulator").delete(f"/audits/{audit_id}/subject-token").status_code == 403
    assert subject.delete(f"/audits/{audit_id}/subject-token").status_code == 403
    assert owner.delete(f"/audits/{audit_id}/subject-token").status_code == 204
    refused = subject.get(f"/audits/{audit_id}")
    assert refused.status_code == 401 and "revoked" in refused.json()["detail"][0]["message"]
    assert owner.delete(f"/audits/{audit_id}/subject-token").status_code == 204  # idempotent
    assert owner.get(f"/audits/{audit_id}").status_code == 200  # the audit itself is untouched


def test_retention_purges_old_audits_with_their_subjects(pg_env, api_factory):
    from app.queue import get_dispatcher
    from app.settings import get_settings
    from app.subjects.retention import purge

    api = api_factory("auditor")
    old, young = submit(api, 1), submit(api, 2)
    with session_scope() as s:
        s.execute(update(Audit).where(Audit.id.in_([old["id"], young["id"]])).values(status="succeeded"))
        s.execute(update(Audit).where(Audit.id == old["id"]).values(created_at=utcnow() - timedelta(days=40)))
    purged = purge(get_settings().model_copy(update={"retention_days": 30}), get_dispatcher())
    assert purged["subjects"] >= 1
    assert audit_row(old["id"]) is None and audit_row(young["id"]) is not None
    with session_scope() as s:
        assert s.get(Subject, old["subject_id"]) is None and s.get(Subject, young["subject_id"]) is not None
    assert purge(get_settings(), get_dispatcher()) == {"subjects": 0, "audits": 0}  # off by default


def test_erasure_can_vacuum_the_tables_it_touched(pg_env, api_factory, monkeypatch):
    from app.settings import get_settings

    monkeypatch.setenv("MEMAUDIT_ERASURE_VACUUM", "vacuum")
    get_settings.cache_clear()
    api = api_factory("auditor")
    created = submit(api, 3)

    def vacuums() -> int:
        with session_scope() as s:
            return s.scalar(text("SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'subjects'"))

    before = vacuums()
    assert api.delete(f"/subjects/{created['subject_id']}").status_code == 200
    assert vacuums() == before + 1
