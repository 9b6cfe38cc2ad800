"""Batch use cases: create (validate the roster, bulk-create subject audits, enqueue them at low priority),
read progress, page the audits, cancel. Services never commit; the caller does.

A batch's audits are ordinary subject audits (app.subjects.service.add_subject_audits): the same stored options,
job, leases, reconciler, erasure and visibility as a single audit; they only carry ``batch_id`` and go to the
batch queue (app.queue: fair scheduling)."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.audits.service import check_mode, check_model
from app.audits.service import to_read as audit_read
from app.auth.keys import Principal
from app.batches import repository
from app.batches.roster import RawRow, Roster, RosterTooLarge, RowError, rows_from_file, validate
from app.batches.schemas import MAX_MODELS, BatchAuditsPage, BatchRead, Counts
from app.db.engine import session_scope
from app.db.models.audit import AuditStatus
from app.db.models.batch import Batch
from app.errors import Conflict, InvalidInput, NotFound
from app.limits import check_active_batch_audits, check_batch_size
from app.queue import enqueue_many_after_commit, forget_after_commit
from app.settings import Settings
from app.subjects.kind import KIND as SUBJECT
from app.subjects.schemas import SubjectAuditOptions
from app.subjects.service import add_subject_audits
from app.validation import idempotency_digest

IDEMPOTENCY_CONSTRAINT = "uq_batches_principal"  # named in migrations/versions/0011_batches.py


class RosterRejected(InvalidInput):
    """Bad rows, and nothing created: a 422 listing each row's errors (row number and field, never the value)."""

    def __init__(self, roster: Roster) -> None:
        bad = roster.rejected_rows
        message = (
            (
                f"{bad} of {roster.rows} roster rows are invalid; nothing was created. Fix them, or send"
                " ?partial=true to create the valid rows only"
            )
            if roster.people
            else (f"none of the {roster.rows} roster rows is valid; nothing was created")
        )
        super().__init__("people", message)
        self.roster = roster


@dataclass
class BatchSpec:
    models: list[str]
    options: SubjectAuditOptions
    rows: Iterable[RawRow]  # read lazily: validation stops at the batch size limit
    request_hash: str
    partial: bool = False


def file_spec(
    data: bytes, filename: str | None, models: list[str], options: SubjectAuditOptions, partial: bool
) -> BatchSpec:
    """A batch from an uploaded roster file (API upload, or the command line's local client)."""
    digest = hashlib.sha256(data + json.dumps([models, options.model_dump(mode="json")]).encode()).hexdigest()
    return BatchSpec(models, options, rows_from_file(data, filename), digest, partial)


def create_batch(
    session: Session, settings: Settings, principal: Principal, spec: BatchSpec, idempotency_key: str | None
) -> tuple[Batch, Roster | None]:
    """(batch, roster); the roster is None when an Idempotency-Key replays an earlier batch."""
    if idempotency_key is not None:
        idempotency_key = idempotency_digest(idempotency_key)  # stored and compared as its hash, never as sent
        with session_scope() as lookup:  # a short read of its own, before this request's transaction
            seen = repository.find_idempotent(lookup, principal.id, idempotency_key)
            seen_id, seen_hash = (seen.id, seen.request_hash) if seen is not None else (None, None)
        if seen_id is not None:
            return _replay(session, seen_id, seen_hash, spec.request_hash), None
    if len(spec.models) > MAX_MODELS:  # the JSON schema says so too; a multipart upload reaches here unchecked
        raise InvalidInput("models", f"at most {MAX_MODELS} models in one batch; submit another batch for the rest")
    for i, model in enumerate(spec.models):
        check_mode(settings, check_model(settings, model, field=f"models[{i}]"), spec.options)
    if len(set(spec.models)) != len(spec.models):
        raise InvalidInput("models", "a model is listed twice; list each once")
    try:
        roster = validate(spec.rows, settings, settings.max_batch_size if settings.max_batch_size > 0 else math.inf)
    except RosterTooLarge:
        check_batch_size(settings, None)
        raise
    if roster.errors and (not spec.partial or not roster.people):
        raise RosterRejected(roster)
    check_active_batch_audits(session, settings, principal.key_id, len(roster.people) * len(spec.models))
    batch = Batch(
        principal=principal.id,
        owner_key_id=principal.key_id,
        models=spec.models,
        options=spec.options.model_dump(mode="json"),
        people=len(roster.people),
        rejected=roster.rejected_rows,
        idempotency_key=idempotency_key,
        request_hash=spec.request_hash,
    )
    session.add(batch)
    try:
        session.flush()  # the idempotency race is decided here, before thousands of rows are written
    except IntegrityError as exc:
        if idempotency_key is None or not _lost_idempotency_race(exc):
            raise
        session.rollback()
        winner = repository.find_idempotent(session, principal.id, idempotency_key)
        return _replay(session, winner.id, winner.request_hash, spec.request_hash), None
    ids = add_subject_audits(session, roster.people, spec.models, spec.options, principal.key_id, batch.id, settings)
    enqueue_many_after_commit(session, SUBJECT.job, ids, lane=SUBJECT.lane(settings, batch.id, principal.key_id))
    return batch, roster


