from __future__ import annotations

from fastapi import APIRouter

from app.deps import CurrentPrincipal, SessionDep, SettingsDep
from app.privacy import erasure

router = APIRouter(tags=["subjects"])


@router.delete("/subjects/{subject_id}")
def erase_subject(
    subject_id: int, session: SessionDep, settings: SettingsDep, principal: CurrentPrincipal
) -> dict[str, int]:
    """Erase the service's own copy of a subject's personal data: the subject, facts, audits, results, cached
    sentence scores that name them, the audits' idempotency keys and job records (README "Erasure")."""
    return erasure.erase(session, settings, principal, subject_id)
