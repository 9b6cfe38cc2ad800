"""What every job shares: load the audit, mark it running, hand the job its typed options, report progress,
honour cancellation, and end in `succeeded`, `failed` (with a readable reason) or `cancelled`. Jobs receive an
audit id only. A model that cannot be loaded is a user-facing failure here, in one place, for every job."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from app.audits import repository
from app.db.base import utcnow
from app.db.engine import session_scope
from app.db.models import Audit
from app.db.models.audit import FINAL_STATUSES, AuditStatus
from workers.lm.base import ModelLoadError, Scorer
from workers.lm.registry import get_scorer

log = logging.getLogger("memaudit.jobs")


class Cancelled(Exception):
    """The audit was cancelled while the job ran."""


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

    def progress(self, done: int, total: int, *, force: bool = False) -> None:
        """Record progress (throttled) and stop if the audit has been cancelled."""
        self._done, self._total = done, total
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
        return get_scorer(name or self.model)


JobBody = Callable[[JobContext[Options]], dict[str, Any]]


def _start(audit_id: str, kind: str, options_type: type[Options]) -> JobContext[Options] | None:
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
        audit.status, audit.started_at, audit.error = AuditStatus.RUNNING, utcnow(), None
        audit.attempts += 1
        return JobContext(audit_id, audit.kind, audit.model, options)


def _finish(audit_id: str, status: str, *, summary: dict[str, Any] | None = None, error: str | None = None) -> None:
    with session_scope() as s:
        values: dict[str, Any] = {"status": status, "finished_at": utcnow(), "error": error}
        if summary is not None:
            values["summary"] = summary
        repository.update_if_running(s, audit_id, **values)


def run_audit_job(audit_id: str, kind: str, options_type: type[Options], body: JobBody[Options]) -> None:
    """Run ``body`` for the audit: ``options_type`` is the kind's options model (AuditKind.options)."""
    ctx = _start(audit_id, kind, options_type)
    if ctx is None:
        return
    log.info("audit %s (%s) started", audit_id, kind)
    try:
        summary = body(ctx)
    except Cancelled:
        log.info("audit %s cancelled", audit_id)
        return
    except (JobError, ModelLoadError) as exc:  # messages that are safe and useful to show the user
        log.warning("audit %s failed: %s", audit_id, exc)
        _finish(audit_id, AuditStatus.FAILED, error=str(exc))
        return
    except Exception as exc:  # a bug or an environment problem: keep the worker alive, say what happened
        log.exception("audit %s failed with an unexpected error", audit_id)
        _finish(audit_id, AuditStatus.FAILED, error=f"internal error ({type(exc).__name__}); see the worker log")
        return
    with session_scope() as s:
        repository.update_if_running(s, audit_id, progress_done=ctx._total or ctx._done, progress_total=ctx._total)
    _finish(audit_id, AuditStatus.SUCCEEDED, summary=summary)
    log.info("audit %s succeeded", audit_id)
