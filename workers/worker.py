"""`memaudit worker`: an RQ worker that runs jobs in its own process (SimpleWorker), so models loaded for
one job stay in memory for the next. Beside it runs the reconciler (app/reliability/reconciler.py): audits
queued in the database but missing from Redis are enqueued, and audits whose worker died are run again.
If Redis goes away the worker waits for it and carries on; nothing is lost, the database being the record."""

from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Any

import torch
from redis import Redis
from redis.exceptions import RedisError
from rq import Queue, SimpleWorker
from rq.exceptions import StopRequested
from rq.serializers import JSONSerializer
from rq.timeouts import JobTimeoutException, UnixSignalDeathPenalty

from app.kinds import KINDS
from app.queue import get_dispatcher, is_batch_queue, queue_names
from app.reliability.reconciler import Reconciler, reconcile_once
from app.settings import Settings, get_settings
from workers.jobs.common import JobTimedOut
from workers.lm.registry import get_scorer

log = logging.getLogger("memaudit.worker")
MAX_BACKOFF = 30.0


def run_worker(*, burst: bool = False, preload: list[str] | None = None) -> int:
    settings = get_settings()
    if not settings.redis_url:
        raise SystemExit("MEMAUDIT_REDIS_URL is not set: without Redis, `memaudit serve` runs jobs in-process")
    if settings.torch_threads:
        torch.set_num_threads(settings.torch_threads)
    for name in preload or []:
        log.info("preloading model %s", name)
        get_scorer(name)
    if burst:
        return _burst(settings)
    reconciler = Reconciler(settings, get_dispatcher(), KINDS).start()
    try:
        return _work_forever()
    finally:
        reconciler.stop()


class TimeoutPenalty(UnixSignalDeathPenalty):
    """RQ's job timeout raised as JobTimedOut, a BaseException, so that it reaches the job's runner, which runs the
    audit again under the one retry policy (workers/jobs/common.py); other timeouts are RQ's own."""

    def __init__(self, timeout: float, exception: type[BaseException] = JobTimeoutException, **kwargs: Any) -> None:
        super().__init__(timeout, JobTimedOut if exception is JobTimeoutException else exception, **kwargs)


def _past(queues: list[Queue], served: str) -> list[Queue]:
    """``queues`` rotated so that the one after ``served`` comes first (unchanged if ``served`` is not among them)."""
    names = [q.name for q in queues]
    if served not in names:
        return queues
    pos = names.index(served)
    return [*queues[pos + 1 :], *queues[: pos + 1]]


class FairWorker(SimpleWorker):
    """RQ takes the next job from the first of the worker's queues that holds one. The interactive lanes stay
    before the batch lanes; within each group the lanes rotate past the lane just served, so that the single
    audits of several keys, and their batches, take turns job by job (RQ's own round robin would rotate the
    interactive lanes behind the batch lanes). Through RQ's public seams only: ``reorder_queues`` records the lane
    served, and the worker's ``queue_class`` hands RQ's ``dequeue_any`` the queues in that turn.

    Signals: RQ's handlers (warm shutdown, then cold) hold only from the start of its loop until its teardown.
    Before, ``stop`` (memaudit's handlers) catches them and RQ's loop stops before taking a job
    (``check_for_suspension``, the first step of each turn of RQ's loop); from the teardown on, memaudit's handlers
    are back (RQ's would raise StopRequested out of the teardown). A stop RQ's handler receives sets ``stop`` too."""

    death_penalty_class = TimeoutPenalty

    def __init__(self, *args: Any, stop: threading.Event | None = None, **kwargs: Any) -> None:
        self.stop = stop if stop is not None else threading.Event()  # (RQ's find_by_key builds workers too)
        self.served: str | None = None  # the queue of the last job taken
        kwargs.setdefault("queue_class", _fair_queue_class(self))
        super().__init__(*args, **kwargs)

    def reorder_queues(self, reference_queue: Queue) -> None:
        self.served = reference_queue.name

    def check_for_suspension(self, burst: bool) -> None:
        if self.stop.is_set():  # signalled while RQ started (bootstrap, scheduler): stop before taking a job
            raise StopRequested
        super().check_for_suspension(burst)

    def request_stop(self, signum: int, frame: Any) -> None:
        self.stop.set()
        super().request_stop(signum, frame)

    def teardown(self) -> None:
        _catch_signals(self.stop)
        super().teardown()

    def set_shutdown_requested_date(self) -> None:
        # Called inside RQ's signal handler, so inside the running job (a SimpleWorker runs it in-process): a Redis
        # error here would fail the audit. The date is only shown by `rq info`; the stop itself holds without it.
        try:
            super().set_shutdown_requested_date()
        except RedisError:
            log.warning("worker: could not record its shutdown request in Redis; stopping after this job anyway")


