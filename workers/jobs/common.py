"""What every job shares: claim the audit (a lease: one worker at a time), hand the job its typed options, report
progress, honour cancellation, and end in `succeeded`, `failed` (with a readable reason) or `cancelled`. Jobs
receive an audit id only. A model that cannot be loaded is a user-facing failure here, in one place, for every job.

While the job body runs, a heartbeat renews the lease and notices a cancellation; every commit of the job's
thread is fenced by the lease, so a run that lost its audit (cancelled, erased, or taken over after this worker
stalled) writes nothing. A lost database connection hands the audit back to the queue instead of failing it.

A job that works in steps (a null: a few fictitious people per job) stores one step and raises ``NextStep``: its
audit goes back to `queued` (not counted as an attempt) and its next job is sent to the tail of the queue it came
from, so no job holds a worker long. A run that times out (RQ's ``job_timeout_seconds``) goes through the one
retry policy: back to `queued` and run again, recorded as a timeout, until ``max_attempts`` runs.

A job that must wait for other audits (a verification for its nulls) raises ``Waiting``: its audit goes back to
`queued` saying what it waits for, and its next job is parked, not run, until the last of those audits ends: the
job that ends an audit wakes the audits waiting for it (app/reliability/waits.py). No job sleeps and re-queues."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from app.audits import repository
from app.db.base import utcnow
from app.db.engine import session_scope
from app.db.models import Audit
from app.db.models.audit import FINAL_STATUSES, AuditStatus
from app.queue import get_dispatcher
from app.reliability import leases, waits
from app.reliability.leases import LeaseLost
from app.settings import get_settings
from workers.jobs import evidence
from workers.jobs.heartbeat import CANCELLED, Heartbeat, Interrupted
from workers.lm.base import ModelLoadError, Scorer
from workers.lm.registry import get_scorer

log = logging.getLogger("memaudit.jobs")


class Cancelled(Exception):
    """The audit was cancelled while the job ran."""


class NextStep(Exception):  # a control-flow signal, like Cancelled
    """A job that works in steps has stored this step; its audit goes back to the queue for the next one."""


class Waiting(Exception):  # a control-flow signal, like NextStep
    """The job cannot go on until these audits have ended; its audit waits, `queued`, until the last one wakes it."""

    def __init__(self, audit_ids: list[str]) -> None:
        super().__init__(f"waiting for {len(audit_ids)} audits")
        self.audit_ids = audit_ids


class JobTimedOut(BaseException):  # like Interrupted: no `except Exception` may swallow it
    """RQ's job timeout (``job_timeout_seconds``), raised by the worker's death penalty (workers/worker.py). RQ's own
    JobTimeoutException is an Exception: a library's or the engine's `except Exception` (a model loader that then
    thinks its cache is broken) took it for its own failure and the job ran on past its limit."""


class JobError(Exception):
    """A failure whose message is safe to show the user (no personal data)."""


Options = TypeVar("Options", bound=BaseModel)


@dataclass
class JobContext(Generic[Options]):
    audit_id: str
    kind: str
    model: str
    options: Options  # the kind's options model, validated once from the audit's stored options
    min_interval: float = 1.0
    _last_write: float = field(default=0.0)
    _done: int = 0
    _total: int = 0
    _beat: Heartbeat | None = None
    attempt: int = 1  # this run's number (the audit's attempts, this one included)
    loaded: Scorer | None = None  # the audited model, once the body has loaded it

    def progress(self, done: int, total: int, *, force: bool = False) -> None:
        """Record progress (throttled) and stop if the audit has been cancelled or this run lost its lease. Cheap
        enough to call per engine batch: between writes it only reads a flag set by the heartbeat."""
        self._done, self._total = done, total
        if self._beat is not None and self._beat.stop_reason is not None:
            raise Cancelled if self._beat.stop_reason == CANCELLED else LeaseLost(self.audit_id)
        now = time.monotonic()
        if not force and now - self._last_write < self.min_interval:
            return
        self._last_write = now
        with session_scope() as s:
            if repository.status_of(s, self.audit_id) == AuditStatus.CANCELLED:
                raise Cancelled
            repository.set_progress(s, self.audit_id, done, total)

    def check_cancelled(self) -> None:
        self.progress(self._done, self._total, force=True)

    def scorer(self, name: str | None = None) -> Scorer:
        """The loaded audited model (or ``name``); a model that cannot load fails the audit with its reason."""
        scorer = get_scorer(name or self.model)
        if name in (None, self.model):
            self.loaded = scorer  # its backend, settings and fingerprint go into the audit's provenance
        return scorer


JobBody = Callable[[JobContext[Options]], dict[str, Any]]


def _start(audit_id: str, kind: str, options_type: type[Options], owner: str) -> JobContext[Options] | None:
    with session_scope() as s:
        audit = s.get(Audit, audit_id)
        if audit is None:
            log.warning("audit %s does not exist (deleted?); nothing to do", audit_id)
            return None
        if audit.status in FINAL_STATUSES:
            log.info("audit %s is already %s; nothing to do", audit_id, audit.status)
            return None
        if audit.kind != kind:
            raise ValueError(f"audit {audit_id} is a {audit.kind} audit, not {kind}")
        try:
            options = options_type.model_validate(audit.options or {})
        except ValidationError:  # stored by another version: a rerun would not change that
            log.exception("audit %s has options the %s job cannot read", audit_id, kind)
            audit.status, audit.finished_at = AuditStatus.FAILED, utcnow()
            audit.error = f"the audit's stored options do not fit this version of the {kind} job"
            return None
        ctx = JobContext(audit_id, audit.kind, audit.model, options, attempt=audit.attempts + 1)
        if not leases.claim(s, audit_id, owner, get_settings().lease_ttl_seconds):
            log.info("audit %s is running under another worker's live lease; not running it twice", audit_id)
            return None
        return ctx


def _finish(ctx: JobContext, owner: str, status: str, **values: Any) -> bool:
    """End this run (only if it still holds the lease: never overwrite a cancellation or another run), with its
    provenance and its evidence entry in the same transaction (workers/jobs/evidence.py); then wake the audits
    that waited for this one."""
    with session_scope() as s:
        released = leases.release(s, ctx.audit_id, owner, status=status, finished_at=utcnow(), **values)
        if released:
            evidence.record_finished(s, ctx.audit_id, ctx.loaded, get_settings())
    if released:
        _wake(awaiting=ctx.audit_id)
    return released


def _wake(*, among: list[str] | None = None, awaiting: str | None = None) -> None:
    """Send the parked jobs of the waiting audits whose awaited audits have all ended (app/reliability/waits.py);
    a wake that fails is left to the reconciler's."""
    try:
        with session_scope() as s:
            woken = waits.ready(s, among=among, awaiting=awaiting)
        if woken:
            get_dispatcher().wake(woken)
            log.info("woke %d audits that waited for %s", len(woken), awaiting or "other audits")
    except Exception as exc:  # the reconciler wakes them
        log.warning("could not wake the audits waiting (%s); the reconciler will", type(exc).__name__)


