"""What an audit's page shows of its results: the section its kind declares (``AuditKind.page``: a builder that
reads through the kind's own service, and its template), the audited person's name, and one template's candidates
for the subject grid's drill-down. Every chart on the pages is drawn from a table of these numbers, so the numbers
are always there to read."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.audits.kinds import KindPage, KindRegistry
from app.auth.keys import Principal
from app.db.models import Audit, Subject
from app.db.models.audit import AuditStatus
from app.privacy import access_log
from app.subjects import service as subjects

CANDIDATES_PER_PAGE = 50


def kind_page(kinds: KindRegistry, audit: Audit) -> KindPage | None:
    kind = kinds.get(audit.kind)
    return getattr(kind, "page", None)


def for_audit(
    session: Session, principal: Principal, audit: Audit, page: int, kinds: KindRegistry
) -> tuple[str, dict[str, Any]] | None:
    """(template, results) of a succeeded audit's section, or None (not finished, or a kind without a page)."""
    declared = kind_page(kinds, audit)
    if declared is None or audit.status != AuditStatus.SUCCEEDED:
        return None
    return declared.template, declared.build(session, principal, audit, page)


def subject_name(session: Session, audit: Audit) -> str | None:
    """The audited person's name (subject audits), shown to whoever may see the audit."""
    subject = subjects.repository.get_subject(session, audit.subject_id) if audit.subject_id else None
    return subject.name if subject else None


def subject_names(session: Session, audits: list[Audit]) -> dict[int, str]:
    """subject id -> name, for the audits of a list (each one visible to the principal: the caller's query)."""
    ids = sorted({a.subject_id for a in audits if a.subject_id is not None})
    return {s.id: s.name for s in session.scalars(select(Subject).where(Subject.id.in_(ids)))} if ids else {}


def candidates(
    session: Session, principal: Principal, audit_id: str, fact: int, template: int, page: int
) -> dict[str, Any]:
    """One template's candidates, best first, paged: why the grid's cell has its rank."""
    canary = subjects.read_canary(session, principal, audit_id, fact, template)
    audit = subjects.visible_audit_of_kind(session, principal, audit_id, "subject")
    access_log.record(session, principal, "read_facts", subject_id=audit.subject_id, audit_id=audit_id)
    ranked = sorted(canary.candidates or [], key=lambda c: c.rank)
    pages = max(1, -(-len(ranked) // CANDIDATES_PER_PAGE))
    shown = ranked[(page - 1) * CANDIDATES_PER_PAGE : page * CANDIDATES_PER_PAGE]
    return {"canary": canary, "candidates": shown, "page": page, "pages": pages, "n": len(ranked)}