def _lost_idempotency_race(exc: IntegrityError) -> bool:
    diag = getattr(exc.orig, "diag", None)  # psycopg names the constraint; SQLite names the columns
    if diag is not None:
        return diag.constraint_name == IDEMPOTENCY_CONSTRAINT
    return "batches.principal" in str(exc.orig)


def _replay(session: Session, batch_id: str, seen_hash: str | None, digest: str) -> Batch:
    if seen_hash != digest:
        raise Conflict("this key was already used with a different batch; use a new key", field="Idempotency-Key")
    return session.get(Batch, batch_id)


def get_batch(session: Session, principal: Principal, batch_id: str) -> Batch:
    batch = repository.get_visible(session, principal, batch_id)
    if batch is None:
        raise NotFound("no batch with this id (among those you may see)")
    return batch


def batch_read(session: Session, batch: Batch) -> BatchRead:
    total, per_model = Counts(), {m: Counts() for m in batch.models}
    for model, status, n in repository.status_counts(session, batch.id):
        for counts in (total, per_model.setdefault(model, Counts())):
            setattr(counts, status, getattr(counts, status) + n)
            counts.total += n
    active = total.queued + total.running
    if batch.cancelled_at is not None and not total.running:
        status = "cancelled"
    else:
        status = "finished" if not active else ("queued" if total.queued == total.total else "running")
    return BatchRead(
        id=batch.id,
        models=batch.models,
        options=batch.options,
        people=batch.people,
        rejected=batch.rejected,
        status=status,
        progress=total,
        per_model=per_model,
        eta_seconds=_eta(session, batch.id, active),
        created_at=batch.created_at,
        cancelled_at=batch.cancelled_at,
        links={
            "self": f"/batches/{batch.id}",
            "audits": f"/batches/{batch.id}/audits",
            "report": f"/batches/{batch.id}/report",
            "forget_set": f"/forget-set?batch_id={batch.id}",
        },
    )


def _eta(session: Session, batch_id: str, active: int) -> float | None:
    """Remaining audits over the throughput so far (audits finished per second since the first one started)."""
    if not active:
        return 0.0
    done, first, last = repository.finished_span(session, batch_id)
    if not done or first is None or last is None or last <= first:
        return None
    return round(active * (last - first).total_seconds() / done, 1)


def page_audits(
    session: Session, principal: Principal, batch: Batch, status: AuditStatus | None, page: int, page_size: int, kinds
) -> BatchAuditsPage:
    rows, total = repository.page_audits(session, principal, batch.id, status, page, page_size)
    return BatchAuditsPage(
        items=[audit_read(a, kinds) for a in rows],
        rows=[a.batch_row for a in rows],
        page=page,
        page_size=page_size,
        total=total,
    )


def cancel_batch(session: Session, principal: Principal, batch_id: str) -> Batch:
    """Cancel what has not run: one UPDATE, then, once committed, their queued job records are deleted from
    Redis in bulk (a job that is still taken ends at once: a job never runs a cancelled audit)."""
    batch = get_batch(session, principal, batch_id)
    if batch.cancelled_at is not None:
        raise Conflict("this batch is already cancelled")
    forget_after_commit(session, repository.cancel_queued(session, batch.id))
    session.refresh(batch)
    return batch


def errors_read(errors: list[RowError]) -> list[dict[str, object]]:
    return [{"row": e.row, "field": e.field, "message": e.message} for e in errors]
