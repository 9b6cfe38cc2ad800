"""Audit use cases: create (idempotent), read, list, cancel. Services never commit; the caller does."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel
from sqlalchemy.orm import Session

from app.audits import repository
from app.audits.kinds import KINDS
from app.audits.schemas import AuditCreated, AuditRead, Progress
from app.auth.keys import Principal, subject_token
from app.db.base import utcnow
from app.db.models import Audit, IdempotencyKey
from app.errors import Conflict, Forbidden, InvalidInput, NotFound
from app.queue import enqueue_after_commit, get_dispatcher
from app.settings import Settings

SUBMITTERS = ("admin", "auditor")
# Where each kind's results are read (the links of GET /audits/{id}).
RESULT_LINKS = {
    "subject": {"facts": "facts"},
    "coverage": {"records": "records"},
    "capacity": {"grid": "capacity", "series": "capacity/series"},
    "dynamics": {"strings": "strings", "series": "series"},
    "null": {"null": "null"},
}


def check_model(settings: Settings, model: str) -> None:
    if model in settings.models or (model.startswith("hf:") and len(model) > 3):
        return
    names = ", ".join(sorted(settings.models))
    raise InvalidInput(
        "model", f"unknown model {model!r}: use one of {names} (GET /models) or 'hf:<local path or hub id>'"
    )


def request_hash(body: BaseModel) -> str:
    canonical = json.dumps(body.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def create_audit(
    session: Session, settings: Settings, principal: Principal, body: Any, idempotency_key: str | None
) -> tuple[Audit, bool]:
    """Returns (audit, replayed). The job is enqueued after the caller commits."""
    if principal.role not in SUBMITTERS:
        raise Forbidden(f"submitting audits needs the role admin or auditor (you are {principal.role})")
    digest = request_hash(body)
    if idempotency_key is not None:
        if not 1 <= len(idempotency_key) <= 200:
            raise InvalidInput("Idempotency-Key", "the Idempotency-Key header must be 1 to 200 characters")
        seen = repository.find_idempotency(session, principal.id, idempotency_key)
        if seen is not None:
            if seen.request_hash != digest:
                raise InvalidInput(
                    "Idempotency-Key", "this key was already used with a different request body; use a new key"
                )
            return session.get(Audit, seen.audit_id), True
    kind = KINDS[body.kind]
    if body.model not in kind.own_models:
        check_model(settings, body.model)
    options = body.options.model_dump(mode="json") if getattr(body, "options", None) is not None else {}
    audit = Audit(kind=body.kind, model=body.model, options=options, owner_key_id=principal.key_id)
    session.add(audit)
    session.flush()
    kind.prepare(session, body, audit, settings)
    if idempotency_key is not None:
        session.add(IdempotencyKey(principal=principal.id, key=idempotency_key, request_hash=digest, audit_id=audit.id))
    session.flush()
    enqueue_after_commit(session, kind.job, audit.id)
    return audit, False


def get_audit(session: Session, principal: Principal, audit_id: str) -> Audit:
    audit = repository.get_visible(session, principal, audit_id)
    if audit is None:
        raise NotFound(f"no audit with id {audit_id!r}")
    return audit


def cancel_audit(session: Session, principal: Principal, audit_id: str) -> Audit:
    audit = get_audit(session, principal, audit_id)
    if principal.role not in SUBMITTERS:
        raise Forbidden("cancelling an audit needs the role admin or the auditor who submitted it")
    if audit.status not in ("queued", "running"):
        raise Conflict(f"audit {audit_id} is already {audit.status}; only queued or running audits can be cancelled")
    audit.status, audit.finished_at = "cancelled", utcnow()
    get_dispatcher().cancel(audit.id)
    return audit


def to_read(audit: Audit) -> AuditRead:
    links = {"self": f"/audits/{audit.id}"}
    links.update({name: f"/audits/{audit.id}/{path}" for name, path in RESULT_LINKS.get(audit.kind, {}).items()})
    return AuditRead(
        id=audit.id,
        kind=audit.kind,
        model=audit.model,
        status=audit.status,
        progress=Progress(done=audit.progress_done, total=audit.progress_total),
        options=audit.options or {},
        summary=audit.summary,
        error=audit.error,
        subject_id=audit.subject_id,
        created_at=audit.created_at,
        started_at=audit.started_at,
        finished_at=audit.finished_at,
        links=links,
    )


def to_created(audit: Audit, settings: Settings) -> AuditCreated:
    token = subject_token(audit.id, settings) if audit.kind == "subject" else None
    return AuditCreated(**to_read(audit).model_dump(), subject_token=token)
