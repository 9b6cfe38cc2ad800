"""A running job's heartbeat: renews the audit's lease, notices a cancellation or a lost lease within
``heartbeat_seconds``, and stops a job that does not stop by itself.

Jobs stop cooperatively at their next ``JobContext.progress()``; a job stuck where it reports nothing (a model
load, one long engine call, a bug that loops) is interrupted after ``cancel_grace_seconds``: the heartbeat raises
``Interrupted`` in the job's thread (CPython's ``PyThreadState_SetAsyncExc``). The exception arrives at the next
Python bytecode of that thread, i.e. as soon as a C call (a matrix product) returns. Whatever the job was doing
is abandoned; its writes cannot land anyway, because every commit of the job's thread is fenced by the lease
(app/reliability/leases.py)."""

from __future__ import annotations

import ctypes
import logging
import threading
import time

from app.db.engine import session_scope
from app.db.models.audit import AuditStatus
from app.reliability import leases
from app.settings import Settings

log = logging.getLogger("memaudit.jobs")

CANCELLED, LEASE_LOST = "cancelled", "lease lost"


class Interrupted(BaseException):  # BaseException: a job's `except Exception` must not swallow it
    """Raised asynchronously in a job that kept running after its audit was cancelled or its lease was lost."""


def _async_raise(thread_id: int, exc: type[BaseException] | None) -> None:
    """Schedule ``exc`` in another thread (None clears a pending one)."""
    payload = ctypes.py_object(exc) if exc is not None else None
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), payload)


class Heartbeat:
    def __init__(self, audit_id: str, owner: str, settings: Settings, job_thread: int) -> None:
        self.audit_id, self.owner, self.job_thread = audit_id, owner, job_thread
        self.interval = settings.heartbeat_seconds
        self.ttl, self.grace = settings.lease_ttl_seconds, settings.cancel_grace_seconds
        self.stop_reason: str | None = None
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._interrupted = False
        self._thread = threading.Thread(target=self._loop, name=f"heartbeat-{audit_id[:8]}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        last_renewed = noticed = time.monotonic()
        while not self._closed.wait(self.interval):
            now = time.monotonic()
            if self.stop_reason is not None:
                if now - noticed >= self.grace:
                    self._interrupt()
                continue
            try:
                with session_scope() as s:
                    if leases.renew(s, self.audit_id, self.owner, self.ttl):
                        last_renewed = now
                        continue
                    status = leases.status_of(s, self.audit_id)
                self.stop_reason = CANCELLED if status == AuditStatus.CANCELLED else LEASE_LOST
            except Exception as exc:  # the database is unreachable: our lease runs out while we cannot renew it
                log.warning("audit %s: cannot renew the lease (%s)", self.audit_id, type(exc).__name__)
                if now - last_renewed < self.ttl:
                    continue
                self.stop_reason = LEASE_LOST
            noticed = now
            log.info("audit %s: %s; the job stops at its next progress report", self.audit_id, self.stop_reason)

    def _interrupt(self) -> None:
        with self._lock:
            if self._closed.is_set() or self._interrupted:
                return
            self._interrupted = True
            log.warning(
                "audit %s: %s and the job did not stop in %.0f s; interrupting it",
                self.audit_id,
                self.stop_reason,
                self.grace,
            )
            _async_raise(self.job_thread, Interrupted)

    def close(self) -> None:
        """Called by the job's own thread when it ends; idempotent (it may be re-entered after an Interrupted)."""
        leases.unfence_commits()
        with self._lock:
            self._closed.set()
            if self._interrupted:
                _async_raise(self.job_thread, None)  # drop one that has not fired yet
        if threading.get_ident() != self._thread.ident:
            self._thread.join(timeout=self.interval + 5)
