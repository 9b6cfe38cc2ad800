"""The job lifecycle (workers/jobs/common.py) with real Postgres: a cancelled job stops within seconds even
where it reports no progress, a job that lost its lease writes nothing, and a finished run releases its lease."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import update

from app.db.engine import session_scope
from app.db.models import Audit
from app.subjects.schemas import SubjectAuditOptions
from tests.support.faults import audit_row, subject_body
from workers.jobs.common import JobContext, run_audit_job

TINY = {"counterfactuals": 2, "paraphrases": 0, "similar_names": 1}


@pytest.fixture
def auditor(pg_env, api_factory, monkeypatch):
    from app.settings import get_settings

    for key, value in {"HEARTBEAT_SECONDS": "0.2", "CANCEL_GRACE_SECONDS": "1", "LEASE_TTL_SECONDS": "5"}.items():
        monkeypatch.setenv(f"MEMAUDIT_{key}", value)
    get_settings.cache_clear()
    return api_factory("auditor")


def submit(api) -> str:
    r = api.post("/audits", json=subject_body(0, **TINY))
    assert r.status_code == 202, r.text
    return r.json()["id"]


def start(audit_id: str, body) -> threading.Thread:
    thread = threading.Thread(target=run_audit_job, args=(audit_id, "subject", SubjectAuditOptions, body), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while audit_row(audit_id).status == "queued" and time.monotonic() < deadline:
        time.sleep(0.05)
    return thread


def test_a_cancelled_job_that_reports_nothing_is_interrupted(auditor):
    audit_id = submit(auditor)
    progressed = threading.Event()

    def stuck(ctx: JobContext) -> dict:  # a model load or an engine call: no progress for minutes
        progressed.set()
        while True:
            sum(range(1000))

    thread = start(audit_id, stuck)
    assert progressed.wait(30)
    assert auditor.delete(f"/audits/{audit_id}").status_code == 200
    cancelled = time.monotonic()
    thread.join(timeout=30)
    took = time.monotonic() - cancelled
    assert not thread.is_alive(), "the job kept running after its audit was cancelled"
    assert took < 10, f"stopped {took:.1f} s after the cancellation (heartbeat 0.2 s + grace 1 s expected)"
    assert audit_row(audit_id).status == "cancelled"


def test_a_cancelled_job_stops_at_its_next_progress_report(auditor):
    audit_id = submit(auditor)
    reports = []

    def busy(ctx: JobContext) -> dict:
        for i in range(10_000):
            ctx.progress(i, 10_000)
            reports.append(i)
            time.sleep(0.01)
        return {}

    thread = start(audit_id, busy)
    time.sleep(0.5)
    auditor.delete(f"/audits/{audit_id}")
    thread.join(timeout=30)
    assert not thread.is_alive() and len(reports) < 10_000
    assert audit_row(audit_id).status == "cancelled"


def test_a_job_that_lost_its_lease_writes_nothing_and_does_not_finish(auditor):
    audit_id = submit(auditor)
    taken_over = threading.Event()

    def slow(ctx: JobContext) -> dict:
        assert taken_over.wait(30)
        with session_scope() as s:  # a late write of the stalled run: must not land
            s.execute(update(Audit).where(Audit.id == audit_id).values(summary={"stale": True}))
        return {"done": True}

    thread = start(audit_id, slow)
    with session_scope() as s:  # another worker took the audit over after this run's lease expired
        s.execute(update(Audit).where(Audit.id == audit_id).values(lease_owner="another-worker"))
    taken_over.set()
    thread.join(timeout=30)
    final = audit_row(audit_id)
    assert final.summary is None and final.status == "running" and final.lease_owner == "another-worker"


def test_a_finished_run_releases_its_lease(auditor):
    audit_id = submit(auditor)
    thread = start(audit_id, lambda ctx: {"ok": True})
    thread.join(timeout=30)
    final = audit_row(audit_id)
    assert (final.status, final.summary, final.lease_owner, final.attempts) == ("succeeded", {"ok": True}, None, 1)
