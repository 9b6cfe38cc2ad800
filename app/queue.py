"""Job dispatch: RQ on Redis in production, an in-process worker thread when no Redis URL is set.

Jobs are enqueued by dotted path with the audit id only (never personal data), and only after the
transaction that created the audit has committed: a rolled-back request enqueues nothing. The database is the
record of what must run: if the queue cannot take a job (Redis down, or lost without persistence), the audit
stays `queued` in the database and the reconciler (app/reliability/reconciler.py) enqueues it again.

Fair scheduling: audits of a batch (app/batches) go to one of ``batch_lanes`` low-priority queues,
``<queue_name>-batch-<lane>``, the lane of the API key that owns the batch (key id modulo the lanes). Every worker
listens to the interactive queue first, then to the lanes in turn (``queue_names``; workers/worker.py rotates the
lanes after each job): a single audit submitted while a 100,000-person batch runs waits for at most one batch
audit per worker, never for the batch, and the batches of keys on different lanes share the workers job by job.
Single audits take turns across keys the same way: the interactive queue is ``interactive_lanes`` queues,
``<queue_name>`` and ``<queue_name>-key-<lane>``, an audit on the lane of the API key that submitted it (key id
modulo the lanes), and workers serve them in turn (rotated past the lane just served), always before the batch
lanes: a key that queued 70 audits holds up another key's single audit by at most one of its own per worker.
The embedded runner (one process, one user) serves single audits first, then batch audits, in the order sent.
Background work (nulls)
waits on a lane too, as small jobs: a null scores a few people per job and then sends its next job to the tail of
its lane (``follow_up``), so a single audit waits for at most one such chunk, and no job ever stops for another.

A job that must wait for other audits (a verification for its nulls) parks its next job (``park``): RQ keeps it
`deferred`, the embedded runner holds it aside, and neither runs it until the audits it waits for have ended and
their last job wakes it (``wake``; app/reliability/waits.py says who waits for whom). Nothing sleeps and re-queues.
"""

from __future__ import annotations

import atexit
import importlib
import itertools
import logging
import queue as stdlib_queue
import threading
from collections.abc import Callable
from datetime import timedelta
from functools import lru_cache
from typing import Protocol

from redis import Redis
from redis.backoff import NoBackoff
from redis.retry import Retry as RedisRetry
from rq import Queue, get_current_job
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus
from rq.serializers import JSONSerializer
from rq.utils import utcparse
from sqlalchemy import event
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.settings import Settings, get_settings

log = logging.getLogger("memaudit.queue")
PENDING = "memaudit_pending_jobs"
FORGET = "memaudit_forget_jobs"
BATCH_QUEUE_SUFFIX = "-batch-"
SHUTDOWN_WAIT_SECONDS = 30.0  # at exit, how long the embedded runner waits for its job to stop
INTERACTIVE_QUEUE_SUFFIX = "-key-"


def interactive_queue_names(settings: Settings) -> list[str]:
    """The interactive lanes: ``<queue_name>`` (lane 0), then ``<queue_name>-key-<lane>``."""
    return [
        settings.queue_name,
        *(f"{settings.queue_name}{INTERACTIVE_QUEUE_SUFFIX}{i}" for i in range(1, settings.interactive_lanes)),
    ]


def queue_names(settings: Settings) -> list[str]:
    """The RQ queues a worker serves: the interactive lanes first, then the batch lanes (each group rotated by the
    worker)."""
    return [
        *interactive_queue_names(settings),
        *(f"{settings.queue_name}{BATCH_QUEUE_SUFFIX}{i}" for i in range(settings.batch_lanes)),
    ]


def is_batch_queue(name: str) -> bool:
    return BATCH_QUEUE_SUFFIX in name


def interactive_lane(settings: Settings, owner_key_id: int | None) -> int:
    """The interactive queue of an API key's single audits: consecutive keys get different lanes."""
    return (owner_key_id or 0) % settings.interactive_lanes


def batch_lane(settings: Settings, owner_key_id: int | None) -> int:
    """The batch queue of an API key's batches: consecutive keys get different lanes."""
    return (owner_key_id or 0) % settings.batch_lanes