def _wait(ctx: JobContext, owner: str, awaited: list[str]) -> None:
    """Hand the audit back to `queued`, saying what it waits for, and park its next job; then check once: what it
    waits for may have ended meanwhile (its wake found no waiter yet)."""
    summary = waits.waiting_summary(awaited)
    _run_again(ctx.audit_id, owner, send=False, park=True, attempts=Audit.attempts - 1, summary=summary)
    _wake(among=[ctx.audit_id])


HAND_BACK_SECONDS = 300.0  # how long a run whose database went away keeps trying to hand its audit back
HAND_BACK_RETRY_SECONDS = 0.5


def _hand_back(audit_id: str, owner: str) -> None:
    """The database went away mid-run: give the audit back to `queued` and send its next job to the tail of this
    job's queue, as soon as the database answers again (retried every HAND_BACK_RETRY_SECONDS for at most
    HAND_BACK_SECONDS: the worker has nothing else to do without its database). So a running audit resumes within
    about a second of the database's return, not once its lease expires. If the lease was taken over meanwhile
    (the database was away longer than the lease), nothing is handed back: the reconciler has re-enqueued it."""

    def release() -> bool:
        with session_scope() as s:
            return leases.release(s, audit_id, owner, status=AuditStatus.QUEUED)

    released = _once_the_database_answers(audit_id, release)
    if released:
        get_dispatcher().follow_up(audit_id)
        log.info("audit %s handed back after the database came back; enqueued again", audit_id)


