"""What every job shares: load the audit, mark it running, report progress, honour cancellation, and end
in `succeeded`, `failed` (with a readable reason) or `cancelled`. Jobs receive an audit id only."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select, update

from app.db.base import utcnow
from app.db.engine import session_scope
from app.db.models import Audit
from app.db.models.audit import FINAL_STATUSES

log = logging.getLogger("memaudit.jobs")


class Cancelled(Exception):
    """The audit was cancelled while the job ran."""


class JobError(Exception):
    """A failure whose message is safe to show the user (no personal data)."""


@dataclass
class JobContext:
    audit_id: str
    kind: str
    model: str
    options: dict[str, Any]
    min_interval: float = 1.0
    _last_write: float = field(default=0.0)
    _done: int = 0
    _total: int = 0

    def progress(self, done: int, total: int, *, force: bool = False) -> None:
        """Record progress (throttled) and stop if the audit has been cancelled."""
        self._done, self._total = done, total
        now = time.monotonic()
        if not force and now - self._last_write < self.min_interval:
            return
        self._last_write = now
        with session_scope() as s:
            status = s.scalar(select(Audit.status).where(Audit.id == self.audit_id))
            if status == "cancelled":
                raise Cancelled
            s.execute(
                update(Audit).where(Audit.id == self.audit_id).values(progress_done=done, progress_total=total)
            )

    def check_cancelled(self) -> None:
        self.progress(self._done, self._total, force=True)


JobBody = Callable[[JobContext], dict[str, Any]]


def _start(audit_id: str, kind: str) -> JobContext | None:
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
        audit.status, audit.started_at, audit.error = "running", utcnow(), None
        audit.attempts += 1
        return JobContext(audit_id, audit.kind, audit.model, dict(audit.options or {}))


def _finish(audit_id: str, status: str, *, summary: dict[str, Any] | None = None, error: str | None = None) -> None:
    with session_scope() as s:
        values: dict[str, Any] = {"status": status, "finished_at": utcnow(), "error": error}
        if summary is not None:
            values["summary"] = summary
        # Never overwrite a cancellation that arrived while we worked.
        s.execute(update(Audit).where(Audit.id == audit_id, Audit.status == "running").values(**values))


def run_audit_job(audit_id: str, kind: str, body: JobBody) -> None:
    ctx = _start(audit_id, kind)
    if ctx is None:
        return
    log.info("audit %s (%s) started", audit_id, kind)
    try:
        summary = body(ctx)
    except Cancelled:
        log.info("audit %s cancelled", audit_id)
        return
    except JobError as exc:
        log.warning("audit %s failed: %s", audit_id, exc)
        _finish(audit_id, "failed", error=str(exc))
        return
    except Exception as exc:  # a bug or an environment problem: keep the worker alive, say what happened
        log.exception("audit %s failed with an unexpected error", audit_id)
        _finish(audit_id, "failed", error=f"internal error ({type(exc).__name__}); see the worker log")
        return
    with session_scope() as s:
        s.execute(
            update(Audit)
            .where(Audit.id == audit_id, Audit.status == "running")
            .values(progress_done=ctx._total or ctx._done, progress_total=ctx._total)
        )
    _finish(audit_id, "succeeded", summary=summary)
    log.info("audit %s succeeded", audit_id)
