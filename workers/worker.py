"""`memaudit worker`: an RQ worker that runs jobs in its own process (SimpleWorker), so models loaded for
one job stay in memory for the next. Before taking jobs it re-enqueues audits that are queued in the
database but missing from Redis (e.g. Redis was down when they were submitted): nothing is lost."""

from __future__ import annotations

import logging

import torch
from redis import Redis
from rq import Queue, SimpleWorker
from rq.job import Job
from rq.serializers import JSONSerializer

from app.audits.repository import queued_or_running
from app.db.engine import session_scope
from app.db.models.audit import AuditStatus
from app.kinds import KINDS
from app.queue import get_dispatcher, job_id
from app.settings import get_settings
from workers.lm.registry import get_scorer

log = logging.getLogger("memaudit.worker")


def requeue_orphans() -> int:
    dispatcher = get_dispatcher()
    with session_scope() as s:
        pending = [(a.kind, a.id, a.status) for a in queued_or_running(s)]
    sent = 0
    for kind, audit_id, status in pending:
        orphan = status == AuditStatus.QUEUED and not Job.exists(job_id(audit_id), connection=dispatcher.redis)
        if orphan and kind in KINDS:
            dispatcher.send(KINDS[kind].job, audit_id)
            sent += 1
    if sent:
        log.info("re-enqueued %d queued audits that Redis did not hold", sent)
    return sent


def run_worker(*, burst: bool = False, preload: list[str] | None = None) -> int:
    settings = get_settings()
    if not settings.redis_url:
        raise SystemExit("MEMAUDIT_REDIS_URL is not set: without Redis, `memaudit serve` runs jobs in-process")
    if settings.torch_threads:
        torch.set_num_threads(settings.torch_threads)
    for name in preload or []:
        log.info("preloading model %s", name)
        get_scorer(name)
    requeue_orphans()
    redis = Redis.from_url(settings.redis_url)
    queue = Queue(settings.queue_name, connection=redis, serializer=JSONSerializer)
    worker = SimpleWorker([queue], connection=redis, serializer=JSONSerializer)
    worker.work(burst=burst, logging_level="INFO", with_scheduler=True)
    return 0