def _once_the_database_answers(audit_id: str, write: Callable[[], bool]) -> bool | None:
    """``write()``, retried every HAND_BACK_RETRY_SECONDS while the database is unreachable, for at most
    HAND_BACK_SECONDS; None if it never answered (the lease then expires and the reconciler runs the audit)."""
    deadline = time.monotonic() + HAND_BACK_SECONDS
    while True:
        try:
            return write()
        except Exception as exc:
            if not _transient(exc):
                raise
            if time.monotonic() >= deadline:
                log.warning("audit %s: database unreachable; the reconciler runs it once its lease expires", audit_id)
                return None
            time.sleep(HAND_BACK_RETRY_SECONDS)


def _run_again(audit_id: str, owner: str, *, send: bool = True, park: bool = False, **values: Any) -> None:
    """Hand the audit back to `queued` (with ``values``) and, with ``send``, send its next job to the tail of this
    job's queue (with ``park``, keep it parked instead; else the next process's reconciler enqueues it). Only if
    this run still held it: a run cancelled or taken over meanwhile hands nothing back. With the database gone,
    the lease expires and the reconciler enqueues it later."""
    try:
        with session_scope() as s:
            released = leases.release(s, audit_id, owner, status=AuditStatus.QUEUED, **values)
    except (OperationalError, InterfaceError):
        log.warning("audit %s: database unreachable; the reconciler retries it once its lease expires", audit_id)
        return
    if released and park:
        get_dispatcher().park(audit_id)
    elif released and send:
        get_dispatcher().follow_up(audit_id)
    elif not released:
        log.info("audit %s was cancelled or taken over while this run ended: nothing to run again", audit_id)


def _timed_out(ctx: JobContext, owner: str) -> None:
    """RQ's job timeout: run again (counted as an attempt) until ``max_attempts`` runs, then fail; either way
    recorded as a timeout."""
    settings = get_settings()
    limit, runs = settings.job_timeout_seconds, ctx.attempt
    if runs < settings.max_attempts:
        log.warning(
            "audit %s timed out after %s s (run %d of %d); it runs again",
            ctx.audit_id,
            limit,
            runs,
            settings.max_attempts,
        )
        error = f"timed out after {limit} s (run {runs} of at most {settings.max_attempts}); it runs again"
        _run_again(ctx.audit_id, owner, error=error)
        return
    log.warning("audit %s timed out after %s s in each of %d runs; failed", ctx.audit_id, limit, runs)
    error = (
        f"timed out after {limit} s in each of {runs} runs (job_timeout_seconds); not run again — submit it in "
        "smaller parts or raise the limit"
    )
    _finish(ctx, owner, AuditStatus.FAILED, error=error)


def _transient(exc: BaseException) -> bool:
    return isinstance(exc, OperationalError | InterfaceError) or (
        isinstance(exc, DBAPIError) and exc.connection_invalidated
    )


def _was_cancelled(audit_id: str) -> bool:
    try:
        with session_scope() as s:
            return repository.status_of(s, audit_id) == AuditStatus.CANCELLED
    except (OperationalError, InterfaceError):
        return False


def _call_fenced(ctx: JobContext, owner: str, body: JobBody) -> dict[str, Any]:
    leases.fence_commits(ctx.audit_id, owner, get_settings().lease_ttl_seconds)
    try:
        return body(ctx)
    finally:
        leases.unfence_commits()  # what follows (_finish) is itself conditional on the lease


