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
from rq.utils import now as rq_now

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
    interactive lanes behind the batch lanes).

    Signals: RQ's handlers (warm shutdown, then cold) hold only from the start of its loop until its teardown.
    Before, ``stop`` (memaudit's handlers) catches them and RQ's loop stops before taking a job; from the
    teardown on, memaudit's handlers are back (RQ's would raise StopRequested out of the teardown)."""

    death_penalty_class = TimeoutPenalty

    def __init__(self, *args: Any, stop: threading.Event | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stop = stop if stop is not None else threading.Event()  # (RQ's find_by_key builds workers too)

    def reorder_queues(self, reference_queue: Queue) -> None:
        interactive = [q for q in self._ordered_queues if not is_batch_queue(q.name)]
        lanes = [q for q in self._ordered_queues if is_batch_queue(q.name)]
        self._ordered_queues = [*_past(interactive, reference_queue.name), *_past(lanes, reference_queue.name)]

    def _install_signal_handlers(self) -> None:
        super()._install_signal_handlers()
        if self.stop.is_set():  # signalled while RQ started (bootstrap, scheduler): stop before taking a job
            self._shutdown_requested_date = rq_now()
            self._stop_requested = True

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
    queues = [Queue(name, connection=redis, serializer=JSONSerializer) for name in queue_names(settings)]
    worker = FairWorker(queues, connection=redis, serializer=JSONSerializer, stop=stop)
    try:
        worker.work(burst=burst, logging_level="INFO", with_scheduler=True)
    except StopRequested:  # RQ's handler, outside RQ's loop
        return True
    except RedisError:
        if worker._shutdown_requested_date is None and not stop.is_set():
            raise
        # asked to stop while Redis is away: RQ's teardown could not unregister the worker; stop anyway
    return worker._shutdown_requested_date is not None or stop.is_set()


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
