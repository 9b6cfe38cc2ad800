"""Audit use cases: create (idempotent), read, list, cancel. Services never commit; the caller does."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.audits import repository
from app.audits.kinds import AuditKind, KindRegistry
from app.audits.schemas import AuditCreated, AuditRead, Progress
from app.auth.keys import Principal, subject_token
from app.db.base import utcnow
from app.db.engine import session_scope
from app.db.models import Audit, IdempotencyKey
from app.db.models.audit import ACTIVE_STATUSES, AuditStatus
from app.errors import Conflict, InvalidInput, NotFound
from app.limits import check_active_audits
from app.queue import enqueue_after_commit, get_dispatcher
from app.settings import Settings
from app.validation import idempotency_digest
from core.models import ModelName, ModelNameError, parse_model_name

IDEMPOTENCY_CONSTRAINT = "uq_idempotency_keys_principal"  # named in migrations/versions/0001_spine.py


def check_model(settings: Settings, model: str, field: str = "model") -> ModelName:
    """The name parsed as the worker will parse it: anything a job would reject by name is a 422 here. The API
    does not look at the disk (the worker's disk is not the API's)."""
    try:
        return parse_model_name(model, settings.models, settings.hf_roots())
    except ModelNameError as exc:
        raise InvalidInput(field, str(exc)) from None


GENERATION_ONLY_BACKENDS = frozenset({"openai-chat"})  # no prompt log-probs: they answer questions, never score


def check_mode(settings: Settings, model: ModelName, options: Any, field: str = "options.mode") -> None:
    """A chat endpoint gives no prompt log-probabilities: an audit of it must ask for generation mode (a 422 naming
    ``options.mode`` otherwise; a kind without that option cannot audit it at all)."""
    spec = settings.models.get(model.base) if model.registered else None
    if spec is None or spec.backend not in GENERATION_ONLY_BACKENDS or getattr(options, "mode", None) == "generation":
        return
    raise InvalidInput(
        field,
        f"model {model.base!r} is a chat endpoint without prompt log-probabilities: it can be audited only by a "
        'subject audit with options.mode "generation"; set it, or choose a model that scores sentences',
    )


def request_hash(body: BaseModel) -> str:
    canonical = json.dumps(body.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def create_audit(
    session: Session,
    settings: Settings,
    principal: Principal,
    body: Any,
    idempotency_key: str | None,
    kinds: KindRegistry,
) -> tuple[Audit, bool]:
    """Returns (audit, replayed). The job is enqueued after the caller commits. Roles: the router's (Submitter).

    Idempotency rests on the unique (principal, key) constraint: of concurrent requests with one key, the first
    to commit wins; the others' insert fails and they replay the winner's audit (409 if their body differs).
    Nothing here locks a row while another request could wait on it."""
    digest = request_hash(body)
    if idempotency_key is not None:
        if not 1 <= len(idempotency_key) <= 200:
            raise InvalidInput("Idempotency-Key", "the Idempotency-Key header must be 1 to 200 characters")
        idempotency_key = idempotency_digest(idempotency_key)  # stored and compared as its hash, never as sent
        with session_scope() as lookup:  # a short read of its own: the request's session holds no connection yet
            seen = repository.find_idempotency(lookup, principal.id, idempotency_key)
            seen_audit, seen_hash = (seen.audit_id, seen.request_hash) if seen is not None else (None, None)
        if seen_audit is not None:
            return _replay(session, seen_audit, seen_hash, digest), True
    kind = kinds[body.kind]
    if body.model not in kind.own_models:
        check_mode(settings, check_model(settings, body.model), getattr(body, "options", None))
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
    # where it waits is the kind's to say (a null: on a batch lane), as when the reconciler re-queues it
    lane = kind.lane(settings)
    enqueue_after_commit(session, kind.job, audit.id, lane=lane, key=principal.key_id)
    return audit, False


def _insert(
    session: Session,
    settings: Settings,
    principal: Principal,
    body: Any,
    kind: AuditKind,
    idempotency_key: str | None,
    digest: str,
) -> Audit:
    audit = Audit(kind=kind.name, model=body.model, options=kind.stored_options(body), owner_key_id=principal.key_id)
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


def visible_audit_of_kind(session: Session, principal: Principal, audit_id: str, kind: str) -> Audit:
    """The audit if the principal may see it and it is of ``kind``; else 404 (a kind's result pages only)."""
    audit = get_audit(session, principal, audit_id)
    if audit.kind != kind:
        raise NotFound(f"this audit is a {audit.kind} audit; this page shows the results of {kind} audits")
    return audit


def cancel_audit(session: Session, principal: Principal, audit_id: str) -> Audit:
    audit = get_audit(session, principal, audit_id)
    if audit.status not in ACTIVE_STATUSES:
        raise Conflict(f"this audit is already {audit.status}; only queued or running audits can be cancelled")
    audit.status, audit.finished_at = AuditStatus.CANCELLED, utcnow()
    get_dispatcher().cancel(audit.id)
    return audit


def to_read(audit: Audit, kinds: KindRegistry) -> AuditRead:
    links = {"self": f"/audits/{audit.id}"}
    if audit.kind in kinds:
        links.update({name: f"/audits/{audit.id}/{path}" for name, path in kinds[audit.kind].links(audit).items()})
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
        provenance=audit.provenance,
    )


def to_created(audit: Audit, settings: Settings, kinds: KindRegistry) -> AuditCreated:
    token = subject_token(audit.id, settings) if audit.kind in kinds and kinds[audit.kind].subject_token else None
    return AuditCreated(**to_read(audit, kinds).model_dump(), subject_token=token)