def _exiting() -> bool:
    """Whether this process is exiting: the main thread has ended (an embedded runner's job thread outlives it by
    a moment; libraries then refuse new threads, e.g. a model loader's thread pool)."""
    return threading.current_thread() is not threading.main_thread() and not threading.main_thread().is_alive()


def _failed(ctx: JobContext, owner: str, exc: Exception) -> None:
    if isinstance(exc, JobError | ModelLoadError):  # messages that are safe and useful to show the user
        log.warning("audit %s failed: %s", ctx.audit_id, exc)
        _finish(ctx, owner, AuditStatus.FAILED, error=str(exc))
        return
    if _transient(exc):  # a bug or an environment problem: keep the worker alive, say what happened
        log.warning("audit %s: database connection lost (%s); handing it back", ctx.audit_id, type(exc).__name__)
        _hand_back(ctx.audit_id, owner)
        return
    log.exception("audit %s failed with an unexpected error", ctx.audit_id)
    _finish(ctx, owner, AuditStatus.FAILED, error=f"internal error ({type(exc).__name__}); see the worker log")


def _run_body(ctx: JobContext, owner: str, body: JobBody) -> None:
    try:
        summary = _call_fenced(ctx, owner, body)
    except LeaseLost:
        if _was_cancelled(ctx.audit_id):  # a cancellation releases the lease: say which it was
            log.info("audit %s cancelled", ctx.audit_id)
        else:
            log.warning(
                "audit %s: this run lost its lease (taken over or erased); it stops, writing nothing", ctx.audit_id
            )
        return
    except Cancelled:
        log.info("audit %s cancelled", ctx.audit_id)
        return
    except NextStep:  # one step stored: not an attempt that failed (the count that gives up on dying runs is kept)
        _run_again(ctx.audit_id, owner, attempts=Audit.attempts - 1)
        return
    except Waiting as waiting:  # not an attempt either
        _wait(ctx, owner, waiting.audit_ids)
        return
    except JobTimedOut:
        _timed_out(ctx, owner)
        return
    except Exception as exc:
        if _exiting():  # the process is exiting (a one-shot command): the failure is the exit's, not the audit's
            log.info("audit %s: stopped by the process exiting (%s); back to the queue", ctx.audit_id, exc)
            _run_again(ctx.audit_id, owner, send=False, attempts=Audit.attempts - 1)
            return
        _failed(ctx, owner, exc)
        return
    done = ctx._total or ctx._done
    # the body's writes are committed; a database gone away since is waited for (as a hand-back is), so that the
    # finished run is recorded within a second of its return, not run again once the lease expires
    finished = _once_the_database_answers(
        ctx.audit_id,
        lambda: _finish(
            ctx,
            owner,
            AuditStatus.SUCCEEDED,
            summary=summary,
            error=None,
            progress_done=done,
            progress_total=ctx._total,
        ),
    )
    if finished:
        log.info("audit %s succeeded", ctx.audit_id)
    elif finished is not None:
        log.info("audit %s finished, but was cancelled or taken over meanwhile: result not recorded", ctx.audit_id)


def run_audit_job(audit_id: str, kind: str, options_type: type[Options], body: JobBody[Options]) -> None:
    """Run ``body`` for the audit: ``options_type`` is the kind's options model (AuditKind.options); a body that
    works in steps raises ``NextStep`` after storing each one (module docstring)."""
    owner = leases.new_owner_id()
    ctx = _start(audit_id, kind, options_type, owner)
    if ctx is None:
        return
    log.info("audit %s (%s) started", audit_id, kind)
    beat = Heartbeat(audit_id, owner, get_settings(), threading.get_ident())
    ctx._beat = beat
    beat.start()
    try:
        _run_body(ctx, owner, body)
    except Interrupted:
        log.warning("audit %s: job interrupted (%s)", audit_id, beat.stop_reason)
    finally:
        while True:  # an Interrupted may still arrive while we close: close again (idempotent)
            try:
                beat.close()
                break
            except Interrupted:
                continue
