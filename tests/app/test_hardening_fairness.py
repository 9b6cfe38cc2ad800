"""Fair turns across keys on the interactive queue (issue 24, item 5): single audits wait on their key's
interactive lane and workers serve the lanes in turn, as they serve the batch lanes. The probe: key A queued 70
audits, key B's single audit submitted next finished after 69 of A's 70 (352.6 s). A real `memaudit worker`
process on the test Redis and Postgres, the ground-truth model."""

from __future__ import annotations

import time

from sqlalchemy import func, select

from app.db.engine import session_scope
from app.db.models import Audit
from app.settings import get_settings
from tests.conftest import wait_for
from tests.support.faults import subject_body

TINY = {"counterfactuals": 2, "paraphrases": 0, "similar_names": 1}
QUEUED_BY_A = 70


def test_another_keys_single_audit_finishes_before_the_tenth_of_seventy(rq_worker_later, api_factory, monkeypatch):
    monkeypatch.setenv("MEMAUDIT_SUBMIT_RATE_PER_MINUTE", "0")  # 70 submissions in a row: not the limit under test
    get_settings.cache_clear()
    a, b = api_factory("auditor"), api_factory("auditor")  # consecutive keys: different interactive lanes
    a_ids = []
    for i in range(QUEUED_BY_A):
        r = a.post("/audits", json=subject_body(i % 2, **TINY))
        assert r.status_code == 202, r.text
        a_ids.append(r.json()["id"])
    r = b.post("/audits", json=subject_body(2, **TINY))
    assert r.status_code == 202, r.text
    single = r.json()["id"]
    started = time.monotonic()
    rq_worker_later()  # after every submission: the order is the queues', not the POSTs' speed
    assert wait_for(b, single, timeout=300)["status"] == "succeeded"
    took = time.monotonic() - started
    with session_scope() as s:
        b_done = s.scalar(select(Audit.finished_at).where(Audit.id == single))
        a_before = s.scalar(
            select(func.count()).where(Audit.id.in_(a_ids), Audit.status == "succeeded", Audit.finished_at < b_done)
        )
    print(
        f"\nkey A queued {QUEUED_BY_A}; key B's single audit succeeded {took:.1f} s after the worker started,"
        f" after {a_before} of A's"
    )
    assert a_before < 10, f"{a_before} of key A's audits finished before key B's single one"


def test_a_cancelled_batch_leaves_no_job_records_in_redis(pg_env, api_factory, monkeypatch):
    """The probe: a cancelled 100,000-person batch left ~100,000 RQ job hashes in Redis. Now the cancellation
    deletes the job records of the audits it cancelled (no worker runs here: every job is still queued)."""
    from redis import Redis
    from rq.job import Job

    from app.queue import job_ids

    monkeypatch.setenv("MEMAUDIT_SUBMIT_RATE_PER_MINUTE", "0")
    get_settings.cache_clear()
    api = api_factory("auditor")
    people = [{"name": f"Cancel Person {i}", "facts": [{"property": "P106", "value": "chemist"}]} for i in range(150)]
    created = api.post("/batches", json={"model": "groundtruth-tiny", "people": people})
    assert created.status_code == 202, created.text
    batch_id = created.json()["id"]
    ids = [a["id"] for a in api.get(f"/batches/{batch_id}/audits", params={"page_size": 200}).json()["items"]]
    assert len(ids) == 150
    redis = Redis.from_url(get_settings().redis_url)

    def records() -> int:
        return sum(redis.exists(Job.key_for(rq_id)) for a in ids for rq_id in job_ids(a))

    assert records() == 150
    assert api.delete(f"/batches/{batch_id}").status_code == 200
    assert records() == 0
