from __future__ import annotations

from fastapi import APIRouter

from app.deps import CurrentPrincipal, SessionDep
from app.subjects import service
from app.validation import Id

router = APIRouter(tags=["subjects"])


@router.delete("/subjects/{subject_id}")
def erase_subject(subject_id: Id, session: SessionDep, principal: CurrentPrincipal) -> dict[str, int]:
    """Erase the service's own copy of a subject's personal data: the subject, facts, audits, results and
    cached sentence scores that name them."""
    return service.erase_subject(session, principal, subject_id)