class Dispatcher(Protocol):
    def send(self, job_path: str, audit_id: str, *, lane: int | None = None, key: int | None = None) -> None:
        """Enqueue one job: with ``lane`` on that batch queue, else on the interactive lane of API key ``key``."""
        ...

    def send_many(
        self, job_path: str, audit_ids: list[str], *, lane: int | None = None, key: int | None = None
    ) -> None: ...
    def cancel(self, audit_id: str) -> None: ...
    def missing(self, audit_ids: list[str]) -> list[str]:
        """Those of ``audit_ids`` that no job will run (never enqueued, lost, or ended)."""
        ...

    def discard(self, audit_ids: list[str]) -> int:
        """Delete the job records of these audits (erasure; a dead worker's job); returns how many existed."""
        ...

    def follow_up(self, audit_id: str) -> None:
        """Called by the running job of this audit, which has handed it back to `queued`: run the audit's job
        again, at the tail of the queue that job came from (a null's next chunk; a run that timed out)."""
        ...

    def forget(self, audit_ids: list[str]) -> int:
        """Delete the queued job records of audits that will never run (a cancelled batch's), in bulk; returns
        how many existed."""
        ...

    def park(self, audit_id: str) -> None:
        """Called by the running job of this audit, which has handed it back to `queued` to wait for other audits:
        keep its next job (the same path, on the queue that job came from) without running it until ``wake``."""
        ...

    def wake(self, audit_ids: list[str]) -> None:
        """Run the parked next jobs of these audits, at the tail of their queues (an audit with none: nothing)."""
        ...


def import_path(path: str) -> Callable[[str], None]:
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def job_id(audit_id: str) -> str:
    return f"audit-{audit_id}"


def job_ids(audit_id: str) -> tuple[str, str]:
    """An audit's two RQ job ids: a follow-up job takes the one its running job does not hold (RQ writes the
    running job's record when it returns, which would overwrite a follow-up enqueued under the same id)."""
    return job_id(audit_id), f"{job_id(audit_id)}-next"


