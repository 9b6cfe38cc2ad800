"""HTTP endpoints of subject audits and subjects: parse, call the service, map results."""

from __future__ import annotations

from fastapi import APIRouter

from app.deps import CurrentPrincipal, SessionDep, SettingsDep, Submitter
from app.privacy import access_log
from app.subjects import erasure, service
from app.subjects.schemas import Detail, FactsPage
from app.validation import Id

router = APIRouter(tags=["subjects"])


@router.get("/audits/{audit_id}/facts", response_model=FactsPage, tags=["audits"])
def get_facts(audit_id: str, session: SessionDep, principal: CurrentPrincipal, detail: Detail = "summary") -> FactsPage:
    """Per fact: rank per template, share of templates at rank 1, strict/lenient, z*. With
    `detail=candidates`, every candidate's sentences, NLLs and score, so the ranking can be recomputed."""
    facts = service.read_facts(session, principal, audit_id, detail)
    access_log.record(session, principal, "read_facts", subject_id=facts.subject_id, audit_id=audit_id)
    session.commit()  # logged before the data leaves
    return facts


@router.delete("/subjects/{subject_id}")
def erase_subject(subject_id: Id, session: SessionDep, settings: SettingsDep, principal: Submitter) -> dict[str, int]:
    """Erase the service's own copy of a subject's personal data: the subject, facts, audits, results, cached
    sentence scores that name them, the audits' idempotency keys and job records (README "Erasure")."""
    return erasure.erase(session, settings, principal, subject_id)
