"""Leases and the reconciler against real Postgres and Redis: one owner at a time, fenced writes, and every
audit the database says must run is held by the queue after one pass (and nothing is enqueued twice)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import update

from app.db.base import utcnow
from app.db.engine import session_scope
from app.db.models import Audit
from app.kinds import KINDS
from app.reliability import leases
from app.reliability.reconciler import reconcile_once
from tests.conftest import wait_for
from tests.support.faults import audit_row, subject_body

TINY = {"counterfactuals": 2, "paraphrases": 0, "similar_names": 1}


@pytest.fixture
def auditor(pg_env, api_factory, monkeypatch):
    monkeypatch.setenv("MEMAUDIT_RECONCILE_GRACE_SECONDS", "0")
    from app.settings import get_settings

    get_settings.cache_clear()
    return api_factory("auditor")  # no worker listens on this test's queue: the jobs stay where they are


def submit(api) -> str:
    r = api.post("/audits", json=subject_body(0, **TINY))
    assert r.status_code == 202, r.text
    return r.json()["id"]


def set_audit(audit_id: str, **values) -> None:
    with session_scope() as s:
        s.execute(update(Audit).where(Audit.id == audit_id).values(**values))


def queued_job_ids() -> list[str]:
    from app.queue import get_dispatcher

    return [job for queue in get_dispatcher().interactive for job in queue.get_job_ids()]  # every key's lane


def test_only_one_owner_holds_a_lease_until_it_expires(auditor):
    audit_id = submit(auditor)
    with session_scope() as s:
        assert leases.claim(s, audit_id, "worker-a", ttl=30)
    with session_scope() as s:
        assert not leases.claim(s, audit_id, "worker-b", ttl=30), "two workers ran one audit"
    set_audit(audit_id, lease_expires_at=utcnow() - timedelta(seconds=1))  # worker-a stopped renewing
    with session_scope() as s:
        assert leases.claim(s, audit_id, "worker-b", ttl=30)
    with session_scope() as s:
        assert not leases.renew(s, audit_id, "worker-a", ttl=30)
    assert audit_row(audit_id).attempts == 2 and audit_row(audit_id).lease_owner == "worker-b"


def test_a_run_that_lost_its_lease_cannot_write(auditor):
    audit_id = submit(auditor)
    with session_scope() as s:
        assert leases.claim(s, audit_id, "worker-a", ttl=30)
    set_audit(audit_id, lease_owner="worker-b")  # taken over while worker-a stalled
    errors: list[BaseException] = []

    def stalled_worker() -> None:
        leases.fence_commits(audit_id, "worker-a", 30)
        try:
            with session_scope() as s:
                s.execute(update(Audit).where(Audit.id == audit_id).values(progress_done=99))
        except leases.LeaseLost as exc:
            errors.append(exc)
        finally:
            leases.unfence_commits()

    thread = threading.Thread(target=stalled_worker)
    thread.start()
    thread.join()
    assert errors, "a write of a run without the lease was committed"
    assert audit_row(audit_id).progress_done == 0


def test_a_pass_enqueues_what_redis_lost_and_recovers_dead_workers(auditor):
    from app.queue import get_dispatcher, job_id
    from app.settings import get_settings

    dispatcher = get_dispatcher()
    lost, held, dead, alive = (submit(auditor) for _ in range(4))
    dispatcher.discard([lost, dead])  # Redis lost these jobs (restart without persistence)
    for audit_id, owner, expires in ((dead, "gone", -5), (alive, "busy", 30)):
        set_audit(
            audit_id,
            status="running",
            lease_owner=owner,
            attempts=1,
            lease_expires_at=utcnow() + timedelta(seconds=expires),
        )
    before = queued_job_ids()

    report = reconcile_once(get_settings(), dispatcher, KINDS)
    mine = {lost, held, dead, alive}  # earlier tests' leases (30 s) may expire meanwhile on a slow machine
    enqueued, recovered = ([a for a in ids if a in mine] for ids in (report.enqueued, report.recovered))
    assert enqueued == [lost] and recovered == [dead], report
    jobs = {job_id(a) for a in mine}
    after = [j for j in queued_job_ids() if j in jobs]
    expected = [*(j for j in before if j in jobs), job_id(lost), job_id(dead)]
    assert sorted(after) == sorted(expected), "enqueued twice or not at all"
    assert audit_row(dead).status == "queued" and audit_row(dead).lease_owner is None
    assert audit_row(alive).status == "running" and audit_row(held).status == "queued"
    again = reconcile_once(get_settings(), dispatcher, KINDS)
    assert not mine & {*again.enqueued, *again.recovered}, "a second pass enqueued again"


def test_an_audit_whose_follow_up_job_is_queued_is_not_missing(auditor):
    """A null's next chunk waits under the audit's second job id while the first id's record has ended: the
    reconciler must not enqueue the audit a second time (two chains of chunks)."""
    from rq import Queue
    from rq.serializers import JSONSerializer

    from app.queue import get_dispatcher, job_ids
    from app.settings import get_settings

    dispatcher = get_dispatcher()
    audit_id = submit(auditor)
    dispatcher.discard([audit_id])  # the first job has ended
    assert dispatcher.missing([audit_id]) == [audit_id]
    lane = Queue(dispatcher.lanes[0].name, connection=dispatcher.redis, serializer=JSONSerializer)
    lane.enqueue_many([dispatcher._data("workers.jobs.subject.run", audit_id, job_ids(audit_id)[1])])
    assert dispatcher.missing([audit_id]) == []
    assert audit_id not in reconcile_once(get_settings(), dispatcher, KINDS).enqueued
    dispatcher.cancel(audit_id)
    assert dispatcher.missing([audit_id]) == [audit_id], "cancel left the follow-up job queued"


def test_a_run_hands_its_audit_on_only_if_it_still_holds_it(auditor):
    from workers.jobs.common import _run_again

    audit_id = submit(auditor)
    with session_scope() as s:
        assert leases.claim(s, audit_id, "worker-b", ttl=30)  # taken over (or cancelled) while worker-a ran
    _run_again(audit_id, "worker-a", attempts=Audit.attempts - 1)
    row = audit_row(audit_id)
    assert (row.status, row.lease_owner, row.attempts) == ("running", "worker-b", 1), "a run it lost was handed on"
    _run_again(audit_id, "worker-b", attempts=Audit.attempts - 1)
    row = audit_row(audit_id)
    assert (row.status, row.lease_owner, row.attempts) == ("queued", None, 0), "a chunk counted as an attempt"


def test_an_audit_whose_worker_keeps_dying_is_failed_after_max_attempts(auditor):
    from app.queue import get_dispatcher
    from app.settings import get_settings

    audit_id = submit(auditor)
    attempts = get_settings().max_attempts
    set_audit(
        audit_id,
        status="running",
        lease_owner="gone",
        attempts=attempts,
        lease_expires_at=utcnow() - timedelta(seconds=1),
    )
    report = reconcile_once(get_settings(), get_dispatcher(), KINDS)
    assert report.given_up == [audit_id]
    final = audit_row(audit_id)
    assert final.status == "failed" and f"stopped {attempts} times" in final.error, final.error


def test_embedded_mode_reconciles_in_process(sqlite_env, api_factory):
    from app.queue import EmbeddedDispatcher
    from app.settings import get_settings

    api = api_factory("auditor")
    dispatcher = EmbeddedDispatcher()  # a fresh runner: it holds nothing, like one after a restart
    audit_id = submit(api)
    # the API's own runner (idle in this test's fresh process state) runs it first; then its process "dies" mid-run
    assert wait_for(api, audit_id, timeout=120)["status"] == "succeeded"
    set_audit(audit_id, status="running", lease_owner="dead-process", lease_expires_at=utcnow() - timedelta(1))
    report = reconcile_once(get_settings().model_copy(update={"reconcile_grace_seconds": 0}), dispatcher, KINDS)
    assert report.recovered == [audit_id]
    assert dispatcher.missing([audit_id]) == [] or audit_row(audit_id).status != "queued"
    dispatcher.join()
    done = wait_for(api, audit_id, timeout=120)
    assert done["status"] == "succeeded", done["error"]
    assert audit_row(audit_id).lease_owner is None, "the recovered run did not end its lease"
