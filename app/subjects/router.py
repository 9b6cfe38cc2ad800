"""HTTP endpoints of subject audits and subjects: parse, call the service, map results."""

from __future__ import annotations

from fastapi import APIRouter

from app.deps import CurrentPrincipal, SessionDep, Submitter
from app.subjects import service
from app.subjects.schemas import Detail, FactsPage
from app.validation import Id

router = APIRouter(tags=["subjects"])


@router.get("/audits/{audit_id}/facts", response_model=FactsPage, tags=["audits"])
def get_facts(
    audit_id: str, session: SessionDep, principal: CurrentPrincipal, detail: Detail = "summary"
) -> FactsPage:
    """Per fact: rank per template, share of templates at rank 1, strict/lenient, z*. With
    `detail=candidates`, every candidate's sentences, NLLs and score, so the ranking can be recomputed."""
    return service.read_facts(session, principal, audit_id, detail)


@router.delete("/subjects/{subject_id}")
def erase_subject(subject_id: Id, session: SessionDep, principal: Submitter) -> dict[str, int]:
    """Erase the service's own copy of a subject's personal data: the subject, facts, audits, results and
    cached sentence scores that name them."""
    return service.erase_subject(session, principal, subject_id)