def fair_order(queues: list[Queue], served: str | None) -> list[Queue]:
    """The interactive lanes, then the batch lanes, each group rotated past the queue ``served``."""
    interactive = [q for q in queues if not is_batch_queue(q.name)]
    lanes = [q for q in queues if is_batch_queue(q.name)]
    if served is None:
        return [*interactive, *lanes]
    return [*_past(interactive, served), *_past(lanes, served)]


def _fair_queue_class(worker: FairWorker) -> type[Queue]:
    """RQ's Queue, whose ``dequeue_any`` (RQ's worker passes it its queues in their given order) takes them in
    ``worker``'s turn."""

    class FairQueue(Queue):
        @classmethod
        def dequeue_any(cls, queues: Any, timeout: Any, *args: Any, **kwargs: Any) -> Any:
            return super().dequeue_any(fair_order(list(queues), worker.served), timeout, *args, **kwargs)

    return FairQueue


def _catch_signals(stop: threading.Event) -> None:
    """SIGTERM and SIGINT set ``stop`` (outside RQ's loop: RQ's handlers belong to the loop that ended, and would
    raise out of whatever runs next)."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())


def _work(stop: threading.Event, *, burst: bool) -> bool:
    """One RQ work loop; True when it ended because a signal asked the worker to stop (a burst loop that ran out
    of work returns False)."""
    _catch_signals(stop)  # until RQ's loop installs its own (FairWorker)
    settings = get_settings()
    redis = Redis.from_url(settings.redis_url)
    # The interactive lanes first, then the batch lanes, each in turn (app.queue.queue_names; FairWorker rotates).
    worker = FairWorker(queue_names(settings), connection=redis, serializer=JSONSerializer, stop=stop)
    try:
        worker.work(burst=burst, logging_level="INFO", with_scheduler=True)
    except StopRequested:  # RQ's handler, outside RQ's loop
        return True
    except RedisError:
        if not stop.is_set():
            raise
        # asked to stop while Redis is away: RQ's teardown could not unregister the worker; stop anyway
    return stop.is_set()


def _burst(settings: Settings) -> int:
    """Reconcile once (audits the database holds as queued but Redis lost run too), then work until the queues are
    empty: a null's next job is enqueued before its current one ends, so a burst worker runs every null to its end.
    A SIGTERM or SIGINT stops it (during a job, RQ's warm shutdown: the job ends first; a second signal a second
    later, RQ's cold shutdown)."""
    stop = threading.Event()
    _catch_signals(stop)
    reconcile_once(settings, get_dispatcher(), KINDS)
    if not stop.is_set():
        _work(stop, burst=True)
    return 0


def _work_forever() -> int:
    """RQ's loop ends on a Redis error it does not retry (e.g. Redis restarting while a job finishes):
    start it again, with backoff, until a signal asks the worker to stop."""
    stop = threading.Event()  # one for every loop: a signal while one fails is not forgotten by the next
    backoff = 1.0
    while not stop.is_set():
        started = time.monotonic()
        try:
            if _work(stop, burst=False):
                return 0
            log.warning("worker loop ended without a stop request (Redis trouble?); starting again")
        except RedisError as exc:
            log.warning("worker lost Redis (%s); starting again", type(exc).__name__)
        # (memaudit's handlers are in place here: installed by _work, and again by FairWorker.teardown)
        backoff = 1.0 if time.monotonic() - started > 60 else min(backoff * 2, MAX_BACKOFF)
        stop.wait(backoff)
    return 0