class RQDispatcher:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        # Fail fast (one immediate retry for a connection dropped by a Redis restart): a request must not hang
        # on a dead Redis; what is not enqueued now is enqueued by the reconciler.
        timeout = settings.redis_timeout_seconds
        self.redis = Redis.from_url(
            settings.redis_url, socket_connect_timeout=timeout, socket_timeout=timeout, retry=RedisRetry(NoBackoff(), 1)
        )
        self.interactive = [
            Queue(name, connection=self.redis, serializer=JSONSerializer) for name in interactive_queue_names(settings)
        ]
        self.lanes = [
            Queue(name, connection=self.redis, serializer=JSONSerializer)
            for name in queue_names(settings)[len(self.interactive) :]
        ]

    def _data(self, job_path: str, audit_id: str, rq_id: str | None = None):  # rq's EnqueueData
        # No RQ retry: a job never raises (workers/jobs/common.py records every failure), and a run that dies or
        # times out is run again by the one retry policy, ``max_attempts`` (app/reliability/reconciler.py).
        s = self.settings
        return Queue.prepare_data(
            job_path,
            args=(audit_id,),
            job_id=rq_id or job_id(audit_id),
            timeout=s.job_timeout_seconds,
            result_ttl=s.job_result_ttl_seconds,
            failure_ttl=s.job_result_ttl_seconds,
            description=f"{job_path}({audit_id})",
        )

    def send(self, job_path: str, audit_id: str, *, lane: int | None = None, key: int | None = None) -> None:
        self.send_many(job_path, [audit_id], lane=lane, key=key)
        log.info("enqueued %s for audit %s", job_path, audit_id)

    def send_many(
        self, job_path: str, audit_ids: list[str], *, lane: int | None = None, key: int | None = None
    ) -> None:
        """One pipelined round trip per 1,000 jobs (a batch's 100,000 are enqueued in seconds)."""
        if lane is None:
            queue = self.interactive[interactive_lane(self.settings, key)]
        else:
            queue = self.lanes[lane % len(self.lanes)]
        for i in range(0, len(audit_ids), 1000):
            queue.enqueue_many([self._data(job_path, a) for a in audit_ids[i : i + 1000]])

    def _next_of(self, audit_id: str) -> tuple[Queue, str, str] | None:
        """(the queue the running job of this audit came from, its path, the id its next job takes), or None
        outside this audit's RQ job."""
        current = get_current_job()
        if current is None or current.id not in job_ids(audit_id):
            log.warning("audit %s: no running job to follow; the reconciler enqueues it", audit_id)
            return None
        first, second = job_ids(audit_id)
        queue = Queue(current.origin, connection=self.redis, serializer=JSONSerializer)
        return queue, current.func_name, second if current.id == first else first

    def follow_up(self, audit_id: str) -> None:
        found = self._next_of(audit_id)
        if found is not None:
            queue, path, rq_id = found
            queue.enqueue_many([self._data(path, audit_id, rq_id)])

    def park(self, audit_id: str) -> None:
        found = self._next_of(audit_id)
        if found is None:
            return
        queue, path, rq_id = found
        s = self.settings
        job = queue.create_job(
            path,
            args=(audit_id,),
            job_id=rq_id,
            timeout=s.job_timeout_seconds,
            result_ttl=s.job_result_ttl_seconds,
            failure_ttl=s.job_result_ttl_seconds,
            description=f"{path}({audit_id})",
            status=JobStatus.DEFERRED,  # kept, not queued: `missing` counts it as a job that will run
        )
        job.save()

    def wake(self, audit_ids: list[str]) -> None:
        for audit_id in audit_ids:
            for job in Job.fetch_many(list(job_ids(audit_id)), connection=self.redis, serializer=JSONSerializer):
                if job is not None and job.get_status() == JobStatus.DEFERRED:  # the parked job, sent as it is
                    queue = Queue(job.origin, connection=self.redis, serializer=JSONSerializer)
                    queue.enqueue_many([self._data(job.func_name, audit_id, job.id)])

    def cancel(self, audit_id: str) -> None:
        for rq_id in job_ids(audit_id):
            try:
                job = Job.fetch(rq_id, connection=self.redis, serializer=JSONSerializer)
            except NoSuchJobError:
                continue
            if job.get_status() in ("queued", "deferred", "scheduled"):
                job.cancel()
        # A running job's heartbeat sees the audit's `cancelled` status and stops the job.

    def missing(self, audit_ids: list[str]) -> list[str]:
        # Two fields of each job hash, pipelined: every worker's reconciler asks this of every queued audit every
        # pass, and loading whole jobs made one pass over a 100,000-audit batch take 18 s (benchmarks/cohort.py).
        with self.redis.pipeline(transaction=False) as pipe:
            for audit_id in audit_ids:
                for rq_id in job_ids(audit_id):
                    pipe.hmget(Job.key_for(rq_id), "status", "started_at")
            rows = pipe.execute()
        # A job `started` long ago for an audit still queued lost its worker before the worker claimed it.
        stale = utcnow() - timedelta(seconds=self.settings.lease_ttl_seconds)

        def will_run(status: bytes | None, started: bytes | None) -> bool:
            if status in (b"queued", b"deferred", b"scheduled"):
                return True
            started_at = utcparse(started.decode()) if started else None
            return status == b"started" and (started_at is None or started_at.replace(tzinfo=stale.tzinfo) > stale)

        return [a for i, a in enumerate(audit_ids) if not (will_run(*rows[2 * i]) or will_run(*rows[2 * i + 1]))]

    def forget(self, audit_ids: list[str]) -> int:
        """The job hashes only, 2,000 deletions a round trip (a cancelled 100,000-person batch: seconds). Their ids
        stay in the lane's list until a worker pops them, which RQ skips when the job's hash is gone; removing
        each from the list (``Job.delete``) would scan the list once per job."""
        keys = [Job.key_for(rq_id) for a in audit_ids for rq_id in job_ids(a)]
        deleted = 0
        for i in range(0, len(keys), 2000):
            with self.redis.pipeline(transaction=False) as pipe:
                for key in keys[i : i + 2000]:
                    pipe.delete(key)
                deleted += sum(pipe.execute())
        return deleted

    def discard(self, audit_ids: list[str]) -> int:
        ids = [rq_id for a in audit_ids for rq_id in job_ids(a)]
        jobs = Job.fetch_many(ids, connection=self.redis, serializer=JSONSerializer)
        for job in jobs:
            if job is not None:
                job.delete()
        return sum(job is not None for job in jobs)


