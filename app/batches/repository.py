"""Every query on batches and on the audits of a batch. Visibility as for audits: admin and regulator see every
batch, an auditor the batches its key created, anyone else none (404)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Select, false, func, select, update
from sqlalchemy.orm import Session

from app.audits.repository import visible
from app.auth.keys import Principal
from app.db.base import utcnow
from app.db.models import Audit, FactResult
from app.db.models.audit import AuditStatus
from app.db.models.auth import Role
from app.db.models.batch import Batch


def _visible(stmt: Select, principal: Principal) -> Select:
    if principal.sees_everything:
        return stmt
    if principal.role == Role.AUDITOR:
        return stmt.where(Batch.owner_key_id == principal.key_id)
    return stmt.where(false())


def get_visible(session: Session, principal: Principal, batch_id: str) -> Batch | None:
    return session.scalar(_visible(select(Batch).where(Batch.id == batch_id), principal))


def page_visible(session: Session, principal: Principal, page: int, page_size: int) -> tuple[list[Batch], int]:
    """The batches the principal may see, newest first (the dashboard's list of batches)."""
    stmt = _visible(select(Batch), principal)
    total = session.scalar(select(func.count()).select_from(stmt.subquery())) or 0
    rows = session.scalars(
        stmt.order_by(Batch.created_at.desc(), Batch.id).offset((page - 1) * page_size).limit(page_size)
    )
    return list(rows), total


def find_idempotent(session: Session, principal_id: str, key: str) -> Batch | None:
    return session.scalar(select(Batch).where(Batch.principal == principal_id, Batch.idempotency_key == key))


def status_counts(session: Session, batch_id: str) -> list[tuple[str, str, int]]:
    """(model, status, audits) of the batch: one grouped query, whatever the batch's size."""
    stmt = (
        select(Audit.model, Audit.status, func.count())
        .where(Audit.batch_id == batch_id)
        .group_by(Audit.model, Audit.status)
    )
    return [(m, s, n) for m, s, n in session.execute(stmt)]


def finished_span(session: Session, batch_id: str) -> tuple[int, datetime | None, datetime | None]:
    """(audits that ran to an end, first start, last finish) of the batch: its throughput so far."""
    stmt = select(func.count(), func.min(Audit.started_at), func.max(Audit.finished_at)).where(
        Audit.batch_id == batch_id,
        Audit.status.in_((AuditStatus.SUCCEEDED, AuditStatus.FAILED)),
        Audit.started_at.is_not(None),
    )
    n, first, last = session.execute(stmt).one()
    return n, first, last


def page_audits(
    session: Session, principal: Principal, batch_id: str, status: str | None, page: int, page_size: int
) -> tuple[list[Audit], int]:
    stmt = visible(select(Audit).where(Audit.batch_id == batch_id), principal)
    if status is not None:
        stmt = stmt.where(Audit.status == status)
    total = session.scalar(select(func.count()).select_from(stmt.subquery())) or 0
    rows = session.scalars(
        stmt.order_by(Audit.batch_row, Audit.model, Audit.id).offset((page - 1) * page_size).limit(page_size)
    )
    return list(rows), total


def succeeded_audits(session: Session, batch_id: str, model: str, limit: int) -> list[Audit]:
    stmt = (
        select(Audit)
        .where(Audit.batch_id == batch_id, Audit.model == model, Audit.status == AuditStatus.SUCCEEDED)
        .order_by(Audit.batch_row)
        .limit(limit)
    )
    return list(session.scalars(stmt))


def lenient_by_row(session: Session, batch_id: str, model: str) -> dict[tuple[int, str], bool]:
    """(roster row, property) -> memorized under some template, for the batch's succeeded audits on ``model``."""
    stmt = (
        select(Audit.batch_row, FactResult.property_id, FactResult.lenient)
        .join(FactResult, FactResult.audit_id == Audit.id)
        .where(Audit.batch_id == batch_id, Audit.model == model, Audit.status == AuditStatus.SUCCEEDED)
    )
    return {(row, pid): bool(lenient) for row, pid, lenient in session.execute(stmt)}


def cancel_queued(session: Session, batch_id: str) -> list[str]:
    """Cancel the batch's audits that have not started; the ids cancelled. Running audits run to their end."""
    ids = list(
        session.scalars(
            update(Audit)
            .where(Audit.batch_id == batch_id, Audit.status == AuditStatus.QUEUED)
            .values(status=AuditStatus.CANCELLED, finished_at=utcnow())
            .returning(Audit.id)
        )
    )
    session.execute(update(Batch).where(Batch.id == batch_id).values(cancelled_at=utcnow()))
    return ids
