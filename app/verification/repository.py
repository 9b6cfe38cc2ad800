"""Every query of verification audits."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.audits.repository import visible
from app.auth.keys import Principal
from app.db.models import Audit, Subject
from app.db.models.audit import AuditStatus
from app.db.models.verification import VerificationFact, VerificationPerson


def newest_before_audit(session: Session, principal: Principal, subject_id: int, model: str) -> Audit | None:
    """The newest succeeded subject audit of ``subject_id`` on ``model`` that ``principal`` may see."""
    stmt = visible(select(Audit), principal).where(
        Audit.kind == "subject",
        Audit.subject_id == subject_id,
        Audit.model == model,
        Audit.status == AuditStatus.SUCCEEDED,
    )
    return session.scalars(stmt.order_by(Audit.created_at.desc(), Audit.id).limit(1)).first()


def audited_subjects(session: Session, principal: Principal, model: str, limit: int) -> list[tuple[int, str]]:
    """(subject id, name) of the subjects with a succeeded subject audit on ``model`` that ``principal`` may see,
    newest subject first, at most ``limit`` (the name-neighbour search reads no more)."""
    audited = visible(select(Audit.subject_id), principal).where(
        Audit.kind == "subject",
        Audit.model == model,
        Audit.status == AuditStatus.SUCCEEDED,
        Audit.subject_id.is_not(None),
    )
    stmt = select(Subject.id, Subject.name).where(Subject.id.in_(audited)).order_by(Subject.id.desc()).limit(limit)
    return [(sid, name) for sid, name in session.execute(stmt)]


def batch_subjects(session: Session, batch_id: str, model: str, limit: int) -> list[int]:
    """The subjects of a batch's audits on ``model``, in roster order (at most ``limit``)."""
    stmt = (
        select(Audit.subject_id)
        .where(Audit.batch_id == batch_id, Audit.model == model, Audit.subject_id.is_not(None))
        .order_by(Audit.batch_row, Audit.id)
        .limit(limit)
    )
    return list(dict.fromkeys(session.scalars(stmt)))


def people(session: Session, audit_id: str) -> list[VerificationPerson]:
    stmt = select(VerificationPerson).where(VerificationPerson.audit_id == audit_id)
    return list(session.scalars(stmt.order_by(VerificationPerson.position)))


def facts_page(
    session: Session, audit_id: str, page: int, page_size: int
) -> tuple[list[tuple[VerificationFact, VerificationPerson]], int]:
    stmt = (
        select(VerificationFact, VerificationPerson)
        .join(VerificationPerson, VerificationPerson.id == VerificationFact.person_id)
        .where(VerificationFact.audit_id == audit_id)
    )
    total = session.scalar(select(func.count()).where(VerificationFact.audit_id == audit_id)) or 0
    rows = session.execute(
        stmt.order_by(VerificationPerson.position, VerificationFact.id).offset((page - 1) * page_size).limit(page_size)
    )
    return [(f, p) for f, p in rows], total


def delete_facts(session: Session, person_id: int) -> None:
    for fact in session.scalars(select(VerificationFact).where(VerificationFact.person_id == person_id)):
        session.delete(fact)
    session.flush()


def verification_of(session: Session, before_audit_id: str, subject_id: int, property_id: str) -> dict | None:
    """The newest succeeded verification of one forget-set fact (this audit's, this person's, this property's):
    which verification, the after model, the fact's status and its after p-value; None when none checked it."""
    row = session.execute(
        select(VerificationFact.status, VerificationFact.p_after, Audit.id, Audit.model)
        .join(VerificationPerson, VerificationPerson.id == VerificationFact.person_id)
        .join(Audit, Audit.id == VerificationFact.audit_id)
        .where(
            VerificationPerson.before_audit_id == before_audit_id,
            VerificationPerson.subject_id == subject_id,
            VerificationFact.property_id == property_id,
            VerificationFact.target.is_(True),
            Audit.status == AuditStatus.SUCCEEDED,
        )
        .order_by(Audit.finished_at.desc(), Audit.id)
        .limit(1)
    ).first()
    if row is None:
        return None
    status, p_after, audit_id, model = row
    return {"verified_by": audit_id, "after_model": model, "status": status, "p_after": p_after}
