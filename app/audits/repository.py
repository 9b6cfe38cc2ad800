"""Every query on audits. Visibility: admin and regulator see all; an auditor sees the audits it created;
a data-subject token sees its one audit; anyone else sees nothing (404, never 403, for another's audit)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Select, false, func, insert, select, update
from sqlalchemy.orm import Session

from app.auth.keys import Principal
from app.db.models import Audit, IdempotencyKey
from app.db.models.audit import ACTIVE_STATUSES
from app.db.models.auth import Role


def visible(stmt: Select, principal: Principal) -> Select:
    if principal.sees_everything:
        return stmt
    if principal.audit_scope is not None:
        return stmt.where(Audit.id == principal.audit_scope)
    if principal.role == Role.AUDITOR:
        return stmt.where(Audit.owner_key_id == principal.key_id)
    return stmt.where(false())


def get_visible(session: Session, principal: Principal, audit_id: str) -> Audit | None:
    return session.scalar(visible(select(Audit).where(Audit.id == audit_id), principal))


def page(
    session: Session,
    principal: Principal,
    *,
    filters: dict[str, object],
    page: int,
    page_size: int,
    created_from: datetime | None = None,
    created_before: datetime | None = None,
) -> tuple[list[Audit], int]:
    stmt = visible(select(Audit), principal)
    for column, value in filters.items():
        if value is not None:
            stmt = stmt.where(getattr(Audit, column) == value)
    if created_from is not None:
        stmt = stmt.where(Audit.created_at >= created_from)
    if created_before is not None:
        stmt = stmt.where(Audit.created_at < created_before)
    total = session.scalar(select(func.count()).select_from(stmt.subquery())) or 0
    rows = session.scalars(
        stmt.order_by(Audit.created_at.desc(), Audit.id).offset((page - 1) * page_size).limit(page_size)
    )
    return list(rows), total


def insert_many(session: Session, rows: list[dict[str, object]], chunk: int = 2000) -> None:
    """Insert audits in bulk (a batch's): each dict holds every column the audit needs, its id included."""
    for i in range(0, len(rows), chunk):
        session.execute(insert(Audit), rows[i : i + chunk])


def find_idempotency(session: Session, principal_id: str, key: str) -> IdempotencyKey | None:
    return session.scalar(
        select(IdempotencyKey).where(IdempotencyKey.principal == principal_id, IdempotencyKey.key == key)
    )


def queued_or_running(session: Session) -> list[Audit]:
    return list(session.scalars(select(Audit).where(Audit.status.in_(ACTIVE_STATUSES)).order_by(Audit.created_at)))


# -- the job lifecycle's writes (workers/jobs/common.py) -------------------------------------------------------
def status_of(session: Session, audit_id: str) -> str | None:
    return session.scalar(select(Audit.status).where(Audit.id == audit_id))


def set_progress(session: Session, audit_id: str, done: int, total: int) -> None:
    session.execute(update(Audit).where(Audit.id == audit_id).values(progress_done=done, progress_total=total))