class EmbeddedDispatcher:
    """One daemon thread runs queued jobs in this process (models stay loaded): single audits in the order sent,
    then batch audits (the same order as the RQ workers' queues). One process serves one user's dashboard and
    command line here: there are no keys to take turns between."""

    def __init__(self) -> None:
        self._jobs: stdlib_queue.PriorityQueue[tuple[int, int, str, str]] = stdlib_queue.PriorityQueue()
        self._sent = itertools.count()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._held: set[str] = set()  # audits sent and not yet finished in this process
        self._again: set[str] = set()  # running audits with a follow-up: sent again when their job returns
        self._parking: set[str] = set()  # running audits that park their next job when it returns
        self._parked: dict[str, tuple[int, str]] = {}  # audit -> (lane flag, job path) of its parked next job
        self._closed = False  # shut down (the process exits)
        self._idle = threading.Event()  # set while the thread runs no job
        self._idle.set()

    def send(self, job_path: str, audit_id: str, *, lane: int | None = None, key: int | None = None) -> None:
        self._ensure_thread()
        with self._lock:
            if audit_id in self._held:
                return
            self._held.add(audit_id)
        self._jobs.put((int(lane is not None), next(self._sent), job_path, audit_id))

    def send_many(
        self, job_path: str, audit_ids: list[str], *, lane: int | None = None, key: int | None = None
    ) -> None:
        for audit_id in audit_ids:
            self.send(job_path, audit_id, lane=lane)

    def cancel(self, audit_id: str) -> None:
        """Nothing to do: the job checks the audit row before and while it runs."""

    def missing(self, audit_ids: list[str]) -> list[str]:
        with self._lock:
            return [a for a in audit_ids if a not in self._held]

    def discard(self, audit_ids: list[str]) -> int:
        return 0  # nothing is recorded outside the database

    def forget(self, audit_ids: list[str]) -> int:
        return 0  # a cancelled audit's job ends at once when the runner takes it: nothing is kept elsewhere

    def follow_up(self, audit_id: str) -> None:
        with self._lock:
            self._again.add(audit_id)  # put back by _loop when the running job returns (it is still held)

    def park(self, audit_id: str) -> None:
        with self._lock:
            self._parking.add(audit_id)  # set aside by _loop when the running job returns (it stays held)

    def wake(self, audit_ids: list[str]) -> None:
        with self._lock:
            for audit_id in audit_ids:
                if audit_id in self._parking:  # its job has not returned yet: run it again when it does
                    self._parking.discard(audit_id)
                    self._again.add(audit_id)
                elif audit_id in self._parked:
                    lane_flag, job_path = self._parked.pop(audit_id)
                    self._jobs.put((lane_flag, next(self._sent), job_path, audit_id))

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="memaudit-embedded-worker", daemon=True)
                self._thread.start()
                atexit.register(self.shutdown)  # once per thread started (a closed runner's is not called)

    def shutdown(self) -> None:
        """The process exits (the thread is a daemon: its job stops with it): the audit it runs goes back to
        `queued`, not counted as an attempt, so no audit is left `running` until its lease expires (a null resumes
        from its stored chunks in the next process that runs it: `memaudit serve`, a worker, the next command)."""
        from app.db.engine import session_scope
        from app.reliability.leases import hand_back_process

        self._closed = True  # the thread takes no further job while the interpreter shuts down
        try:
            with session_scope() as s:
                held = hand_back_process(s)
        except Exception as exc:  # the database is gone: the lease expires and the reconciler recovers it
            log.warning("embedded runner: could not hand its audits back at exit (%s)", type(exc).__name__)
            return
        for audit_id in held:
            log.info("embedded runner: audit %s goes back to the queue as this process exits", audit_id)
        # Its lease gone, the running job stops at its next progress report (the heartbeat sees the lease lost).
        # Wait for that: a daemon thread still inside torch when the interpreter exits aborts the process.
        if not self._idle.wait(SHUTDOWN_WAIT_SECONDS):
            log.warning("embedded runner: its job did not stop within %.0f s of the exit", SHUTDOWN_WAIT_SECONDS)

    def _loop(self) -> None:
        while True:
            lane_flag, _, job_path, audit_id = self._jobs.get()
            if self._closed:
                return
            self._idle.clear()
            try:
                import_path(job_path)(audit_id)
            except Exception:  # the job records its own failure; never let the thread die
                log.exception("embedded job %s failed for audit %s", job_path, audit_id)
            finally:
                self._returned(lane_flag, job_path, audit_id)
                self._jobs.task_done()
                self._idle.set()

    def _returned(self, lane_flag: int, job_path: str, audit_id: str) -> None:
        """The audit's job returned: send its follow-up, set its parked job aside, or let the audit go."""
        with self._lock:
            if audit_id in self._again:  # at the tail of its lane: behind what was sent meanwhile
                self._again.discard(audit_id)
                self._jobs.put((lane_flag, next(self._sent), job_path, audit_id))
            elif audit_id in self._parking:  # still held (not missing): woken by what it waits for
                self._parking.discard(audit_id)
                self._parked[audit_id] = (lane_flag, job_path)
            else:
                self._held.discard(audit_id)

    def join(self) -> None:
        """Wait until every job sent so far has finished (CLI and tests)."""
        self._jobs.join()


