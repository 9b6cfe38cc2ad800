"""Audit use cases: create (idempotent), read, list, cancel. Services never commit; the caller does."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.audits import repository
from app.audits.kinds import KINDS, AuditKind
from app.audits.schemas import AuditCreated, AuditRead, Progress
from app.auth.keys import Principal, subject_token
from app.db.base import utcnow
from app.db.engine import session_scope
from app.db.models import Audit, IdempotencyKey
from app.errors import Conflict, Forbidden, InvalidInput, NotFound
from app.limits import check_active_audits
from app.queue import enqueue_after_commit, get_dispatcher
from app.settings import Settings

SUBMITTERS = ("admin", "auditor")
IDEMPOTENCY_CONSTRAINT = "uq_idempotency_keys_principal"  # named in migrations/versions/0001_spine.py
# Where each kind's results are read (the links of GET /audits/{id}).
RESULT_LINKS = {
    "subject": {"facts": "facts"},
    "coverage": {"records": "records"},
    "capacity": {"grid": "capacity", "series": "capacity/series"},
    "dynamics": {"strings": "strings", "series": "series"},
}


def check_model(settings: Settings, model: str) -> None:
    """A registered model, or `hf:<path>` where the settings allow it. The message never repeats the value, and
    says the same whether a path exists or not (the API does not look: the worker's disk is not the API's)."""
    if model in settings.models:
        return
    roots = settings.hf_roots()
    names = ", ".join(sorted(settings.models))
    if model.startswith("hf:") and len(model) > 3:
        if roots is None or hf_path_under(model[3:], roots):
            return
        where = "under the server's model roots (MEMAUDIT_MODEL_ROOTS)" if roots else "on this server (no model roots)"
        raise InvalidInput("model", f"hf: models are accepted only {where}; use one of {names} (GET /models)")
    hf = "" if roots == [] else " or 'hf:<local path or cached hub id>'" if roots is None else " or 'hf:<path>'"
    raise InvalidInput("model", f"unknown model: use one of {names} (GET /models){hf}")


def hf_path_under(target: str, roots: list[Path]) -> bool:
    """An absolute path that stays under a root once `..` and `.` are resolved (the worker also resolves links)."""
    if not os.path.isabs(target) or "\x00" in target:
        return False
    path = os.path.normpath(target)
    return any(path == str(root) or path.startswith(str(root).rstrip(os.sep) + os.sep) for root in roots)


def request_hash(body: BaseModel) -> str:
    canonical = json.dumps(body.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def create_audit(
    session: Session, settings: Settings, principal: Principal, body: Any, idempotency_key: str | None
) -> tuple[Audit, bool]:
    """Returns (audit, replayed). The job is enqueued after the caller commits.

    Idempotency rests on the unique (principal, key) constraint: of concurrent requests with one key, the first
    to commit wins; the others' insert fails and they replay the winner's audit (409 if their body differs).
    Nothing here locks a row while another request could wait on it."""
    if principal.role not in SUBMITTERS:
        raise Forbidden(f"submitting audits needs the role admin or auditor (you are {principal.role})")
    digest = request_hash(body)
    if idempotency_key is not None:
        if not 1 <= len(idempotency_key) <= 200:
            raise InvalidInput("Idempotency-Key", "the Idempotency-Key header must be 1 to 200 characters")
        with session_scope() as lookup:  # a short read of its own: the request's session holds no connection yet
            seen = repository.find_idempotency(lookup, principal.id, idempotency_key)
            seen_audit, seen_hash = (seen.audit_id, seen.request_hash) if seen is not None else (None, None)
        if seen_audit is not None:
            return _replay(session, seen_audit, seen_hash, digest), True
    kind = KINDS[body.kind]
    if body.model not in kind.own_models:
        check_model(settings, body.model)
    if kind.prefetch is not None:
        kind.prefetch(body, settings)  # outbound calls, before this request's transaction takes a connection
    check_active_audits(session, settings, principal.key_id)
    try:
        audit = _insert(session, settings, principal, body, kind, idempotency_key, digest)
    except IntegrityError as exc:
        if idempotency_key is None or not _lost_idempotency_race(exc):
            raise
        # This unit of work holds this audit's rows only: undo them (no savepoint: pysqlite's are unreliable).
        session.rollback()
        winner = repository.find_idempotency(session, principal.id, idempotency_key)
        return _replay(session, winner.audit_id, winner.request_hash, digest), True
    enqueue_after_commit(session, kind.job, audit.id)
    return audit, False


def _insert(session: Session, settings: Settings, principal: Principal, body: Any, kind: AuditKind,
            idempotency_key: str | None, digest: str) -> Audit:  # fmt: skip
    options = body.options.model_dump(mode="json") if getattr(body, "options", None) is not None else {}
    audit = Audit(kind=body.kind, model=body.model, options=options, owner_key_id=principal.key_id)
    session.add(audit)
    session.flush()
    kind.prepare(session, body, audit, settings)
    if idempotency_key is not None:
        session.add(IdempotencyKey(principal=principal.id, key=idempotency_key, request_hash=digest, audit_id=audit.id))
    session.flush()
    return audit


def _lost_idempotency_race(exc: IntegrityError) -> bool:
    diag = getattr(exc.orig, "diag", None)  # psycopg names the constraint; SQLite names the columns
    if diag is not None:
        return diag.constraint_name == IDEMPOTENCY_CONSTRAINT
    return "idempotency_keys.principal" in str(exc.orig)


def _replay(session: Session, audit_id: str, seen_hash: str, digest: str) -> Audit:
    if seen_hash != digest:
        message = "this key was already used with a different request body; use a new key"
        raise Conflict(message, field="Idempotency-Key")
    return session.get(Audit, audit_id)


def get_audit(session: Session, principal: Principal, audit_id: str) -> Audit:
    audit = repository.get_visible(session, principal, audit_id)
    if audit is None:
        raise NotFound("no audit with this id (among those you may see)")
    return audit


def cancel_audit(session: Session, principal: Principal, audit_id: str) -> Audit:
    audit = get_audit(session, principal, audit_id)
    if principal.role not in SUBMITTERS:
        raise Forbidden("cancelling an audit needs the role admin or the auditor who submitted it")
    if audit.status not in ("queued", "running"):
        raise Conflict(f"this audit is already {audit.status}; only queued or running audits can be cancelled")
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
