"""Batch audits on their batch lane, against real Postgres and Redis (no worker): enqueued in bulk after the commit,
put back on the batch queue by the reconciler when Redis lost them, and a job that holds ids only."""

from __future__ import annotations

import json

import pytest
from redis import Redis
from rq import Queue
from rq.serializers import JSONSerializer

from app.kinds import KINDS
from app.queue import get_dispatcher, is_batch_queue, job_id, queue_names
from app.reliability.reconciler import reconcile_once
from app.settings import get_settings

PEOPLE = [{"name": f"Queue Person {i}", "P106": "physicist"} for i in range(3)]


@pytest.fixture
def api(pg_env, api_factory, monkeypatch):
    monkeypatch.setenv("MEMAUDIT_RECONCILE_GRACE_SECONDS", "0")
    monkeypatch.setenv("MEMAUDIT_RECONCILE_BATCH_GRACE_SECONDS", "0")
    get_settings.cache_clear()
    return api_factory("auditor")  # no worker listens on this test's queues: the jobs stay where they are


def queued_ids(known: set[str] | None = None) -> tuple[list[str], list[str]]:
    """(every interactive lane, every batch lane) job ids; the batch jobs must all sit on one lane, the batch's
    key's, and the single audits of one key on one interactive lane. ``known``: only these jobs count (the nulls
    the submissions created, and what the reconciler enqueues for other tests' audits in the shared database, wait
    on lanes of their own)."""
    redis = Redis.from_url(get_settings().redis_url)
    queues = [Queue(n, connection=redis, serializer=JSONSerializer) for n in queue_names(get_settings())]
    interactive = [q for q in queues if not is_batch_queue(q.name)]
    lanes = [q for q in queues if is_batch_queue(q.name)]

    def mine(q: Queue) -> list[str]:
        return [j for j in q.job_ids if known is None or j in known]

    used = [mine(q) for q in lanes if mine(q)]
    assert len(used) <= 1, "one batch, one lane"
    singles = [mine(q) for q in interactive if mine(q)]
    assert len(singles) <= 1, "one key, one interactive lane"
    return singles[0] if singles else [], used[0] if used else []


def test_batch_audits_go_to_the_batch_queue_and_come_back_there(api):
    created = api.post("/batches", json={"model": "groundtruth-tiny", "people": PEOPLE}).json()
    ids = [a["id"] for a in api.get(f"/batches/{created['id']}/audits").json()["items"]]
    single = api.post(
        "/audits",
        json={
            "kind": "subject",
            "model": "groundtruth-tiny",
            "subject": {"name": "Queue Single", "facts": [{"property": "P106", "value": "chemist"}]},
        },
    ).json()["id"]
    known = {job_id(a) for a in [*ids, single]}
    interactive, batch = queued_ids(known)
    assert interactive == [job_id(single)] and sorted(batch) == sorted(job_id(a) for a in ids)
    redis = Redis.from_url(get_settings().redis_url)
    for a in ids:  # jobs carry the audit id and nothing else (no name, no fact)
        raw = json.dumps([v.decode(errors="replace") for v in redis.hgetall(f"rq:job:{job_id(a)}").values()])
        assert "Queue Person" not in raw and "physicist" not in raw

    assert get_dispatcher().discard(ids) == 3  # Redis lost them (restart without persistence)
    report = reconcile_once(get_settings(), get_dispatcher(), KINDS)
    assert set(ids) <= set(report.enqueued)
    interactive, batch = queued_ids(known)
    assert interactive == [job_id(single)] and sorted(batch) == sorted(job_id(a) for a in ids)


def test_the_services_own_nulls_wait_behind_single_audits_and_come_back_there(api):
    """A null the service triggers (reading a subject audit's facts) is background work: on a batch lane, never
    ahead of someone's audit on the interactive queue; the reconciler puts it back there too."""
    from app.db.engine import session_scope
    from app.nulls.service import trigger
    from app.subjects.schemas import SubjectAuditOptions

    with session_scope() as s:
        null_id = trigger(
            s, "groundtruth-tiny", SubjectAuditOptions().model_dump(), "same_origin", ["P106"], get_settings()
        )
    interactive, batch = queued_ids()
    assert job_id(null_id) not in interactive and batch == [job_id(null_id)]
    assert get_dispatcher().discard([null_id]) == 1
    assert null_id in reconcile_once(get_settings(), get_dispatcher(), KINDS).enqueued
    interactive, batch = queued_ids()
    assert job_id(null_id) not in interactive and batch == [job_id(null_id)]