@lru_cache
def _dispatcher_for(redis_url: str | None) -> Dispatcher:
    return RQDispatcher(get_settings()) if redis_url else EmbeddedDispatcher()


def get_dispatcher() -> Dispatcher:
    return _dispatcher_for(get_settings().redis_url)


def enqueue_after_commit(
    session: Session, job_path: str, audit_id: str, *, lane: int | None = None, key: int | None = None
) -> None:
    """One audit, sent after the commit: with ``lane`` to that batch queue, else to the interactive lane of API
    key ``key`` (the audit's owner)."""
    session.info.setdefault(PENDING, []).append((job_path, [audit_id], lane, key))


def forget_after_commit(session: Session, audit_ids: list[str]) -> None:
    """Audits cancelled before they ran: their job records are deleted once the cancellation is committed."""
    session.info.setdefault(FORGET, []).extend(audit_ids)


def enqueue_many_after_commit(session: Session, job_path: str, audit_ids: list[str], *, lane: int) -> None:
    """A batch's audits: sent in bulk after the commit, to batch queue ``lane``."""
    session.info.setdefault(PENDING, []).append((job_path, list(audit_ids), lane, None))


@event.listens_for(Session, "after_commit")
def _send_pending(session: Session) -> None:
    pending = session.info.pop(PENDING, [])
    for job_path, audit_ids, lane, key in pending:
        try:
            if len(audit_ids) == 1:
                get_dispatcher().send(job_path, audit_ids[0], lane=lane, key=key)
            else:
                get_dispatcher().send_many(job_path, audit_ids, lane=lane, key=key)
        except Exception as exc:  # the audits are committed: queued durably, the reconciler enqueues them
            log.warning(
                "%d audits (first %s) are stored but not enqueued (%s); the reconciler will enqueue them",
                len(audit_ids),
                audit_ids[0],
                type(exc).__name__,
            )


@event.listens_for(Session, "after_commit")
def _forget_cancelled(session: Session) -> None:
    forget = session.info.pop(FORGET, [])
    if not forget:
        return
    try:
        get_dispatcher().forget(forget)
    except Exception as exc:  # the audits are cancelled: a job that is left ends at once when a worker takes it
        log.warning("%d cancelled audits' job records are left in the queue (%s)", len(forget), type(exc).__name__)


@event.listens_for(Session, "after_soft_rollback")
def _drop_pending(session: Session, _previous_transaction: object) -> None:
    session.info.pop(PENDING, None)
    session.info.pop(FORGET, None)
