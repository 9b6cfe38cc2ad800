"""Every query of a person's request, its audits, recipients and deliveries. Visibility as for batches: admin and
regulator see every request and recipient, an auditor those its key created, anyone else none (404)."""

from __future__ import annotations

from sqlalchemy import Select, false, func, select
from sqlalchemy.orm import Session

from app.auth.keys import Principal
from app.db.models import Audit
from app.db.models.auth import Role
from app.db.models.requests import Delivery, PersonRequest, Recipient, RequestAudit
from app.db.models.verification import VerificationFact, VerificationPerson
from app.verification.schemas import PersonRole


def _visible(stmt: Select, principal: Principal, owner) -> Select:  # noqa: ANN001 (a column)
    if principal.audit_scope is not None:
        return stmt.where(false())
    if principal.sees_everything:
        return stmt
    if principal.role == Role.AUDITOR:
        return stmt.where(owner == principal.key_id)
    return stmt.where(false())


def get_visible(session: Session, principal: Principal, request_id: str) -> PersonRequest | None:
    stmt = select(PersonRequest).where(PersonRequest.id == request_id)
    return session.scalar(_visible(stmt, principal, PersonRequest.owner_key_id))


def page_visible(
    session: Session, principal: Principal, open_only: bool, page: int, page_size: int
) -> tuple[list[PersonRequest], int]:
    """The requests the principal may see, soonest due first (the officer's queue)."""
    stmt = _visible(select(PersonRequest), principal, PersonRequest.owner_key_id)
    if open_only:
        stmt = stmt.where(PersonRequest.answered_at.is_(None), PersonRequest.refused_at.is_(None))
    total = session.scalar(select(func.count()).select_from(stmt.subquery())) or 0
    rows = session.scalars(
        stmt.order_by(PersonRequest.due_at, PersonRequest.id).offset((page - 1) * page_size).limit(page_size)
    )
    return list(rows), total


def audits_of(session: Session, request_id: str) -> list[tuple[RequestAudit, Audit | None]]:
    stmt = (
        select(RequestAudit, Audit)
        .outerjoin(Audit, Audit.id == RequestAudit.audit_id)
        .where(RequestAudit.request_id == request_id)
        .order_by(RequestAudit.id)
    )
    return [(ra, a) for ra, a in session.execute(stmt)]


def states_of(session: Session, request_ids: list[str]) -> dict[str, list[str | None]]:
    """request id -> its audits' statuses (None: erased), for the queue's states in one query."""
    stmt = (
        select(RequestAudit.request_id, Audit.status)
        .outerjoin(Audit, Audit.id == RequestAudit.audit_id)
        .where(RequestAudit.request_id.in_(request_ids))
    )
    out: dict[str, list[str | None]] = {}
    for rid, status in session.execute(stmt):
        out.setdefault(rid, []).append(status)
    return out


def deliveries_of(session: Session, request_ids: list[str]) -> list[tuple[Delivery, Recipient]]:
    stmt = (
        select(Delivery, Recipient)
        .join(Recipient, Recipient.id == Delivery.recipient_id)
        .where(Delivery.request_id.in_(request_ids))
        .order_by(Delivery.delivered_at, Delivery.id)
    )
    return [(d, r) for d, r in session.execute(stmt)]


def delivery(session: Session, request_id: str, delivery_id: str) -> Delivery | None:
    return session.scalar(select(Delivery).where(Delivery.request_id == request_id, Delivery.id == delivery_id))


def deliveries_about(session: Session, audit_id: str) -> list[tuple[Delivery, Recipient]]:
    """The deliveries of one audit's forget set (the person's page of that audit)."""
    stmt = (
        select(Delivery, Recipient)
        .join(Recipient, Recipient.id == Delivery.recipient_id)
        .where(Delivery.audit_id == audit_id)
        .order_by(Delivery.delivered_at, Delivery.id)
    )
    return [(d, r) for d, r in session.execute(stmt)]


def recipient_visible(session: Session, principal: Principal, recipient_id: str) -> Recipient | None:
    stmt = select(Recipient).where(Recipient.id == recipient_id)
    return session.scalar(_visible(stmt, principal, Recipient.owner_key_id))


def recipients_visible(session: Session, principal: Principal, limit: int = 500) -> list[Recipient]:
    stmt = _visible(select(Recipient), principal, Recipient.owner_key_id)
    return list(session.scalars(stmt.order_by(Recipient.created_at, Recipient.id).limit(limit)))


def verified_facts(session: Session, verification_id: str, before_ids: list[str]) -> list[VerificationFact]:
    """The forget-set facts a verification checked for the request's person (its before audits)."""
    stmt = (
        select(VerificationFact)
        .join(VerificationPerson, VerificationPerson.id == VerificationFact.person_id)
        .where(
            VerificationFact.audit_id == verification_id,
            VerificationPerson.before_audit_id.in_(before_ids),
            VerificationPerson.role == PersonRole.FORGOTTEN,
            VerificationFact.target.is_(True),
        )
        .order_by(VerificationFact.id)
    )
    return list(session.scalars(stmt))


def recipient_names(session: Session, audit_id: str) -> dict[str, str]:
    """recipient id -> name, of the recipients an audit's forget set was delivered to (the person's page)."""
    return {r.id: r.name for _, r in deliveries_about(session, audit_id)}
